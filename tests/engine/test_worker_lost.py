"""A worker killed mid-run is not data loss: its last snapshot stands in for its report,
the summary says which figures are incomplete and why, and ``lost`` is at most what the
broker's counts of the run's queues allow.

Before, a local worker killed with SIGKILL left the accounting without the sequences its
consumers took, and every message the other worker published and it consumed counted as
lost (``lost 851`` where the broker's queue had 2,101 routed in, 2,101 acked, 0 left).
"""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import psutil
import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.accounting import LostWorker, incomplete_figures, with_lost_workers
from flowdeck.engine.controller import Controller
from flowdeck.engine.progress import DataSafety, Tick
from flowdeck.engine.queue_counts import QueueCounts, counts_of
from flowdeck.engine.sinks import NullSink
from flowdeck.engine.spec import RunSpec

#: The shared broker's statistics interval (a default broker's): the counts settle after it.
STATISTICS_SECONDS = 5.0


def _spawned() -> set[psutil.Process]:
    """This process's spawned children (not multiprocessing's resource tracker); a child
    that already ended (a zombie of an earlier test's pool, its command line gone) is none
    of this run's workers."""
    found = set()
    for child in psutil.Process().children():
        try:
            words = " ".join(child.cmdline())
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
        if "multiprocessing" in words and "resource_tracker" not in words:
            found.add(child)
    return found


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
async def test_a_killed_worker_leaves_incomplete_figures_and_no_false_loss(
    shared_uri: str, management_url: str, unique_name: str
) -> None:
    spec = RunSpec(
        name="worker-lost",
        queue_pattern=f"{unique_name}-%d",
        queues=1,  # both workers' consumers share it: each takes the other's messages
        # Three publishers for two consumers: with two, each publisher at its own phase of
        # the interval, sends alternated as the queue's round robin did, and each consumer
        # could take only its own worker's publisher's messages for the whole run.
        publishers=3,
        consumers=2,
        rate=100.0,
        duration=30.0,
        workers=2,
    )
    controller = Controller(spec, broker=Broker.parse(shared_uri), drain_seconds=3)
    consumed: dict[int, int] = {}
    published: dict[int, int] = {}

    class Consumed(NullSink):
        def on_tick(self, tick: Tick) -> None:
            for snap in tick.snapshots:
                consumed[snap.worker] = snap.counters.consumed
                published[snap.worker] = snap.counters.published

    controller.add_sink(Consumed())
    before = _spawned()  # a pool's idle children, say: not this run's workers
    await controller.start()
    # Both workers' consumers have taken messages, from both publishers (one queue, round
    # robin), before one worker dies: on a busy machine the workers took more than the 4 s
    # this once waited to boot, and a worker killed before it consumed left nothing for the
    # reports alone to count wrongly.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (len(consumed) == 2 and min(consumed.values()) >= 50):
        await asyncio.sleep(0.2)
    assert len(consumed) == 2 and min(consumed.values()) >= 50, consumed
    workers = sorted(_spawned() - before, key=lambda p: p.pid)
    assert len(workers) == 2, [w.cmdline() for w in workers]
    workers[-1].kill()  # SIGKILL: no report, no goodbye
    summary = await controller.wait()

    safety = summary.safety
    assert summary.outcome == "failed"
    assert not safety.complete
    assert any(
        re.match(r"worker \d was lost [\d.]+ s into the run", line) for line in summary.incomplete
    )
    assert summary.broker_queues is not None

    # What the broker says, read here on its own once its statistics settled: on a busy
    # broker they lag the run by more than an interval (a five-process suite read 234 routed,
    # 179 acked, 0 left one interval past the run), so read until they add up, within four.
    await asyncio.sleep(max(0.0, summary.ended + STATISTICS_SECONDS + 1 - time.time()))
    give_up = time.monotonic() + 4 * STATISTICS_SECONDS
    async with httpx.AsyncClient(auth=("guest", "guest")) as client:
        while True:
            answer = await client.get(f"{management_url}/api/queues/%2F")
            broker = counts_of(answer.json(), spec.queue_names)
            missing = broker.routed - broker.acked - broker.left
            if (broker.left == 0 and missing == 0) or time.monotonic() > give_up:
                break
            await asyncio.sleep(1.0)
    assert broker.left == 0 and missing == 0, broker  # the broker lost nothing
    assert safety.lost == missing == summary.broker_queues.never_acked
    # ... where the workers' reports alone counted the lost worker's deliveries as lost
    (said,) = [
        int(m.replace(",", ""))
        for m in re.findall(r"would say ([\d,]+)", " ".join(summary.incomplete))
    ]
    assert said > 0, (consumed, published, summary.incomplete)
    assert safety.published <= broker.routed  # the stand-in's counts are its last snapshot's
    document = summary.to_json()
    assert document["safety"]["complete"] is False and document["incomplete"]
    assert document["broker_queues"]["never_acked"] == 0


async def test_counts_read_after_the_run_wait_for_lagging_statistics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The broker's counts after a run with a lost worker are read until they add up, or
    until they held still for a statistics interval (what the broker counted), bounded."""
    from flowdeck.engine import queue_counts

    before = QueueCounts(routed=100, acked=100, left=0)
    reads = iter([QueueCounts(334, 279, 0), QueueCounts(334, 300, 0), QueueCounts(334, 334, 0)])
    monkeypatch.setattr(queue_counts, "read_counts", lambda *_: _answer(next(reads)))
    settled = await queue_counts._settled(Broker.parse("amqp://h"), ["q"], before, 0.5)
    assert settled.since(before) == QueueCounts(234, 234, 0)

    stuck = QueueCounts(334, 300, 0)  # short for good (a channel took its counts along)
    calls = []
    monkeypatch.setattr(queue_counts, "read_counts", lambda *_: calls.append(1) or _answer(stuck))
    began = time.monotonic()
    assert await queue_counts._settled(Broker.parse("amqp://h"), ["q"], before, 0.5) == stuck
    assert time.monotonic() - began >= 0.5  # held still a whole interval first
    assert len(calls) <= 1 + 0.5 / 0.1  # and read no longer (a read each fifth of it)


async def _answer(counts: QueueCounts) -> QueueCounts:
    return counts


def test_lost_is_never_more_than_the_broker_allows() -> None:
    safety = DataSafety(1000, 1000, 0, 0, 700, 0, 0, 0, lost=300)
    assert with_lost_workers(safety, QueueCounts(routed=1000, acked=1000, left=0)).lost == 0
    assert with_lost_workers(safety, QueueCounts(routed=1000, acked=990, left=4)).lost == 10
    # a publish count short of what the queues took (a channel died with its statistics):
    # what was acked plus what is left is the floor
    assert with_lost_workers(safety, QueueCounts(routed=950, acked=980, left=20)).lost == 20
    unbounded = with_lost_workers(safety, None)
    assert unbounded.lost == 300 and not unbounded.complete


def test_the_summary_says_what_is_incomplete_with_or_without_the_brokers_counts() -> None:
    safety = with_lost_workers(DataSafety(10, 10, 0, 0, 5, 0, 0, 0, lost=5), None)
    lost = [LostWorker(1, "worker process ended (exit code -9)", lost_at=112.0, last=None)]
    lines = incomplete_figures(
        safety, lost, started_at=100.0, client_lost=5, broker=None, broker_unread="refused"
    )
    assert lines[0] == (
        "worker 1 was lost 12.0 s into the run (worker process ended (exit code -9)): it sent "
        "no snapshot, so none of its counts are known"
    )
    assert lines[1].startswith("lost 5 is an upper bound") and "(refused)" in lines[1]
