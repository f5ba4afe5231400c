"""A run over AMQP 1.0 on a private node (rabbitmq_amqp1_0 on), to a quorum queue.

Two senders at 1,000 msg/s each, the unsettled window (in-flight) and the receiver's link
credit (prefetch) steered while the run goes. What is checked: the window in force is what
the senders' unsettled deliveries show (never more than the new window after the change,
more before); the credit in force shows in the receiver falling behind the senders at
credit 1 (the broker's count of the queue's messages grows) and keeping up at 20; nothing
confirmed is lost (the credit is raised again for the last phase, so the queue drains).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flowdeck.collectors import Broker, LocalBroker
from flowdeck.engine.controller import Controller
from flowdeck.engine.events import EventKind
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec, parse_schedule
from tests.engine.updates import collect_updates
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    node = private_broker()
    yield node
    private_broker.discard(node)


async def _ready(
    node: LocalBroker, queue: str, seen: list[tuple[float, int]], stop: asyncio.Event
) -> None:
    """The queue's messages (ready and unacknowledged: 3.10's plugin takes them ahead of the
    receiver's credit) as the broker counts them, twice a second, until ``stop``."""
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(auth=("guest", "guest"), timeout=5) as http:
        while not stop.is_set():
            answer = await http.get(f"{node.management_url}/api/queues/%2F/{queue}")
            if answer.status_code == 200 and "messages" in answer.json():
                seen.append((loop.time(), int(answer.json()["messages"])))
            await asyncio.sleep(0.5)


async def test_amqp10_run_steered_live_loses_nothing(
    node: LocalBroker, tmp_path: Path, unique_name: str
) -> None:
    spec = RunSpec(
        name="amqp10",
        protocol="amqp1.0",
        queue_type="quorum",
        queue_pattern=f"{unique_name}-%d",
        publishers=2,
        consumers=1,
        # between what the receiver takes at credit 20 and at credit 1 (one delivery per
        # round trip)
        rate=1000,
        inflight=40,
        prefetch=20,
        message_size=200,
        duration=14,
        workers=0,
        schedule=parse_schedule(
            [
                {"at": 6, "change": "inflight=3"},
                {"at": 6, "change": "prefetch=1"},
                # give the credit back so the queue drains
                {"at": 10, "change": "prefetch=50"},
            ]
        ),
    )
    controller = Controller(
        spec,
        broker=Broker.parse(node.uri, management_url=node.management_url),
        recording=RunRecording(tmp_path),
        drain_seconds=20,
    )
    events, ticks = collect_updates(controller)
    ready: list[tuple[float, int]] = []
    stop = asyncio.Event()
    await controller.start()
    began = asyncio.get_running_loop().time()
    watching = asyncio.create_task(_ready(node, spec.queue_name(0), ready, stop))
    summary = await asyncio.wait_for(controller.wait(), spec.duration + 120)
    stop.set()
    await watching

    safety = summary.safety
    assert safety.published > 500
    assert safety.confirmed == safety.published
    assert safety.consumed == safety.published
    assert safety.lost == 0
    assert safety.duplicates == 0
    # The run says what AMQP 1.0 on this broker is.
    assert any(
        e.kind is EventKind.INFO and "translates every message to AMQP 0.9.1" in e.message
        for e in events
    )

    before = [t.pending_confirms for t in ticks if 1 <= t.elapsed < 6]
    after = [t.pending_confirms for t in ticks if 7 <= t.elapsed < 14]
    assert max(after) <= 2 * 3 < max(before) <= 2 * 40
    assert {t.settings.inflight for t in ticks if 7 <= t.elapsed < 14} == {3}
    assert {t.settings.prefetch for t in ticks if 7 <= t.elapsed < 10} == {1}

    # The credit: at 1 the receiver falls behind the senders, and the broker's count of the
    # queue's messages grows; at 20 (and at 50 after) it kept up.
    def rates(low: float, high: float) -> tuple[float, float]:
        phase = [t for t in ticks if low <= t.elapsed < high]
        return sum(t.publish_rate for t in phase), sum(t.consume_rate for t in phase)

    published, consumed = rates(1, 6)
    assert consumed > 0.9 * published
    published, consumed = rates(7, 10)
    assert consumed < 0.8 * published
    early = [n for at, n in ready if at - began < 6]
    late = [n for at, n in ready if 9 <= at - began < 10.5]
    assert early and late, [(round(at - began, 1), n) for at, n in ready]
    assert max(late) > max(early) + 100
    print(
        f"\nAMQP 1.0: published {safety.published:,}, consumed {safety.consumed:,}, lost "
        f"{safety.lost}; unsettled before {max(before)} after {max(after)}; in the "
        f"queue at credit 20 at most {max(early)}, at credit 1 {max(late)}; consume/publish "
        f"at credit 1 {consumed / published:.2f}"
    )
