"""A worker runtime that talks no AMQP, for testing the controller without a broker.

It keeps the real runtime's contract (``engine.worker.run_worker``): counts messages at the
spec's rate as if every one were published, confirmed and consumed at once, emits one
ClientSnapshot a second with real HDR histograms, answers each ApplyChange with
ChangeApplied after ``APPLY_DELAY`` seconds, and on Stop returns a WorkerReport whose
sequence ranges match its counters. Loaded by import path, so worker processes can run it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from flowdeck.engine.change import Setting
from flowdeck.engine.commands import (
    ApplyChange,
    ChangeApplied,
    Stop,
    WorkerAssignment,
    WorkerCommand,
    WorkerMessage,
    global_id,
    local_share,
)
from flowdeck.engine.controller import apply_to_settings
from flowdeck.engine.latency import LATENCY_KEYS, encode, new_histogram, record
from flowdeck.engine.snapshot import (
    ActiveTimes,
    ClientSnapshot,
    Counters,
    SequenceRanges,
    WorkerReport,
)
from flowdeck.engine.spec import settings_of

APPLY_DELAY = 0.05
#: Latency every fake message gets, in microseconds.
FAKE_LATENCY_US = 1500


async def run_fake_worker(
    assignment: WorkerAssignment,
    commands: asyncio.Queue[WorkerCommand],
    emit: Callable[[WorkerMessage], None],
) -> WorkerReport:
    spec = assignment.spec
    worker, workers = assignment.worker, assignment.workers
    settings = settings_of(spec)
    sent: dict[int, int] = {}  # publisher global id -> messages sent
    deadline = assignment.start_at + spec.duration + 30
    await asyncio.sleep(max(0.0, assignment.start_at - time.time()))
    last_step = last_snapshot = time.time()
    previous_snapshot = last_snapshot
    histograms = {key: new_histogram() for key in LATENCY_KEYS}
    owed = 0.0

    def publishers() -> list[int]:
        share = local_share(settings.publishers, worker, workers)
        return [global_id(i, worker, workers) for i in range(share)]

    def counters() -> Counters:
        total = sum(sent.values())
        return Counters(published=total, confirmed=total, consumed=total, acked=total)

    async def apply(command: ApplyChange) -> None:
        nonlocal settings
        await asyncio.sleep(APPLY_DELAY)
        settings = apply_to_settings(settings, command.change)
        emit(ChangeApplied(command.change_id, worker, time.time()))

    pending_applies: set[asyncio.Task[None]] = set()
    first_sent: float | None = None
    last_sent: float | None = None
    while time.time() < deadline:
        try:
            command = await asyncio.wait_for(commands.get(), 0.05)
        except TimeoutError:
            command = None
        if isinstance(command, Stop):
            break
        if isinstance(command, ApplyChange):
            if command.change.setting is Setting.MARK:
                emit(ChangeApplied(command.change_id, worker, time.time()))
            else:
                task = asyncio.create_task(apply(command))
                pending_applies.add(task)
                task.add_done_callback(pending_applies.discard)
        now = time.time()
        if not settings.paused:
            owed += settings.rate * (now - last_step)
            whole = int(owed)
            owed -= whole
            ids = publishers()
            for publisher in ids:
                sent[publisher] = sent.get(publisher, 0) + whole
            if whole and ids:  # sent, confirmed and consumed at once, as the fake counts
                first_sent = first_sent or now
                last_sent = now
            for _ in range(min(whole * len(ids), 50)):
                for key in LATENCY_KEYS:
                    record(histograms[key], FAKE_LATENCY_US)
        last_step = now
        if now - last_snapshot >= 1.0:
            emit(
                ClientSnapshot(
                    worker=worker,
                    at=now,
                    interval=now - previous_snapshot,
                    counters=counters(),
                    pending_confirms=0,
                    unacked=0,
                    connections=len(publishers())
                    + local_share(settings.consumers, worker, workers),
                    blocked=0,
                    settings=settings,
                    target_rate=0.0 if settings.paused else settings.rate * len(publishers()),
                    latency={key: encode(h) for key, h in histograms.items()},
                )
            )
            histograms = {key: new_histogram() for key in LATENCY_KEYS}
            previous_snapshot = last_snapshot = now
    ranges = tuple(SequenceRanges(p, ((0, n),)) for p, n in sorted(sent.items()) if n)
    active = ActiveTimes(first_sent, last_sent, last_sent, first_sent, last_sent)
    return WorkerReport(
        worker=worker, counters=counters(), confirmed=ranges, consumed=ranges, active=active
    )


async def run_failing_worker(
    assignment: WorkerAssignment,
    commands: asyncio.Queue[WorkerCommand],
    emit: Callable[[WorkerMessage], None],
) -> WorkerReport:
    """A runtime that cannot reach its broker."""
    from flowdeck.engine.errors import BrokerUnavailable

    raise BrokerUnavailable("cannot connect to the broker at nowhere:5672; is RabbitMQ running?")


FAKE_RUNTIME = "tests.engine.controller_fakes:run_fake_worker"
FAILING_RUNTIME = "tests.engine.controller_fakes:run_failing_worker"
