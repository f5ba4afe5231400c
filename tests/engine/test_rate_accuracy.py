"""Every publisher holds its target rate within 1% over each window, against the real broker.

Short and ratio-based (the full measurement is ``benchmarks/rate_accuracy.py``): 5
publishers at 100 msg/s each, windows of 3 s whose edges lie half a send interval away from
each publisher's clock schedule (its own phase), so a message sent a few ms late still lands
in its window.
A loop stall shorter than ~30 ms at a window edge moves at most 3 messages (1%).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from flowdeck.engine import topology
from flowdeck.engine.commands import Stop, WorkerAssignment, WorkerCommand, WorkerMessage
from flowdeck.engine.spec import RunSpec
from flowdeck.engine.worker import _Worker

pytestmark = [pytest.mark.broker]

PUBLISHERS = 5
RATE = 100.0
WINDOW = 3.0
WINDOWS = 2


@pytest.mark.slow
async def test_every_publisher_within_one_percent_of_its_rate_in_every_window(
    shared_uri: str, unique_name: str
) -> None:
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
        samples = sorted(
            (p.pacer.intended_ns(0) / 1e9 + 0.5 + 0.5 / RATE + j * WINDOW, i, j)
            for i, p in enumerate(publishers)
            for j in range(WINDOWS + 1)
        )
        counts = [[0] * PUBLISHERS for _ in range(WINDOWS + 1)]
        for edge, i, j in samples:
            await asyncio.sleep(max(0.0, edge - time.time()))
            counts[j][i] = publishers[i].published
        commands.put_nowait(Stop(3.0))
        report = await asyncio.wait_for(task, 60)
    finally:
        if not task.done():
            task.cancel()
        await topology.delete_queues(shared_uri, spec.queue_names)

    ratios = [
        (counts[j + 1][i] - counts[j][i]) / (RATE * WINDOW)
        for i in range(PUBLISHERS)
        for j in range(WINDOWS)
    ]
    assert all(abs(r - 1.0) <= 0.01 for r in ratios), ratios
    # The broker kept up: everything published was confirmed and consumed.
    assert report.counters.confirmed == report.counters.published
    assert report.counters.consumed == report.counters.published
