"""Per-queue latency on the real broker: one queue whose consumers cannot keep up stands out.

Two publishers send 300 msg/s each, publisher i into queue i % 2; three consumers work
5 ms a message (at most 200 msg/s each), consumer i on queue i % 2. Queue 0 has two
consumers (400 msg/s of room for 300), queue 1 one (200 for 300): its backlog grows by
about 100 messages a second and every message waits behind it, while queue 0's wait only
for their own work. The session's figures say so per queue, worst first, and the live table
gives the same rows.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.controller import Controller
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from tests.engine.test_worker import base_spec

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


@pytest.mark.slow
def test_the_queue_whose_consumers_fall_behind_has_the_worst_p99(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    spec = base_spec(
        unique_name,
        shared_uri,
        publishers=2,
        consumers=3,
        queues=2,
        rate=300.0,
        prefetch=20,
        work=5.0,
        confirms=False,
        duration=12.0,
    )
    controller = Controller(
        spec,
        broker=Broker.parse(shared_uri),
        recording=RunRecording(tmp_path),
        drain_seconds=1,
        cleanup=True,
    )

    async def run() -> object:
        await controller.start()
        return await controller.wait()

    summary = asyncio.run(run())
    assert summary.session_dir is not None  # type: ignore[attr-defined]
    session = open_session(Path(summary.session_dir))  # type: ignore[attr-defined]
    fast, slow = spec.queue_name(0), spec.queue_name(1)

    recorded = session.figures()
    (loaded,) = [p for p in recorded.phases if p.queues and not p.is_drain]
    rows = loaded.queues
    assert set(rows) == {fast, slow}
    # Every message of each queue is in its own histogram, merged over the worker's seconds.
    consumed = session.totals().consumed
    in_phase_and_drain = sum(row["count"] for p in recorded.phases for row in p.queues.values())
    assert in_phase_and_drain == consumed
    # The queue with one consumer for 300 msg/s waits seconds; the other, milliseconds.
    print(
        f"\ne2e p99 (a row's figures are in µs): {fast} {rows[fast]['p99'] / 1000:,.1f} ms "
        f"({rows[fast]['count']:,} msgs), {slow} {rows[slow]['p99'] / 1000:,.1f} ms "
        f"({rows[slow]['count']:,} msgs); p50 {rows[fast]['p50'] / 1000:,.1f} ms and "
        f"{rows[slow]['p50'] / 1000:,.1f} ms"
    )
    # The typical message: seconds behind the backlog, against milliseconds of work.
    assert rows[slow]["p50"] > 10 * rows[fast]["p50"]
    # The slowest: the slow queue's last messages waited for the backlog the run built,
    # about the share of its messages not yet taken (its consumer took ``taken`` of what
    # the fast queue's took, as both were sent the same) times the run's length. A stall of
    # the machine delays both queues alike (a busy CI run read 606 ms of p99 for the fast
    # queue), so the gap between them is what the backlog adds.
    taken = rows[slow]["count"] / rows[fast]["count"]
    backlog_wait_us = (1 - taken) * spec.duration * 1_000_000
    assert rows[slow]["p99"] - rows[fast]["p99"] > backlog_wait_us / 2
    assert [queue for queue, _ in loaded.worst_queues()] == [slow, fast]
    # The run's own table (what the cockpit's queue tab shows) gives the same rows.
    live = controller.phase_table.figures()
    assert live is not None
    (live_loaded,) = [p for p in live.phases if p.queues and not p.is_drain]
    assert live_loaded.queues == rows
