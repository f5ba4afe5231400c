"""Every publisher holds its target rate within 1% over each window, against the real broker.

Short and ratio-based (the full measurement is ``benchmarks/rate_accuracy.py``): 5
publishers at 100 msg/s each, windows of 3 s whose edges lie half a send interval away from
each publisher's clock schedule (its own phase). Each message is counted in the window of
the time it was due (its intended send time, the basis of flowdeck's latency), recorded as
it was sent: a window's count is then what the publisher sent of its schedule, and a
message sent late still counts where it was due. Counting by reading the publishers'
totals at the window edges judged the test's own wake-ups instead: beside two spinning
processes they came up to 110 ms late, and windows read 0.963-1.027 of the rate.
How late the sends were is printed, not judged: that is the machine's (benchmarks/).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from flowdeck.engine import topology
from flowdeck.engine.commands import Stop, WorkerAssignment, WorkerCommand, WorkerMessage
from flowdeck.engine.publisher import Publisher
from flowdeck.engine.spec import RunSpec
from flowdeck.engine.worker import _Worker

pytestmark = [pytest.mark.broker]

PUBLISHERS = 5
RATE = 100.0
WINDOW = 3.0
WINDOWS = 2


@pytest.mark.slow
async def test_every_publisher_within_one_percent_of_its_rate_in_every_window(
    shared_uri: str, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: dict[int, list[tuple[int, int]]] = {}  # publisher id: (due, sent) in ns, each message
    write = Publisher._write

    def _write(self: Publisher, count: int, sequence: int, now: int, intended: list[int]) -> None:
        write(self, count, sequence, now, intended)
        sent.setdefault(self.publisher_id, []).extend((due, now) for due in intended)

    monkeypatch.setattr(Publisher, "_write", _write)
    spec = RunSpec(
        name="rate-accuracy-test",
        uri=shared_uri,
        queue_pattern=f"{unique_name}-%d",
        queues=1,
        durable=False,
        publishers=PUBLISHERS,
        consumers=1,
        rate=RATE,
        persistent=False,
        confirms=True,
        inflight=1000,
        prefetch=1000,
        ack_every=10,
        duration=WINDOW * WINDOWS + 3,
        workers=0,
    )
    await topology.declare(spec, shared_uri)
    messages: list[WorkerMessage] = []
    worker = _Worker(
        WorkerAssignment(0, 1, spec, time.time() + 1.0, (shared_uri,)), messages.append
    )
    commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()
    task = asyncio.create_task(worker.run(commands))
    try:
        deadline = time.monotonic() + 30
        while not worker.publishing_started:
            assert not task.done(), task.result()
            assert time.monotonic() < deadline, "the worker did not start publishing in 30 s"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        publishers = list(worker.publishers)
        assert len(publishers) == PUBLISHERS
        # Each publisher sends at its own phase of the interval: its own window edges.
        edges = {
            p.publisher_id: [
                p.pacer.intended_ns(0) + int((0.5 + 0.5 / RATE + j * WINDOW) * 1e9)
                for j in range(WINDOWS + 1)
            ]
            for p in publishers
        }
        # Until the last window's end is sent (bounded): the publishers go on meanwhile.
        last = max(e[-1] for e in edges.values())
        while time.time_ns() < last + 1_000_000_000 and not task.done():
            await asyncio.sleep(0.1)
        commands.put_nowait(Stop(3.0))
        report = await asyncio.wait_for(task, 60)
    finally:
        if not task.done():
            task.cancel()
        await topology.delete_queues(shared_uri, spec.queue_names)

    ratios = []
    late_ms = []
    for publisher_id, (*starts, end) in edges.items():
        messages = sent[publisher_id]
        for start, stop in zip([*starts], [*starts[1:], end], strict=True):
            due = [d for d, _ in messages if start <= d < stop]
            ratios.append(len(due) / (RATE * WINDOW))
        late_ms += [(now - d) / 1e6 for d, now in messages if starts[0] <= d < end]
    assert len(ratios) == PUBLISHERS * WINDOWS
    assert all(abs(r - 1.0) <= 0.01 for r in ratios), ratios
    late_ms.sort()
    print(
        f"\nwindows / rate: {min(ratios):.3f}-{max(ratios):.3f}; sends late by p50 "
        f"{late_ms[len(late_ms) // 2]:.1f} ms, max {late_ms[-1]:.1f} ms"
    )
    # The broker kept up: everything published was confirmed and consumed.
    assert report.counters.confirmed == report.counters.published
    assert report.counters.consumed == report.counters.published
