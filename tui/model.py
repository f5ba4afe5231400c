"""What the dashboard shows, as plain data: the scrolling history of a run.

The panels read only :class:`RunHistory`; a live run and a replayed session both feed it
the same Ticks, BrokerSamples and RunEvents, so a replay looks exactly like the run did.
Everything here is pure (no Textual), so the maths tests without a screen.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from flowdeck.collectors import BrokerSample
from flowdeck.engine import EventKind, LatencyKind, Percentiles, RunEvent, SendBasis, Tick

#: Seconds of history the charts show.
WINDOW_SECONDS = 300
#: A source whose figures are older than this many statistics intervals is shown as stale.
STALE_AFTER_INTERVALS = 3.0


@dataclass(frozen=True, slots=True)
class ThroughputPoint:
    """One second of the throughput chart, msg/s."""

    elapsed: float
    target: float
    published: float
    confirmed: float
    consumed: float


@dataclass(frozen=True, slots=True)
class LatencyPoint:
    """One second of the latency chart: percentiles in ms per (kind, basis)."""

    elapsed: float
    percentiles: dict[tuple[LatencyKind, SendBasis], Percentiles]


@dataclass(frozen=True, slots=True)
class PhaseMark:
    """Where a phase started on the run's clock, and what it is called."""

    elapsed: float
    label: str


@dataclass
class RunHistory:
    """The last ``window`` seconds of a run, fed one Tick / sample / event at a time."""

    window: int = WINDOW_SECONDS
    started_at: float | None = None
    last_tick: Tick | None = None
    throughput: deque[ThroughputPoint] = field(default_factory=deque)
    latency: deque[LatencyPoint] = field(default_factory=deque)
    phases: deque[PhaseMark] = field(default_factory=deque)
    broker: dict[str, BrokerSample] = field(default_factory=dict)
    depth: deque[tuple[float, int]] = field(default_factory=deque)
    events: list[RunEvent] = field(default_factory=list)
    alarms: set[str] = field(default_factory=set)
    #: The clock ages are measured against: None = the wall clock (a live run); a replay
    #: sets it to the recorded time being shown.
    clock: float | None = None

    def now(self) -> float:
        return time.time() if self.clock is None else self.clock

    def add_tick(self, tick: Tick) -> None:
        if self.started_at is None:
            self.started_at = tick.at - tick.elapsed
        if self.last_tick is not None and tick.phase_index != self.last_tick.phase_index:
            self.phases.append(PhaseMark(tick.elapsed, tick.phase))
        self.last_tick = tick
        self.throughput.append(
            ThroughputPoint(
                tick.elapsed,
                tick.target_rate,
                tick.publish_rate,
                tick.confirm_rate,
                tick.consume_rate,
            )
        )
        self.latency.append(LatencyPoint(tick.elapsed, dict(tick.latency)))
        self._trim(tick.elapsed)

    def add_broker(self, sample: BrokerSample) -> None:
        self.broker[sample.source] = sample
        if not sample.stale and sample.queues:
            elapsed = sample.taken_at - (self.started_at or sample.taken_at)
            self.depth.append((elapsed, sample.queue_depth))
            while len(self.depth) > 2 and self.depth[0][0] < elapsed - self.window:
                self.depth.popleft()
        self.alarms = set()
        for fresh in self.broker.values():
            if fresh.memory_alarm:
                self.alarms.add("memory")
            if fresh.disk_alarm:
                self.alarms.add("disk")

    def add_event(self, event: RunEvent) -> None:
        self.events.append(event)
        if event.kind is EventKind.ALARM_RAISED:
            resource = str(event.detail.get("alarm", "")) or _alarm_word(event.message)
            if resource:
                self.alarms.add(resource)
        elif event.kind is EventKind.ALARM_CLEARED:
            resource = str(event.detail.get("alarm", "")) or _alarm_word(event.message)
            self.alarms.discard(resource)

    @property
    def sample(self) -> BrokerSample | None:
        """The broker sample to show: the freshest of the sources, management first."""
        live = [s for s in self.broker.values() if not s.stale]
        candidates = live or list(self.broker.values())
        if not candidates:
            return None
        return max(candidates, key=lambda s: (s.figures_at, s.source == "management"))

    def depth_trend(self) -> float | None:
        """Queue depth change in msg/s over the last minute of samples; None if unknown."""
        if len(self.depth) < 2:
            return None
        last_at, last = self.depth[-1]
        first_at, first = next(
            ((at, d) for at, d in self.depth if at >= last_at - 60), self.depth[0]
        )
        if last_at - first_at <= 0:
            first_at, first = self.depth[0]
        if last_at - first_at <= 0:
            return None
        return (last - first) / (last_at - first_at)

    def _trim(self, elapsed: float) -> None:
        horizon = elapsed - self.window
        while self.throughput and self.throughput[0].elapsed < horizon:
            self.throughput.popleft()
        while self.latency and self.latency[0].elapsed < horizon:
            self.latency.popleft()
        while self.phases and self.phases[0].elapsed < horizon:
            self.phases.popleft()


def _alarm_word(message: str) -> str:
    lowered = message.lower()
    if "memory" in lowered:
        return "memory"
    if "disk" in lowered:
        return "disk"
    return ""


def source_age(sample: BrokerSample, now: float | None = None) -> float:
    """How old the sample's figures are now: their age when polled plus time since."""
    now = time.time() if now is None else now
    return max(0.0, now - sample.figures_at)


def stale_reason(sample: BrokerSample, now: float | None = None) -> str:
    """Why the sample must not be read as live, or "" when it is fresh.

    A source that stopped sending samples at all goes stale here even if its last sample
    said nothing was wrong: its figures only grow older.
    """
    if sample.stale_reason:
        return sample.stale_reason
    interval = max(sample.statistics_interval, 1.0)
    age = source_age(sample, now)
    if age > STALE_AFTER_INTERVALS * interval + 5:
        return f"no new figures from {sample.source} for {age:.0f} s"
    return ""


def wrap_key(*lines: str) -> tuple[tuple[int, ...], ...]:
    """What the wrapped height of these lines depends on: their words' lengths.

    Text wraps at spaces, so two texts with the same key take the same number of rows at
    any width. A panel whose key is unchanged can be updated without a layout of the
    screen (which re-renders every panel and is the costliest thing on the event loop).
    """
    return tuple(tuple(len(word) for word in line.split(" ")) for line in lines)


def human_bytes(value: int | None) -> str:
    if value is None:
        return "?"
    size = float(value)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(size) < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def human_count(value: float | None) -> str:
    if value is None:
        return "?"
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if abs(value) >= 10_000:
        return f"{value / 1000:.1f}k"
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.1f}"


def human_age(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m"
