"""What the dashboard shows, as plain data: the scrolling history of a run.

The panels read only :class:`RunHistory`; a live run and a replayed session both feed it
the same Ticks, BrokerSamples and RunEvents, so a replay looks exactly like the run did.
Everything here is pure (no Textual), so the maths tests without a screen.
"""

from __future__ import annotations

import socket
import statistics
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from flowdeck.collectors import BrokerSample
from flowdeck.engine import (
    STEERABLE,
    ClientSnapshot,
    EventKind,
    LatencyKind,
    Percentiles,
    PhaseTable,
    RunEvent,
    SendBasis,
    Setting,
    Settings,
    SpecError,
    Tick,
    format_number,
    parse_change,
)
from flowdeck.figures import (
    SWEEP_LATENCY,
    PhaseLoad,
    Recommendation,
    RunFigures,
    SweepPoint,
    Trend,
    Verdict,
    judge,
    ranked_throughput,
    recent,
    recommend,
    slope,
    trend_of,
)
from flowdeck.figures import PhaseFigures as ReportPhase
from flowdeck.figures.pipeline import Pipeline, pipeline_of

if TYPE_CHECKING:
    from flowdeck.engine import HostRow

#: Seconds of history the charts show.
WINDOW_SECONDS = 300
#: A source whose figures are older than this many statistics intervals is shown as stale.
STALE_AFTER_INTERVALS = 3.0
#: The per-phase figures are recomputed no sooner than this many times what they took
#: last (so they take at most a tenth of the screen's time).
REPORT_COST_FACTOR = 10.0


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

    @property
    def tag(self) -> str:
        """The label as the charts print it beside the phase line (:func:`phase_tag`)."""
        return phase_tag(self.label)


#: How the charts and the per-setting table abbreviate each setting: ``if=40``, ``pf=500``.
SETTING_TAGS: dict[Setting, str] = {row.setting: row.short_tag for row in STEERABLE}
#: The flag before a phase the operator marked with a label of their own.
MARK_FLAG = "⚑"


def phase_tag(label: str) -> str:
    """A phase label in a few cells: a change in force reads ``if=40`` or ``pf=500``, pause
    and resume as themselves, and a mark (any label that is not a change) as ``⚑ label``.
    The run's first phase (``start``) and its ``drain`` keep their names."""
    if label in ("", "start", "drain"):
        return label or "start"
    try:
        change = parse_change(label)
    except SpecError:
        return f"{MARK_FLAG} {label}"
    if change.setting is Setting.MARK:
        return f"{MARK_FLAG} {change.label or 'mark'}"
    if change.setting not in SETTING_TAGS or change.value is None:
        return change.setting.value
    if change.relative:
        return change.describe().replace(change.setting.value, SETTING_TAGS[change.setting], 1)
    return format_tag(change.setting, change.value)


def format_tag(setting: Setting, value: float) -> str:
    """``if=40``: a setting's short name and its value."""
    return f"{SETTING_TAGS[setting]}={format_number(value)}"


#: The kinds of period the charts shade: broker alarm or blocked publishers, publishing
#: paused, broker connection lost.
SHADE_KINDS = ("alarm", "paused", "outage")


@dataclass(frozen=True, slots=True)
class Shade:
    """A stretch of the run's clock the charts shade (``kind`` one of :data:`SHADE_KINDS`);
    ``end`` is the last second seen in it while it lasts."""

    kind: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class PhaseSecond:
    """One engine tick of a phase: what the per-setting table summarises."""

    elapsed: float
    publish: float
    confirm: float
    consume: float
    target: float  # 0: no rate limit (or paused)
    pending_confirms: int
    blocked: int
    paused: bool
    alarm: bool
    #: e2e latency from the actual send time over the tick, ms (None: nothing measured).
    p50: float | None
    p99: float | None


@dataclass
class PhaseTrack:
    """Everything the screen saw of one phase: its ticks and the broker's queue depth."""

    index: int
    label: str
    start: float
    settings: Settings
    drain: bool = False
    seconds: list[PhaseSecond] = field(default_factory=list)
    #: (elapsed, ready messages) of fresh broker polls, per source.
    polls: dict[str, list[tuple[float, int]]] = field(default_factory=dict)


#: Snapshots per worker the live host rows span (one a second): msg/s and CPU over the
#: last few seconds, steadier than one second's.
HOST_RATE_SNAPSHOTS = 4


@dataclass
class HostTable:
    """The per-host rows of a run as it goes: one ``HostRow`` per worker, from the
    snapshots the ticks carry (counts, msg/s and CPU over the last few seconds) and the
    events that say where a worker runs (a remote worker's link: host and pid) and when one
    was lost. A worker without a link runs on this host. At the end, the placement's
    per-host figures (its event's ``hosts``) replace the live ones for the summary."""

    #: What a worker without a link is shown on: this host (a replay: where it is replayed).
    local_host: str = field(default_factory=socket.gethostname)
    #: The run's workers, as many as a tick said were alive at most.
    workers: int = 0
    recent: dict[int, deque[ClientSnapshot]] = field(default_factory=dict)
    first: dict[int, ClientSnapshot] = field(default_factory=dict)
    #: Host and pid of the workers that connected over a link.
    linked: dict[int, tuple[str, int]] = field(default_factory=dict)
    lost_at: dict[int, float] = field(default_factory=dict)
    #: The placement's figures over the whole run, once it said them (the run's end).
    final: tuple[HostRow, ...] = ()

    @property
    def shown(self) -> bool:
        """Whether a table says more than the run's totals: several workers, or one on
        another host."""
        return len(self.known()) > 1 or bool(self.linked)

    def known(self) -> set[int]:
        return set(self.recent) | set(self.linked) | set(self.lost_at)

    def add_tick(self, workers: int, snapshots: Sequence[ClientSnapshot]) -> None:
        self.workers = max(self.workers, workers)
        for snap in snapshots:
            self.first.setdefault(snap.worker, snap)
            recent = self.recent.setdefault(snap.worker, deque(maxlen=HOST_RATE_SNAPSHOTS))
            recent.append(snap)

    def add_event(self, event: RunEvent) -> None:
        detail: Mapping[str, Any] = event.detail or {}
        if "worker_lost" in detail:
            worker = int(detail["worker_lost"])
            self.lost_at[worker] = event.at
            if "host" in detail:
                self.linked.setdefault(worker, (str(detail["host"]), int(detail.get("pid") or 0)))
        elif isinstance(detail.get("hosts"), list):
            from flowdeck.engine import HostRow

            self.final = tuple(
                replace(row, lost_at=self.lost_at.get(row.worker))
                for row in (HostRow.from_json(item) for item in detail["hosts"])
            )
        elif {"worker", "host", "pid"} <= detail.keys():  # a remote worker connected
            self.linked[int(detail["worker"])] = (str(detail["host"]), int(detail["pid"]))

    def _place(self, worker: int) -> tuple[str, int]:
        return self.linked.get(worker, (self.local_host, 0))

    def _workers(self) -> int:
        return max(self.workers, len(self.known()), 1)

    def rows(self) -> list[HostRow]:
        """Now: each worker's counts, its msg/s and CPU over its last few snapshots; a lost
        worker keeps its last counts, with no rate."""
        from flowdeck.engine import HostRow

        rows = []
        for worker in sorted(self.known()):
            host, pid = self._place(worker)
            lost_at = self.lost_at.get(worker)
            recent = self.recent.get(worker)
            if not recent:
                # Connected, no snapshot yet: where it is, and nothing more.
                nothing = dict.fromkeys(("publishers", "consumers", "published", "consumed"), 0)
                rows.append(
                    HostRow(
                        worker=worker,
                        host=host,
                        pid=pid,
                        **nothing,
                        publish_rate=0.0,
                        consume_rate=0.0,
                        cpu_seconds=None,
                        wall_seconds=None,
                        lost=lost_at is not None,
                        lost_at=lost_at,
                    )
                )
                continue
            row = HostRow.between(
                recent[0],
                recent[-1],
                workers=self._workers(),
                host=host,
                pid=pid,
                lost_at=lost_at,
            )
            if lost_at is not None:
                row = replace(row, publish_rate=0.0, consume_rate=0.0, cpu_seconds=None)
            rows.append(row)
        return rows

    def run_rows(self) -> list[HostRow]:
        """Over the whole run: the placement's figures when it gave them, else each
        worker's first to last snapshot."""
        if self.final:
            return list(self.final)
        from flowdeck.engine import HostRow

        rows = []
        for worker in sorted(self.recent):
            host, pid = self._place(worker)
            rows.append(
                HostRow.between(
                    self.first[worker],
                    self.recent[worker][-1],
                    workers=self._workers(),
                    host=host,
                    pid=pid,
                    lost_at=self.lost_at.get(worker),
                )
            )
        return rows


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
    #: Every phase of the run so far (not only the window): the per-setting table's rows.
    tracks: list[PhaseTrack] = field(default_factory=list)
    #: Alarm, pause and outage periods within the window, for the charts' shading.
    shades: deque[Shade] = field(default_factory=deque)
    #: Publishing has stopped at the run's end; consumers take what is left.
    draining: bool = False
    #: Workers that lost their broker connection and have not got it back.
    outages: int = 0
    #: The broker's count of what it took in, and the pipeline as of when it first showed
    #: (an attached run's flow tab: a repeated count is not compared with the clients' now).
    _pipeline_seen: tuple[int, Pipeline] | None = None
    #: The clock ages are measured against: None = the wall clock (a live run); a replay
    #: sets it to the recorded time being shown.
    clock: float | None = None
    #: The run's per-phase figures (``figures.run``, what the report computes), fed the
    #: workers' snapshots each tick carries, the broker samples and the events; it has
    #: none when ticks come without snapshots (an attached run: the control API sends
    #: none). It keeps the e2e latency only (the table's p50 and p99): decoding every
    #: worker's four histograms a second time would cost the screen's loop.
    report: PhaseTable = field(default_factory=lambda: PhaseTable(latency_keys=(TABLE_LATENCY,)))
    #: How many snapshots ``report`` has taken in.
    snapshots: int = 0
    #: One row per worker: where it runs, its clients, msg/s and CPU (the hosts tab).
    hosts: HostTable = field(default_factory=HostTable)
    #: ``report``'s figures as of (``snapshots``, events), when they were computed
    #: (monotonic) and how long that took.
    _report_cache: tuple[int, int, RunFigures | None] | None = None
    _report_at: float = 0.0
    _report_cost: float = 0.0

    def now(self) -> float:
        return time.time() if self.clock is None else self.clock

    def add_tick(self, tick: Tick) -> None:
        if self.started_at is None:
            self.started_at = tick.at - tick.elapsed
        self.hosts.add_tick(tick.workers, tick.snapshots)
        if tick.snapshots:
            if self.report.started_at is None:
                self.report.begin(self.started_at)
            for snap in tick.snapshots:
                self.report.add_snapshot(snap)
            self.snapshots += len(tick.snapshots)
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
        self._track(tick)
        self._trim(tick.elapsed)

    def _track(self, tick: Tick) -> None:
        """File the tick under its phase (the drain is a phase of its own) and extend the
        shaded periods it falls in."""
        drain = self.draining
        index = -1 if drain else tick.phase_index
        track = self.tracks[-1] if self.tracks else None
        if track is None or track.index != index:
            label = "drain" if drain else tick.phase or "start"
            track = PhaseTrack(index, label, tick.elapsed, tick.settings, drain=drain)
            self.tracks.append(track)
        track.settings = tick.settings
        e2e = tick.latency.get((LatencyKind.END_TO_END, SendBasis.ACTUAL))
        measured = e2e is not None and e2e.count > 0
        alarm = bool(self.alarms) or tick.blocked > 0
        track.seconds.append(
            PhaseSecond(
                elapsed=tick.elapsed,
                publish=tick.publish_rate,
                confirm=tick.confirm_rate,
                consume=tick.consume_rate,
                target=tick.target_rate,
                pending_confirms=tick.pending_confirms,
                blocked=tick.blocked,
                paused=tick.settings.paused,
                alarm=alarm,
                p50=e2e.p50 if e2e is not None and measured else None,
                p99=e2e.p99 if e2e is not None and measured else None,
            )
        )
        for kind, on in (
            ("alarm", alarm),
            ("paused", tick.settings.paused),
            ("outage", self.outages > 0),
        ):
            if on:
                self._shade(kind, tick.elapsed)

    def _shade(self, kind: str, elapsed: float) -> None:
        """Extend the open period of ``kind`` to ``elapsed``, or open one a second back."""
        for position in range(len(self.shades) - 1, -1, -1):
            shade = self.shades[position]
            if shade.kind == kind:
                if elapsed - shade.end <= 1.5:
                    self.shades[position] = Shade(kind, shade.start, elapsed)
                    return
                break
        self.shades.append(Shade(kind, max(0.0, elapsed - 1.0), elapsed))

    def add_broker(self, sample: BrokerSample) -> None:
        self.broker[sample.source] = sample
        if self.started_at is not None:
            if self.report.started_at is None:
                self.report.begin(self.started_at)
            self.report.add_poll(sample)
        if not sample.stale and sample.queues:
            elapsed = sample.taken_at - (self.started_at or sample.taken_at)
            self.depth.append((elapsed, sample.queue_depth))
            while len(self.depth) > 2 and self.depth[0][0] < elapsed - self.window:
                self.depth.popleft()
            if self.tracks:
                polls = self.tracks[-1].polls.setdefault(sample.source, [])
                polls.append((elapsed, sample.queue_ready))
        self.alarms = set()
        for fresh in self.broker.values():
            if fresh.memory_alarm:
                self.alarms.add("memory")
            if fresh.disk_alarm:
                self.alarms.add("disk")

    def add_event(self, event: RunEvent) -> None:
        self.events.append(event)
        self.report.add_event(event)
        self.hosts.add_event(event)
        if event.kind is EventKind.DRAIN:
            self.draining = True
        elif event.kind is EventKind.OUTAGE_STARTED:
            self.outages += 1
        elif event.kind is EventKind.OUTAGE_ENDED:
            self.outages = max(0, self.outages - 1)
        elif event.kind is EventKind.ALARM_RAISED:
            resource = str(event.detail.get("alarm", "")) or _alarm_word(event.message)
            if resource:
                self.alarms.add(resource)
        elif event.kind is EventKind.ALARM_CLEARED:
            resource = str(event.detail.get("alarm", "")) or _alarm_word(event.message)
            self.alarms.discard(resource)

    def run_ended(self, ended: float | None, summary: Mapping[str, Any]) -> None:
        """The run ended: its summary document says when the clients were active (its
        ``active`` times): the per-phase figures divide by those spans from now on, as the
        report and the run's JSON summary do."""
        self.report.end(ended, summary)
        self._report_cache = None

    def report_figures(self) -> RunFigures | None:
        """The run's figures so far (``figures.run``); None when no tick carried the
        workers' snapshots (the table then says what it shows). They go over every row of
        the run, so once that takes a while they are recomputed at most every
        :data:`REPORT_COST_FACTOR` times what the last computation took (a long run's table
        lags by seconds, the screen stays quick)."""
        if not self.snapshots:
            return None
        cache = self._report_cache
        key = (self.snapshots, len(self.events))
        now = time.monotonic()
        if cache is None or (
            cache[:2] != key and now - self._report_at >= REPORT_COST_FACTOR * self._report_cost
        ):
            cache = (*key, self.report.figures())
            self._report_cache = cache
            self._report_at = time.monotonic()
            self._report_cost = self._report_at - now
        return cache[2]

    def queue_p99(self) -> dict[str, float]:
        """Each queue's e2e p99 (ms, from the actual send) over the latest phase that has
        per-queue figures (the run's own figures; none for an attached run)."""
        figures = self.report_figures()
        if figures is None:
            return {}
        for phase in reversed(figures.phases):
            if phase.queues:
                return {q: float(row.get("p99") or 0) / 1000 for q, row in phase.queues.items()}
        return {}

    def pipeline(self) -> Pipeline | None:
        """Where the run's messages are at the latest broker poll (``figures.pipeline``):
        from the run's own figures when the screen has the workers' snapshots, else (an
        attached run) from the last sample and the clients' count at its time, as the last
        tick's total less what its publish rate sent since."""
        from flowdeck.engine import broker_row

        tick = self.last_tick
        pending = tick.pending_confirms if tick is not None else None
        figures = self.report_figures()
        if figures is not None and figures.polls:
            # The last poll whose count of what the broker took in was new (a repeated
            # count says nothing about now: figures.run).
            polls = [p for p in figures.polls if p.get("before_queues") is not None]
            return pipeline_of((polls or list(figures.polls))[-1], pending)
        sample = self.sample
        if sample is None or self.started_at is None:
            return None
        seen = self._pipeline_seen
        if seen is not None and sample.run_accepted is not None and seen[0] == sample.run_accepted:
            return seen[1]  # the same count again: as of when it first showed
        row = broker_row(sample, self.started_at)
        if tick is not None and sample.run_accepted is not None:
            since = max(0.0, tick.at - sample.figures_at)
            sent = tick.totals.published - tick.publish_rate * since
            row["before_queues"] = max(0.0, sent - sample.run_accepted)
        found = pipeline_of(row, pending)
        if sample.run_accepted is not None:
            self._pipeline_seen = (sample.run_accepted, found)
        return found

    @property
    def sample(self) -> BrokerSample | None:
        """The broker sample to show: the freshest of the sources, management first."""
        live = [s for s in self.broker.values() if not s.stale]
        candidates = live or list(self.broker.values())
        if not candidates:
            return None
        return max(candidates, key=lambda s: (s.figures_at, s.source == "management"))

    def depth_direction(self) -> tuple[float | None, Trend | None]:
        """The depth's recent slope (msg/s) and which way it goes by the figures' flat rule
        (``figures.trend_of``, against the consume rate): what every arrow shows."""
        rate = self.depth_trend()
        through = self.last_tick.consume_rate if self.last_tick is not None else 0.0
        return rate, trend_of(rate, through)

    def depth_trend(self) -> float | None:
        """Which way the queues go now, msg/s: the least-squares slope of the depth over the
        recent window (``figures.trend``), so a queue draining from a peak reads down;
        None when unknown."""
        return slope(recent([(at, float(depth)) for at, depth in self.depth]))

    def _trim(self, elapsed: float) -> None:
        horizon = elapsed - self.window
        while self.throughput and self.throughput[0].elapsed < horizon:
            self.throughput.popleft()
        while self.latency and self.latency[0].elapsed < horizon:
            self.latency.popleft()
        while self.phases and self.phases[0].elapsed < horizon:
            self.phases.popleft()
        while self.shades and self.shades[0].end < horizon:
            self.shades.popleft()


@dataclass(frozen=True, slots=True)
class RunState:
    """What the publishers are doing, in one true phrase, and how loud to show it."""

    word: str
    severity: str  # "ok", "warning" or "error"


def run_state(history: RunHistory, settings: Settings) -> RunState:
    """``publishing`` only when publishers can publish: a broker alarm or blocked
    connections say ``BLOCKED by memory alarm on <node>`` (the client's own
    ``connection.blocked`` is the fastest signal, the alarm events and samples name the
    cause), a pause ``paused``, the run's end ``draining``, a lost connection
    ``reconnecting``."""
    if history.draining:
        return RunState("draining", "warning")
    if history.outages:
        return RunState("RECONNECTING: broker connection lost", "error")
    if settings.paused:
        return RunState("paused", "warning")
    tick = history.last_tick
    blocked = tick.blocked if tick is not None else 0
    if history.alarms or blocked:
        causes = []
        sample = history.sample
        nodes = sample.nodes if sample is not None else ()
        for alarm in sorted(history.alarms):
            where = [n.name for n in nodes if (n.mem_alarm if alarm == "memory" else n.disk_alarm)]
            causes.append(f"{alarm} alarm" + (f" on {', '.join(where)}" if where else ""))
        cause = " and ".join(causes) or "the broker (flow control)"
        count = f" ({blocked} of {tick.connections} connections)" if tick and blocked else ""
        return RunState(f"BLOCKED by {cause}{count}", "error")
    if settings.publishers == 0:
        return RunState("no publishers", "warning")
    return RunState("publishing", "ok")


# -- the per-setting table: each phase's figures and verdict, as the report gives them -----

#: A phase's first seconds after a change are its transition (windows filling, prefetch
#: re-consumes, a backlog draining): the "settled" consume rate leaves them out when the
#: phase has at least twice as many seconds.
SETTLE_SECONDS = 3
#: The settings the report sweeps: a run that ran two or more values of one gets a
#: recommendation.
SWEEP_SETTINGS: tuple[Setting, ...] = tuple(row.setting for row in STEERABLE if row.sweep)


#: The latency of the table's p50 and p99 (the report's sweep tables' too): end to end, from
#: the actual send.
TABLE_LATENCY = (LatencyKind.END_TO_END, SendBasis.ACTUAL)
#: What a row's figures are: the run's own per-phase figures (``figures.run``: what the
#: report, ``run --json`` and the autopilot give), or, where the screen gets ticks without
#: the workers' snapshots (an attached run), medians of the phase's per-second tick figures.
BASIS_REPORT = "report"
BASIS_TICKS = "ticks"


@dataclass(frozen=True, slots=True)
class SettingRow:
    """One row of the per-setting table: a phase's figures and its verdict.

    With :data:`BASIS_REPORT` every figure is the phase's own in ``figures.run`` (msg/s over
    the clients' active time, percentiles of its merged histograms, the verdict rules, the
    depth's recent trend); ``steady_consume`` is the median consume rate of its seconds
    after the first :data:`SETTLE_SECONDS`. With :data:`BASIS_TICKS` (no snapshots reach
    this screen) msg/s and ms are medians of the phase's tick figures after those seconds,
    judged by the same rules.
    """

    index: int
    label: str
    settings: Settings
    seconds: int
    steady: int
    publish: float
    confirm: float
    consume: float
    p50: float | None
    p99: float | None
    depth_slope: float | None
    #: None: the phase has no client figures (yet): nothing to judge.
    verdict: Verdict | None
    reason: str
    paused_seconds: int = 0
    drain: bool = False
    steady_consume: float = 0.0
    basis: str = BASIS_REPORT
    target: float | None = None
    p999: float | None = None

    @property
    def taken(self) -> float:
        """What the broker took: confirms with publisher confirms on, else publishes."""
        return self.confirm or self.publish

    @property
    def consume_ratio(self) -> float | None:
        """Consumed over what the broker took (confirmed, or published without confirms)."""
        return self.consume / self.taken if self.taken > 0 else None

    @property
    def paused_only(self) -> bool:
        """Paused throughout: no load to compare (the report leaves such phases out too)."""
        return self.paused_seconds >= self.steady


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def settled(seconds: Sequence[Any]) -> Sequence[Any]:
    """A phase's seconds after its transition (all of them when it is short)."""
    return seconds[SETTLE_SECONDS:] if len(seconds) >= 2 * SETTLE_SECONDS else seconds


def report_row(
    phase: ReportPhase, seconds: Sequence[Mapping[str, Any]], base: Settings
) -> SettingRow:
    """A phase of the run's figures as a row: its figures unchanged; ``seconds`` are its
    per-second rows (for the settled consume rate); ``base`` the settings a phase takes
    where the figures do not say (paused, the read hold)."""
    values = {
        row.field: row.convert(found)
        for row in STEERABLE
        if (found := phase.client.get(row.field)) is not None
    }
    e2e = phase.percentiles(SWEEP_LATENCY)
    return SettingRow(
        index=phase.index,
        label=phase.label,
        settings=base.changed(**values),
        seconds=phase.seconds,
        steady=len(settled(seconds)),
        publish=phase.figure("publish_rate_mean"),
        confirm=phase.figure("confirm_rate_mean"),
        consume=phase.figure("consume_rate_mean"),
        p50=None if e2e is None else e2e.p50,
        p99=None if e2e is None else e2e.p99,
        p999=None if e2e is None else e2e.p999,
        depth_slope=phase.broker.get("depth_recent_slope"),
        verdict=phase.verdict,
        reason=phase.reason,
        paused_seconds=int(phase.client.get("paused_s") or 0),
        drain=phase.is_drain,
        steady_consume=_median([float(s.get("consume_rate") or 0.0) for s in settled(seconds)]),
        basis=BASIS_REPORT,
        target=phase.target_rate,
    )


def tick_row(track: PhaseTrack) -> SettingRow | None:
    """The track summed up from its ticks alone and judged by the report's rules
    (``figures.judge``); None when it has no second yet. The drain is not judged."""
    seconds = track.seconds
    if not seconds:
        return None
    steady = settled(seconds)
    running = [s for s in steady if not s.paused]
    polls = max(track.polls.values(), key=len, default=[])
    points = [(at, float(ready)) for at, ready in polls]
    targets = [s.target for s in running]
    target = sum(targets) / len(targets) if targets and all(t > 0 for t in targets) else None
    unpaused = _median([s.publish for s in running]) if len(running) < len(steady) else None
    load = PhaseLoad(
        publish_rate=_median([s.publish for s in steady]),
        consume_rate=_median([s.consume for s in steady]),
        confirm_rate=_median([s.confirm for s in steady]),
        target_rate=target,
        pending_confirms_mean=sum(s.pending_confirms for s in steady) / len(steady),
        inflight=track.settings.inflight,
        publishers=track.settings.publishers,
        blocked_s=float(sum(1 for s in seconds if s.blocked > 0)),
        alarm_s=float(sum(1 for s in seconds if s.alarm)),
        depth_start=points[0][1] if points else None,
        depth_end=points[-1][1] if points else None,
        depth_slope=slope(points),
        depth_recent_slope=slope(recent(points)),
        publish_rate_unpaused=unpaused if running else None,
        seconds=len(steady),
        paused_s=len(steady) - len(running),
    )
    latencies = [s for s in steady if s.p50 is not None and s.p99 is not None]
    if track.drain:
        verdict, reason = Verdict.DRAIN, "the drain: publishing stopped, consumers take the rest"
    else:
        verdict, reason = judge(load)
    return SettingRow(
        index=track.index,
        label=track.label,
        settings=track.settings,
        seconds=len(seconds),
        steady=len(steady),
        publish=load.publish_rate,
        confirm=load.confirm_rate or 0.0,
        consume=load.consume_rate,
        p50=_median([s.p50 or 0.0 for s in latencies]) if latencies else None,
        p99=_median([s.p99 or 0.0 for s in latencies]) if latencies else None,
        depth_slope=load.depth_recent_slope,
        verdict=verdict,
        reason=reason,
        paused_seconds=len(steady) - len(running),
        drain=track.drain,
        steady_consume=load.consume_rate,
        basis=BASIS_TICKS,
        target=target,
    )


@dataclass(frozen=True, slots=True)
class SweptSetting:
    """A setting the run so far ran at two or more values: its sweep's points, each with the
    position in the table's rows of the phase it stands for, and the recommendation."""

    setting: Setting
    points: tuple[tuple[int, SweepPoint], ...]
    recommendation: Recommendation


@dataclass(frozen=True, slots=True)
class SettingVerdicts:
    """The per-setting table: its rows, the best one and the report's recommendation."""

    rows: tuple[SettingRow, ...]
    #: Index in ``rows`` of the row to highlight (None: nothing to compare yet).
    best: int | None
    sweeps: tuple[SweptSetting, ...] = ()

    @property
    def recommendations(self) -> tuple[tuple[Setting, Recommendation], ...]:
        return tuple((s.setting, s.recommendation) for s in self.sweeps)

    @property
    def lines(self) -> tuple[str, ...]:
        """What the report prints per sweep: the last line of each recommendation."""
        return tuple(rec.reasoning[-1] for _, rec in self.recommendations)


def setting_verdicts(history: RunHistory, max_p99_ms: float | None = None) -> SettingVerdicts:
    """Every phase judged, and the recommendation the report would print for the run so far:
    the run's own figures (``figures.run``) when the screen gets the workers' snapshots;
    otherwise the phases' tick figures, judged and swept by the same rules."""
    figures = history.report_figures()
    tick = history.last_tick  # any run with figures has had a tick
    if figures is not None and figures.phases and tick is not None:
        base = tick.settings
        by_phase: dict[int, list[Mapping[str, Any]]] = {}
        for second in figures.seconds:
            by_phase.setdefault(int(second["phase"]), []).append(second)
        rows = tuple(
            report_row(phase, by_phase.get(phase.index, []), base) for phase in figures.phases
        )
        position = {row.index: n for n, row in enumerate(rows)}
        sweeps = tuple(
            SweptSetting(
                Setting(sweep.setting),
                tuple(
                    (position[phase.index], point)
                    for phase, point in zip(sweep.rows, sweep.points, strict=True)
                    if phase.index in position
                ),
                sweep.recommendation,
            )
            for sweep in figures.sweeps
        )
        chosen = next((s.best for s in figures.sweeps if s.best is not None), None)
        best = None if chosen is None else position.get(chosen.index)
        return SettingVerdicts(rows, best, sweeps)
    ticked = tuple(r for r in (tick_row(t) for t in history.tracks) if r is not None)
    active = [r for r in ticked if not r.drain and not r.paused_only]
    swept: list[SweptSetting] = []
    best_point = None
    for setting in SWEEP_SETTINGS:
        field_name = setting.value
        if len({r.settings.value(field_name) for r in active}) < 2:
            continue
        points = [
            ranked_throughput(
                int(r.settings.value(field_name)), r.consume, r.target, r.p99,
                r.verdict or Verdict.OVERLOADED, r.label,
            )
            for r in active
        ]  # fmt: skip
        recommendation = recommend(field_name, points)
        swept.append(
            SweptSetting(
                setting,
                tuple((ticked.index(r), p) for r, p in zip(active, points, strict=True)),
                recommendation,
            )
        )
        if best_point is None and recommendation.point is not None:
            best_point = active[points.index(recommendation.point)]
    best_index = None if best_point is None else ticked.index(best_point)
    return SettingVerdicts(ticked, best_index, tuple(swept))


def axis_top(values: Sequence[float], *, headroom: float = 1.2, quantile: float = 0.95) -> float:
    """The top of a chart's y axis from what the run sustains: the ``quantile`` of the
    visible values times ``headroom``, so a catch-up spike after a stall (drawn clipped at
    the top) does not flatten the steady line. 0 when there are no values."""
    finite = sorted(v for v in values if v == v and v not in (float("inf"), float("-inf")))
    if not finite:
        return 0.0
    position = quantile * (len(finite) - 1)
    low = int(position)
    high = min(low + 1, len(finite) - 1)
    value = finite[low] + (finite[high] - finite[low]) * (position - low)
    return value * headroom


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
