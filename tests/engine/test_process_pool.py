"""Worker processes booted ahead (engine.process.WorkerPool): a run takes them, its counts
stay exact, it starts sooner than with processes booted at start, and nothing is left over.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import psutil
import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.controller import Controller
from flowdeck.engine.process import DEFAULT_RUNTIME, ProcessWorker, WorkerFailed, WorkerPool
from flowdeck.engine.spec import RunSpec

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

#: Longest a test waits for pooled children to boot (they boot while nothing else runs).
BOOT_WAIT = 30.0


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    pool = WorkerPool().install()
    yield pool
    pool.close()


async def booted(pool: WorkerPool, size: int) -> None:
    """Fill the pool and wait until its children have booted."""
    pool.fill(size)
    deadline = time.monotonic() + BOOT_WAIT
    while pool.booted < size:
        assert time.monotonic() < deadline, f"{pool.booted} of {size} workers booted"
        await asyncio.sleep(0.05)


def small_spec(unique_name: str, workers: int) -> RunSpec:
    return RunSpec(
        name="pooled",
        queue_pattern=f"{unique_name}-%d",
        queues=2,
        publishers=2,
        consumers=2,
        rate=200,
        duration=3,
        prefetch=100,
        ack_every=10,
        workers=workers,
    )


async def timed_start(spec: RunSpec, shared_uri: str) -> float:
    """Seconds ``start()`` took (broker checks, topology, workers); the run is then stopped
    (its queues deleted)."""
    controller = Controller(spec, broker=Broker.parse(shared_uri), drain_seconds=0.5, cleanup=True)
    began = time.monotonic()
    await controller.start()
    took = time.monotonic() - began
    summary = await controller.stop("measured")
    assert summary.safety.lost == 0
    return took


@pytest.mark.slow
async def test_a_run_on_pooled_workers_counts_exactly(
    shared_uri: str, unique_name: str, pool: WorkerPool
) -> None:
    await booted(pool, 2)
    spec = small_spec(unique_name, workers=2)
    controller = Controller(spec, broker=Broker.parse(shared_uri), drain_seconds=3, cleanup=True)
    await controller.start()
    summary = await controller.wait()

    assert (pool.taken, pool.missed, pool.idle) == (2, 0, 0)
    assert summary.outcome == "completed", summary.errors
    safety = summary.safety
    assert safety.published > 0.8 * spec.target_rate * spec.duration
    assert safety.confirmed == safety.published == safety.consumed
    assert (safety.lost, safety.duplicates, safety.unconfirmed, safety.nacked) == (0, 0, 0, 0)
    # Each pooled child took the worker number of its assignment: had two run as the same
    # worker, their publishers' sequences would collide and count as duplicates above.


async def test_pooled_workers_start_a_run_sooner_than_booting_them(
    shared_uri: str, unique_name: str, pool: WorkerPool
) -> None:
    pool.close()  # no pool: the run boots its own
    cold = await timed_start(small_spec(f"{unique_name}-cold", 1), shared_uri)
    pool.install()
    await booted(pool, 1)
    warm = await timed_start(small_spec(f"{unique_name}-warm", 1), shared_uri)
    assert pool.taken == 1
    # Booting is the interpreter and the runtime's imports; a pooled child did that ahead.
    assert warm < 0.6 * cold, (warm, cold)


async def test_a_dead_pooled_child_is_passed_over() -> None:
    pool = WorkerPool().install()
    try:
        pool.fill(1)
        (child,) = pool._idle
        child.process.kill()
        child.process.join(10)
        messages: list[object] = []
        worker = ProcessWorker(0, DEFAULT_RUNTIME, messages.append)
        assert not worker.pooled
        assert await asyncio.wait_for(worker.ready(), BOOT_WAIT)
        worker.kill()
        assert (pool.taken, pool.missed) == (0, 1)
    finally:
        pool.close()


async def test_a_pooled_child_that_cannot_load_its_runtime_says_so_as_its_worker() -> None:
    pool = WorkerPool("flowdeck.engine.no_such_module:run_worker").install()
    try:
        pool.fill(1)
        messages: list[object] = []
        worker = ProcessWorker(3, "flowdeck.engine.no_such_module:run_worker", messages.append)
        assert worker.pooled
        assert not await asyncio.wait_for(worker.ready(), BOOT_WAIT)
        failures = [m for m in messages if isinstance(m, WorkerFailed)]
        assert failures and all(f.worker == 3 for f in failures), messages
        assert "cannot be loaded" in failures[0].reason
    finally:
        pool.close()


async def test_close_ends_the_idle_children() -> None:
    pool = WorkerPool()
    pool.fill(2)
    children = list(pool._idle)
    pool.close()
    for child in children:
        child.process.join(10)
        assert not child.process.is_alive()
    assert pool.idle == 0


async def test_a_pool_with_a_niceness_lowers_its_childrens_priority() -> None:
    pool = WorkerPool(niceness=5)
    try:
        pool.fill(1)
        await booted(pool, 1)
        (child,) = pool._idle
        assert child.process.pid is not None
        # The child renices itself as it boots, before it says it is ready.
        assert psutil.Process(child.process.pid).nice() == os.nice(0) + 5
    finally:
        pool.close()
