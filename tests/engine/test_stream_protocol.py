"""A run over RabbitMQ's stream protocol on a private node (rabbitmq_stream on).

Two publishers at full speed into one stream, the confirm window (in-flight) and the
consumer's credit (prefetch) steered while the run goes, then a second consumer added that
reads the stream from its first offset. What is checked: the window in force is what each
publisher's pending confirms show right after each of its sends, their high-water mark
(never more than the new window once the change reached it, more before: the once-a-second
ticks also count what was sent under the old window and not yet confirmed, 57 a second
after the change with both cores busy), the credit in force is what the broker reports of
the subscription, nothing confirmed is lost, and the second consumer's reading of what the
first already read counts as replayed, not as duplicates. And the broker samples the
session recorded carry the stream plugin's figures: every run client's stream connection,
and the consumers' offset lag, above 0 while the credit holds the consumer back from
publishers at full speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flowdeck.collectors import Broker, LocalBroker
from flowdeck.engine.controller import Controller
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec, parse_schedule
from flowdeck.engine.stream.publisher import StreamPublisher
from tests.engine.pending_marks import pending_after_sends
from tests.engine.updates import collect_updates
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    node = private_broker()
    yield node
    private_broker.discard(node)


async def _credits(node: LocalBroker, seen: list[tuple[float, int]], stop: asyncio.Event) -> None:
    """The broker's credit of each stream subscription, twice a second, until ``stop``."""
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(auth=("guest", "guest"), timeout=5) as http:
        while not stop.is_set():
            answer = await http.get(f"{node.management_url}/api/stream/consumers")
            if answer.status_code == 200:
                for consumer in answer.json():
                    seen.append((loop.time(), int(consumer.get("credits", -1))))
            await asyncio.sleep(0.5)


async def test_stream_protocol_run_steered_live_loses_nothing_and_counts_replays(
    node: LocalBroker, tmp_path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = RunSpec(
        name="stream-protocol",
        protocol="stream",
        queue_type="stream",
        queue_pattern=f"{unique_name}-%d",
        publishers=2,
        consumers=1,
        rate=0,  # full speed: the window alone holds the publishers back
        inflight=50,
        prefetch=2,
        stream_offset="first",
        message_size=200,
        duration=15,
        workers=0,
        schedule=parse_schedule(
            [
                {"at": 5, "change": "inflight=7"},
                {"at": 5, "change": "prefetch=5"},
                {"at": 10, "change": "consumers=2"},
            ]
        ),
    )
    controller = Controller(
        spec,
        broker=Broker.parse(node.uri, management_url=node.management_url),
        recording=RunRecording(tmp_path),
        drain_seconds=20,
    )
    _events, ticks = collect_updates(controller)
    marks = pending_after_sends(monkeypatch, StreamPublisher)
    credits: list[tuple[float, int]] = []
    stop = asyncio.Event()
    await controller.start()
    loop = asyncio.get_running_loop()
    began = loop.time()
    watching = asyncio.create_task(_credits(node, credits, stop))
    summary = await asyncio.wait_for(controller.wait(), spec.duration + 120)
    stop.set()
    await watching

    safety = summary.safety
    assert safety.published > 1000
    assert safety.confirmed == safety.published
    assert safety.lost == 0
    assert safety.duplicates == 0
    # The second consumer read from the first offset what the first had already read.
    read_before = max(t.totals.consumed for t in ticks if t.elapsed < 10)
    assert safety.replayed >= read_before > 0

    # The window: each publisher's unconfirmed messages right after its sends never above
    # the window in force (50, then 7 from the change on: the ticks' settings say when the
    # change was in force), and the ticks' total never above the two windows of 50.
    assert max(t.pending_confirms for t in ticks) <= 2 * 50
    before = [n for at, _, n in marks if 1 <= at - began < 5]
    after = [n for at, _, n in marks if 6 <= at - began < 15]
    assert before and after
    assert max(after) <= 7 < max(before) <= 50
    assert {t.settings.inflight for t in ticks if 6 <= t.elapsed < 15} == {7}

    # The credit: the broker's count of a subscription's credits left, all of them while
    # the consumer is idle (before publishing, and once it caught up in the drain): the
    # prefetch in force. At full speed they are all in use (0).
    early = [c for at, c in credits if at - began < 4.5]
    late = [c for at, c in credits if at - began >= spec.duration]
    assert early and late
    assert max(early) == 2
    assert max(late) == 5

    # The stream figures, polled with every management sample and recorded.
    assert summary.session_dir is not None
    polled = [
        s
        for s in open_session(Path(summary.session_dir)).broker_samples()
        if s.source == "management" and not s.stale and s.stream_connections is not None
    ]
    assert len(polled) >= 2
    # (stream connections, stream publishers + consumers) as the broker counted them
    clients = [
        (s.stream_connections or 0, (s.stream_publishers or 0) + (s.stream_consumers or 0))
        for s in polled
    ]
    # Each client has its own connection, but the connection listing shows one only once it
    # emitted its first statistics, a poll or so after the plugin lists its publisher or
    # consumer (0 connections for 3 clients at 3.3 s, all 3 at 6.3 s): judged where the
    # broker listed the same clients for the two polls before.
    settled = [
        now
        for (_, first), (_, second), now in zip(clients, clients[1:], clients[2:], strict=False)
        if first == second == now[1]
    ]
    assert settled and all(connections >= listed for connections, listed in settled), clients
    assert max(connections for connections, _ in clients) >= spec.publishers + spec.consumers
    lags = [s.stream_offset_lag for s in polled if s.stream_offset_lag is not None]
    assert lags and min(lags) >= 0
    assert max(lags) > 0  # credit 2, then 5, against two publishers at full speed
    assert all(0 <= (s.stream_offset_lag_max or 0) <= (s.stream_offset_lag or 0) for s in polled)
    assert {s.stream_errored for s in polled} <= {0, None}
    print(
        f"\nstream protocol: published {safety.published:,}, consumed {safety.consumed:,}, "
        f"replayed {safety.replayed:,}, lost {safety.lost}; pending before {max(before)} "
        f"after {max(after)}; broker credits before {max(early)} after {max(late)}; "
        f"{len(polled)} samples with stream figures, (stream connections, clients listed) "
        f"{clients}, offset lag up to {max(lags):,}"
    )
