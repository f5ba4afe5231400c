"""Memory and disk alarms on a private node during a run, end to end through the Controller.

Publishers are blocked (connection.blocked), consumers are not, the run and its recording go
on, and the alarm periods (from the collector) and block periods (from the clients) are in
the event log and the session's tables.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest

from flowdeck.collectors import Broker, LocalBroker
from flowdeck.engine.controller import Controller
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import Tick
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec
from tests.engine.updates import collect_updates
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]

#: How long each alarm is held: long enough for two of the run's one-second ticks to fall
#: wholly inside the blocked period on a busy machine (with 3 s, a slow rabbitmqctl left one).
ALARM_HOLD_S = 4.5


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    node = private_broker()
    yield node
    private_broker.discard(node)


async def test_memory_and_disk_alarms_block_publishers_and_are_recorded(
    node: LocalBroker, tmp_path: Path
) -> None:
    spec = RunSpec(
        name="alarms",
        queue_pattern="fault-alarm-%d",
        publishers=2,
        consumers=2,
        rate=100,
        prefetch=50,
        # A bound, not the run's length: the test stops the run five seconds after the last
        # alarm is cleared. Each rabbitmqctl call boots an Erlang VM, 1 s on a quiet machine
        # and up to 10 s on a busy one, where a fixed 30 s run ended before the disk alarm
        # was cleared, and the clearing was never seen.
        duration=240,
        workers=0,
    )
    controller = Controller(
        spec,
        broker=Broker.parse(node.uri, management_url=node.management_url),
        recording=RunRecording(tmp_path),
        drain_seconds=3,
        cleanup=True,
    )
    events, ticks = collect_updates(controller)
    await controller.start()
    # Each window runs from just before the call that raises the alarm to just before the
    # call that clears it: the broker may report an alarm raised or cleared before the
    # rabbitmqctl call that caused it has returned, so "after" bounds are taken before the
    # causing call starts, never after it ends.
    windows: dict[str, tuple[float, float]] = {}
    try:
        await asyncio.sleep(3)
        began = time.time()
        await asyncio.to_thread(node.set_memory_watermark, absolute="10MB")
        await asyncio.sleep(ALARM_HOLD_S)
        clearing = time.time()
        await asyncio.to_thread(node.set_memory_watermark, 0.4)
        windows["memory"] = (began, clearing)
        await asyncio.sleep(2)
        began = time.time()
        await asyncio.to_thread(node.set_disk_free_limit, "1000GB")
        await asyncio.sleep(ALARM_HOLD_S)
        clearing = time.time()
        await asyncio.to_thread(node.set_disk_free_limit, "50MB")
        windows["disk"] = (began, clearing)
        all_cleared = time.time()
        await asyncio.sleep(5)  # publishing again: ticks after the clearing's first two s
    finally:
        await asyncio.to_thread(node.set_memory_watermark, 0.4)
        await asyncio.to_thread(node.set_disk_free_limit, "50MB")
    summary = await asyncio.wait_for(controller.stop("the alarms are over"), 60)

    def seen(kind: EventKind, alarm: str | None = None) -> list[RunEvent]:
        return [
            e for e in events if e.kind is kind and (alarm is None or e.detail["alarm"] == alarm)
        ]

    log = [f"{e.at - controller.started_at:6.2f} {e.kind.value} {e.message}" for e in events]
    print("\n" + "\n".join(log))
    blocked = seen(EventKind.BLOCKED)
    unblocked = seen(EventKind.UNBLOCKED)
    delays: dict[str, float] = {}
    for alarm, (began, clearing) in windows.items():
        raised = seen(EventKind.ALARM_RAISED, alarm)
        cleared = seen(EventKind.ALARM_CLEARED, alarm)
        assert raised and cleared, log
        assert began < raised[0].at < clearing < cleared[0].at
        # Prompt: the collector shows the alarm about a second after the clients were
        # blocked (connection.blocked is the fastest signal there is).
        first_block = min(e.at for e in blocked if e.at >= began)
        delays[alarm] = round(raised[0].at - first_block, 2)
        assert delays[alarm] < 2.5, log
    # Only the publishers' connections are blocked, once per alarm period each.
    assert {e.detail["connection"] for e in blocked} == {
        f"flowdeck alarms {controller.run_tag} w0 publisher {i}" for i in range(spec.publishers)
    }
    assert len(blocked) == 2 * spec.publishers and len(unblocked) == 2 * spec.publishers
    memory_blocked = (blocked[0].at, unblocked[0].at)
    in_alarm = [t for t in ticks if memory_blocked[0] + 1.5 < t.at < memory_blocked[1]]
    # Two ticks at least: the first may still count a send from before the block.
    assert len(in_alarm) >= 2, (memory_blocked, [t.at for t in ticks])
    assert all(t.blocked == spec.publishers for t in in_alarm)
    # Blocked publishers send nothing (and get no confirms); consumers are not blocked.
    assert max(t.publish_rate for t in in_alarm[1:]) < spec.target_rate * 0.1
    assert max(t.confirm_rate for t in in_alarm[1:]) < spec.target_rate * 0.1
    after = [t for t in ticks if t.at > all_cleared + 2]
    assert after and max(t.publish_rate for t in after) > spec.target_rate * 0.5

    assert summary.outcome == "stopped", summary.errors
    assert summary.safety.lost == 0
    assert summary.session_dir is not None
    session = open_session(Path(summary.session_dir))
    kinds = {e.kind for e in session.events}
    assert {EventKind.ALARM_RAISED, EventKind.ALARM_CLEARED} <= kinds
    assert {EventKind.BLOCKED, EventKind.UNBLOCKED} <= kinds
    broker = session.table("broker")
    assert pc.any(broker["mem_alarm"]).as_py() and pc.any(broker["disk_alarm"]).as_py()
    client = session.table("client")
    assert pc.max(client["blocked_connections"]).as_py() == spec.publishers
    print(f"\nalarms: shown {delays} s after the first block, {summary.safety}")


async def test_a_guessed_management_url_of_another_broker_is_not_used(
    node: LocalBroker, unique_name: str
) -> None:
    """The node's uri is on a private port; host:15672 is the shared broker's API. The
    run must not show (or check capacity against) the wrong broker's figures, and says why.
    """
    spec = RunSpec(
        name=unique_name,
        queue_pattern=f"{unique_name}-%d",
        rate=50.0,
        duration=3.0,
        workers=0,
    )
    controller = Controller(spec, broker=Broker.parse(node.uri))
    events: list[RunEvent] = []
    samples: list[object] = []

    def listen(item: object) -> None:
        if isinstance(item, RunEvent):
            events.append(item)
        elif not isinstance(item, Tick):
            samples.append(item)

    controller.add_listener(listen)
    await controller.start()
    summary = await controller.wait()

    stale = [e.message for e in events if e.kind is EventKind.SOURCE_STALE]
    assert any("not on" in m and "--management-url" in m for m in stale), stale
    assert not [s for s in samples if getattr(s, "source", "") == "management"]
    assert summary.safety.published > 0
    assert summary.safety.lost == 0
