"""A fake run for Pilot tests: the controller's surface with fixed, scripted data."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.errors import SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.progress import DataSafety, PendingChange, Percentiles, RunSummary, Tick
from flowdeck.engine.settings import BY_SETTING
from flowdeck.engine.sinks import Sink, deliver
from flowdeck.engine.snapshot import ActiveTimes, ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec, settings_of
from flowdeck.tui.source import RunUpdate

#: A fixed clock so snapshots and ages do not depend on when the test runs.
T0 = 1_700_000_000.0


class FakeControl:
    """Records every request; applies pending changes only when the test says so."""

    def __init__(
        self, spec: RunSpec | None = None, workers: int = 2, *, snapshots: bool = False
    ) -> None:
        self.spec = spec or RunSpec(
            name="fake-sweep",
            queues=3,
            publishers=4,
            consumers=4,
            rate=500.0,
            inflight=100,
            prefetch=100,
            duration=300.0,
        )
        self.settings = settings_of(self.spec)
        self.requests: list[Change] = []
        self.skipped = 0
        self.stopped = False
        self.started = False
        self.session_dir: Path | None = Path("/tmp/flowdeck-sessions/20240101-000000-fake")
        self._pending: list[PendingChange] = []
        self._sinks: list[Sink] = []
        self._requested = self.settings
        self._finished = asyncio.Event()
        self._next_id = 1
        self.workers = workers
        #: Whether ticks carry the workers' snapshots (``worker_snapshot``), as a run this
        #: cockpit started does; ``lost`` workers send none.
        self.snapshots = snapshots
        self.lost: set[int] = set()
        self.elapsed = 0.0
        self.phase_index = 0
        self.phase = "start"

    # -- the controller's surface -------------------------------------------------------

    @property
    def requested_settings(self) -> Settings:
        return self._requested

    @property
    def pending(self) -> tuple[PendingChange, ...]:
        return tuple(self._pending)

    def add_sink(self, sink: Sink) -> None:
        self._sinks.append(sink)

    async def start(self) -> None:
        self.started = True

    def request(self, change: Change, source: str = "operator") -> int:
        if change.setting in BY_SETTING:
            current = float(self._requested.value(change.setting))
            change = change.resolved(current)
            self._requested = self._requested.with_value(change.setting, change.value or 0)
            if 0 < self._requested.prefetch < self._requested.ack_every:
                self._requested = self._requested.changed(ack_every=self.settings.ack_every)
                raise SpecError(
                    "ack_every",
                    f"ack_every ({int(change.value or 0)}) must not exceed prefetch "
                    f"({self._requested.prefetch})",
                )
        self.requests.append(change)
        change_id = self._next_id
        self._next_id += 1
        self._pending.append(PendingChange(change_id, change, T0, source, 0, self.workers))
        self.emit(
            RunEvent(
                T0 + self.elapsed,
                EventKind.CHANGE_REQUESTED,
                f"change #{change_id} requested by {source}: {change.describe()}",
                change_id,
            )
        )
        return change_id

    def skip_step(self) -> None:
        self.skipped += 1

    schedule_held = False

    def resume_schedule(self) -> None:
        self.schedule_held = False

    async def wait(self) -> RunSummary:
        await self._finished.wait()
        return self.summary()

    async def stop(self, reason: str = "stopped by operator") -> RunSummary:
        self.stopped = True
        self._finished.set()
        return self.summary(reason)

    # -- what the test scripts -------------------------------------------------------------

    def emit(self, update: RunUpdate) -> None:
        for sink in self._sinks:
            deliver(sink, update)

    def apply_pending(self) -> None:
        """Every worker reports every pending change in force."""
        for pending in self._pending:
            change = pending.change
            if change.setting is Setting.PAUSE:
                self.settings = replace(self.settings, paused=True)
            elif change.setting is Setting.RESUME:
                self.settings = replace(self.settings, paused=False)
            elif change.setting is Setting.MARK:
                self.phase_index += 1
                self.phase = change.label
            elif change.value is not None:
                kind = int if change.setting is not Setting.RATE else float
                self.settings = self.settings.changed(**{change.setting.value: kind(change.value)})
                self.phase_index += 1
                self.phase = change.describe()
            self.emit(
                RunEvent(
                    T0 + self.elapsed,
                    EventKind.CHANGE_APPLIED,
                    f"change #{pending.change_id} in effect: {change.describe()}",
                    pending.change_id,
                )
            )
        self._pending.clear()

    def emit_tick(self, seconds: int = 1) -> None:
        for _ in range(seconds):
            self.elapsed += 1
            tick = make_tick(
                self.elapsed,
                self.settings,
                self.pending,
                self.phase_index,
                self.phase,
                self.workers - len(self.lost),
            )
            if self.snapshots:
                tick = replace(
                    tick,
                    snapshots=tuple(
                        worker_snapshot(w, self.elapsed, self.settings)
                        for w in range(self.workers)
                        if w not in self.lost
                    ),
                )
            self.emit(tick)

    def connect(self, worker: int, host: str, pid: int) -> None:
        """Worker ``worker`` connected over its link from ``host``, as a remote one says."""
        self.emit(
            RunEvent(
                T0,
                EventKind.INFO,
                f"worker {worker} connected from {host} (pid {pid})",
                detail={"worker": worker, "host": host, "pid": pid},
            )
        )

    def lose(self, worker: int, host: str, pid: int) -> None:
        """Worker ``worker``'s link dropped now, as a remote worker's loss is told."""
        self.lost.add(worker)
        self.emit(
            RunEvent(
                T0 + self.elapsed,
                EventKind.ERROR,
                f"worker {worker} on {host} (pid {pid}) lost: its link closed",
                detail={"worker_lost": worker, "host": host, "pid": pid, "reason": "closed"},
            )
        )

    def summary(self, reason: str = "") -> RunSummary:
        return make_summary(reason, str(self.session_dir))


def make_tick(
    elapsed: float,
    settings: Settings,
    pending: tuple[PendingChange, ...] = (),
    phase_index: int = 0,
    phase: str = "start",
    workers: int = 2,
) -> Tick:
    """A deterministic second: rates shaped by the elapsed time and the in-flight limit."""
    wave = (int(elapsed) % 20) / 20
    target = settings.rate * settings.publishers
    published = target * (0.9 + 0.1 * wave) * min(1.0, settings.inflight / 100)
    latency = {
        (LatencyKind.END_TO_END, SendBasis.ACTUAL): _percentiles(2.0 + 3 * wave),
        (LatencyKind.END_TO_END, SendBasis.INTENDED): _percentiles(4.0 + 9 * wave),
        (LatencyKind.CONFIRM, SendBasis.ACTUAL): _percentiles(1.0 + wave),
        (LatencyKind.CONFIRM, SendBasis.INTENDED): _percentiles(3.0 + 4 * wave),
    }
    n = int(elapsed)
    return Tick(
        at=T0 + elapsed,
        elapsed=elapsed,
        duration=300.0,
        target_rate=target,
        publish_rate=published,
        confirm_rate=published * 0.99,
        consume_rate=published * 0.97,
        nack_rate=0.0,
        return_rate=0.0,
        totals=Counters(published=n * 1900, confirmed=n * 1880, consumed=n * 1850),
        pending_confirms=settings.inflight * settings.publishers // 2,
        unacked=settings.prefetch * settings.consumers // 3,
        connections=settings.publishers + settings.consumers,
        blocked=0,
        settings=settings,
        pending=pending,
        latency=latency,
        phase=phase,
        phase_index=phase_index,
        next_step_at=60.0 if elapsed < 60 else None,
        next_step=Change(Setting.INFLIGHT, 200) if elapsed < 60 else None,
        workers=workers,
    )


#: Each fake worker's msg/s (worker w: (w + 1) times this) and CPU seconds a second.
WORKER_RATE = 100
WORKER_CPU = 0.2


def worker_snapshot(worker: int, elapsed: float, settings: Settings) -> ClientSnapshot:
    """Worker ``worker``'s snapshot at ``elapsed``: it publishes and consumes
    ``(worker + 1) * WORKER_RATE`` msg/s and uses ``(worker + 1) * WORKER_CPU`` of a core."""
    rate = (worker + 1) * WORKER_RATE
    n = int(elapsed)
    return ClientSnapshot(
        worker=worker,
        at=T0 + elapsed,
        interval=1.0,
        counters=Counters(published=n * rate, confirmed=n * rate, consumed=n * rate),
        pending_confirms=10,
        unacked=5,
        connections=2,
        blocked=0,
        settings=settings,
        target_rate=settings.rate,
        cpu_seconds=3.0 + elapsed * (worker + 1) * WORKER_CPU,
    )


def _percentiles(p50: float) -> Percentiles:
    return Percentiles(
        count=1000, p50=p50, p75=p50 * 1.5, p95=p50 * 3, p99=p50 * 6, p999=p50 * 8, max=p50 * 10
    )


def make_sample(
    taken_at: float,
    *,
    queues: int = 3,
    mem_alarm: bool = False,
    stale_reason: str = "",
    age: float = 2.0,
) -> BrokerSample:
    return BrokerSample(
        source="management",
        taken_at=taken_at,
        figures_at=taken_at - age,
        statistics_interval=5.0,
        nodes=(
            NodeSample(
                name="rabbit@fake",
                mem_used=3_100_000_000 if mem_alarm else 1_200_000_000,
                mem_limit=3_276_000_000,
                mem_alarm=mem_alarm,
                disk_free=41_000_000_000,
                disk_free_limit=50_000_000,
            ),
        ),
        queues=tuple(
            QueueSample(
                name=f"fake-{i + 1}",
                vhost="/",
                type="quorum",
                ready=1000 * (i + 1) + int(taken_at - T0) * 10,
                unacked=30 * (i + 1),
                consumers=1 + i % 2,
                publish_rate=600.0 - i,
                deliver_rate=590.0 - i,
            )
            for i in range(queues)
        ),
        publish_rate=1900.0,
        confirm_rate=1880.0,
        deliver_rate=1850.0,
        ack_rate=1850.0,
        unconfirmed=180,
        unacked=130,
        connections=8,
        connections_blocked=8 if mem_alarm else 0,
        connections_blocking=0,
        stale_reason=stale_reason,
        broker_version="3.10.8",
    )


def make_summary(reason: str, session_dir: str) -> RunSummary:
    return RunSummary(
        name="fake-sweep",
        started=T0,
        ended=T0 + 95,
        outcome="stopped" if reason else "completed",
        stop_reason=reason,
        safety=DataSafety(
            published=180_000,
            confirmed=179_990,
            nacked=0,
            returned=0,
            consumed=179_990,
            redelivered=12,
            duplicates=0,
            unconfirmed=10,
            lost=0,
        ),
        publish_rate=1894.7,
        confirm_rate=1894.6,
        consume_rate=1894.6,
        latency={
            (LatencyKind.END_TO_END, SendBasis.ACTUAL): _percentiles(3.0),
            (LatencyKind.CONFIRM, SendBasis.ACTUAL): _percentiles(1.5),
        },
        phases=3,
        session_dir=session_dir,
        # the clients were active from the start to the end (a summary without these times
        # would make every phase's msg/s over no active time: 0)
        active=ActiveTimes(T0, T0 + 90, T0 + 90, T0, T0 + 95),
    )


def now_sample(**kwargs: object) -> BrokerSample:
    return make_sample(time.time(), **kwargs)  # type: ignore[arg-type]


def launch_spec(uri: str, queue_prefix: str, name: str = "tui-launch") -> RunSpec:
    """A run small enough to launch from the form in a test: one queue, one publisher at
    10 msg/s and one consumer for 5 s, in one worker process."""
    return RunSpec(
        name=name,
        uri=uri,
        queues=1,
        queue_pattern=f"{queue_prefix}-%d",
        durable=False,
        publishers=1,
        rate=10.0,
        consumers=1,
        duration=5,
        workers=1,
    )


async def type_into(pilot: Any, widget_id: str, text: str) -> None:
    """Put ``text`` in the screen's input ``widget_id`` (as a paste would) and let it settle."""
    from textual.widgets import Input

    pilot.app.screen.query_one(f"#{widget_id}", Input).value = text
    await pilot.pause()
