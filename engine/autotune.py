"""The autopilot: it searches one setting while the run goes and leaves the run at the best.

An operator tuning the in-flight limit (or prefetch, or the ack interval) steps it up,
waits for msg/s to settle, reads the figures and steps again until more stops paying; the
autopilot does exactly that, through the controller's public surface (``request`` with
source ``autotune``, the change grammar's :class:`Change`) and as a sink of the run, so
every step is a change, every change opens a phase, and the recorded session splits into
the steps the way the report splits any sweep.

The search, as stated in ``docs/autotune.md``:

* **Ladder**: the seed's percentages of a base (1 % 2 % 5 % 10 % 20 % 50 % 100 % 200 %),
  extended below 1 % on the same 1-2-5 series so a short confirm round trip still finds its
  knee; the base is the per-publisher target rate for ``inflight`` and ``prefetch`` and the
  prefetch for ``ack_every`` (up to 50 %: beyond the prefetch consumers would never ack).
  Without a base: 1, 2, 5, ... 2000. The search climbs from the bottom.
* **Steady**: a step is held at least :attr:`SteadyRule.min_hold_s`; it is steady once the
  last :attr:`SteadyRule.window` seconds' consume rates have a coefficient of variation at
  most :attr:`SteadyRule.max_cv` and no trend (the least-squares change across the window,
  relative to the mean, at most :attr:`SteadyRule.max_trend`). After
  :attr:`SteadyRule.max_hold_s` the step is judged as it stands, marked unsteady.
* **Judged by the report's rules**: the step's figures are those the report computes for its
  phase (:class:`engine.phase_figures.PhaseTable`; queue depth from the broker's polls) and
  go through ``figures.verdict`` (``judge``, ``ranked_throughput``, ``recommend``),
  the one home of the verdict rules.
* **Stop** when throughput stops rising (the best so far not beaten by more than the
  report's tolerance for :data:`FLAT_STEPS` steps), when a step is overloaded, its e2e p99
  is past ``max_p99_ms`` or the backlog past ``max_backlog``, or the ladder ends; then the
  run is set to the value :func:`~flowdeck.figures.verdict.recommend` picks from the
  steps (the report's recommendation over the same phases) and an event says so.

:class:`Search` and :class:`SteadyRule` hold the decisions and do no I/O (unit tests feed
them); :class:`Autopilot` drives a run with them.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeGuard, runtime_checkable

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.change import Change, format_number
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.phase_figures import PhaseFigures, PhaseTable
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.settings import BY_SETTING, Setting, setting_value
from flowdeck.engine.sinks import NullSink, RunStarted, Sink
from flowdeck.engine.snapshot import ClientSnapshot, Settings
from flowdeck.engine.spec import RunSpec
from flowdeck.figures.verdict import (
    THROUGHPUT_TOLERANCE,
    PhaseLoad,
    Recommendation,
    SweepPoint,
    Verdict,
    judge,
    ranked_throughput,
    recommend,
)

#: The settings the autopilot can search.
TUNABLE: tuple[Setting, ...] = (Setting.INFLIGHT, Setting.PREFETCH, Setting.ACK_EVERY)
#: The seed's shares of the target rate (1 %..200 %), with the 1-2-5 series below 1 %.
SHARES: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
#: ack_every stops at half the prefetch: past the prefetch consumers would never ack.
ACK_SHARE_TOP = 0.5
#: The ladder when there is no base (no rate limit, or prefetch 0 for ack_every).
PLAIN_LADDER: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
#: Steps in a row not beating the best so far (by more than the report's tolerance) that
#: end the search: throughput has stopped rising.
FLAT_STEPS = 2
#: The source the autopilot's changes carry in the event log.
SOURCE = "autotune"
#: The latency the bounds and the report's sweep tables use.
E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)


def tunable(setting: Setting | str) -> Setting:
    """The setting named (``inflight``, ``prefetch``, ``ack_every``), or a one-line error."""
    names = ", ".join(s.value for s in TUNABLE)
    word = setting.value if isinstance(setting, Setting) else setting.strip().lower()
    found = next((s for s in TUNABLE if s.value == word.replace("-", "_")), None)
    if found is None:
        raise SpecError("autotune", f"the autopilot tunes {names}; got {word!r}")
    return found


def ladder(setting: Setting, settings: Settings) -> tuple[int, ...]:
    """The values to try, smallest first (see the module docstring)."""
    setting = tunable(setting)
    row = BY_SETTING[setting]
    top = row.high
    if setting is Setting.ACK_EVERY:
        base = float(settings.prefetch)
        shares = tuple(s for s in SHARES if s <= ACK_SHARE_TOP)
        if settings.prefetch > 0:
            top = min(top, settings.prefetch)
    else:
        base = settings.rate
        shares = SHARES
    values = {max(1, round(base * s)) for s in shares} if base > 0 else set(PLAIN_LADDER)
    return tuple(sorted(v for v in values if max(1.0, row.low) <= v <= top))


# -- steadiness ------------------------------------------------------------------------------


class Hold(StrEnum):
    """Where a step stands: still holding, steady, or given up on (judged unsteady)."""

    HOLDING = "holding"
    STEADY = "steady"
    UNSTEADY = "unsteady"


@dataclass(frozen=True, slots=True)
class Steadiness:
    hold: Hold
    #: How it was decided, in figures: ``cv 2.1%, trend 0.8% over the last 4 s``.
    text: str


@dataclass(frozen=True, slots=True)
class SteadyRule:
    """When a step's msg/s has settled (module docstring); rates are per second."""

    min_hold_s: float = 6.0
    window: int = 4
    #: Per-second rates of a window-bound publisher jitter with the round trip (10-25 % on
    #: a busy 2-core machine); a rate-bound one stays within a few percent.
    max_cv: float = 0.15
    max_trend: float = 0.10
    max_hold_s: float = 18.0

    def __post_init__(self) -> None:
        if self.window < 2:
            raise SpecError(
                "autotune_hold", f"the steady window needs 2 seconds or more, got {self.window}"
            )
        if not 0 < self.min_hold_s <= self.max_hold_s:
            raise SpecError(
                "autotune_hold",
                f"hold must be more than 0 s and at most the longest hold "
                f"({self.max_hold_s:g} s), got {self.min_hold_s:g} s",
            )

    @classmethod
    def holding(cls, min_hold_s: float) -> SteadyRule:
        """The rule with a minimum hold of ``min_hold_s`` (the longest: three times it)."""
        return cls(min_hold_s=min_hold_s, max_hold_s=3 * min_hold_s)

    def check(self, rates: Sequence[float], held_s: float) -> Steadiness:
        """Whether the step whose whole seconds so far had ``rates`` is done holding."""
        if held_s < self.min_hold_s or len(rates) < self.window:
            return Steadiness(Hold.HOLDING, f"held {held_s:.0f} of at least {self.min_hold_s:g} s")
        cv, trend = variation(rates[-self.window :])
        figures = f"cv {cv:.1%}, trend {trend:.1%} over the last {self.window} s"
        if cv <= self.max_cv and trend <= self.max_trend:
            return Steadiness(Hold.STEADY, f"steady: {figures}")
        if held_s >= self.max_hold_s:
            return Steadiness(Hold.UNSTEADY, f"not steady after {held_s:.0f} s: {figures}")
        return Steadiness(Hold.HOLDING, f"settling: {figures}")


def variation(rates: Sequence[float]) -> tuple[float, float]:
    """Coefficient of variation and trend (|least-squares slope| × span / mean) of
    ``rates``; both 0 when nothing flowed at all, infinite when the mean is 0 otherwise."""
    n = len(rates)
    mean = sum(rates) / n
    if mean <= 0:
        return (0.0, 0.0) if all(r == 0 for r in rates) else (math.inf, math.inf)
    cv = math.sqrt(sum((r - mean) ** 2 for r in rates) / n) / mean
    x_mean = (n - 1) / 2
    sxx = sum((x - x_mean) ** 2 for x in range(n))
    slope = sum((x - x_mean) * (r - mean) for x, r in enumerate(rates)) / sxx
    return cv, abs(slope) * (n - 1) / mean


# -- the search --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bounds:
    """What the operator allows a step: e2e p99 in ms, messages ready in the run's queues."""

    max_p99_ms: float | None = None
    max_backlog: int | None = None

    def __post_init__(self) -> None:
        if self.max_p99_ms is not None and not self.max_p99_ms > 0:
            raise SpecError(
                "autotune_max_p99", f"the p99 bound must be above 0 ms, got {self.max_p99_ms:g}"
            )
        if self.max_backlog is not None and self.max_backlog < 0:
            raise SpecError(
                "autotune_max_backlog",
                f"the backlog bound must be 0 or more, got {self.max_backlog}",
            )


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step as judged: its value, phase, figures, verdict and how it was held."""

    value: int
    phase: int
    held_s: float
    steadiness: Steadiness
    load: PhaseLoad
    verdict: Verdict
    reason: str
    point: SweepPoint
    p99_ms: float | None
    backlog: int | None = None

    @property
    def steady(self) -> bool:
        return self.steadiness.hold is Hold.STEADY


@dataclass
class Search:
    """The search's decisions over judged steps, with no clock and no run (unit-testable)."""

    setting: Setting
    values: tuple[int, ...]
    bounds: Bounds = field(default_factory=Bounds)
    steps: list[StepResult] = field(default_factory=list)
    #: Steps in a row that did not beat the best before them by more than the tolerance.
    flat: int = 0
    #: Values the run was left at and held again to confirm the choice.
    confirmed: set[int] = field(default_factory=set)

    def next_value(self) -> int | None:
        """The next value to try: the ladder's next above every value tried so far."""
        tried = max((s.value for s in self.steps), default=0)
        return next((v for v in self.values if v > tried), None)

    def add(self, step: StepResult) -> str | None:
        """Take a judged step; why the search ends with it, or None to go on."""
        best_before = max((s.point.throughput for s in self.steps), default=0.0)
        self.steps.append(step)
        name = f"{self.setting.value}={step.value}"
        if step.verdict is Verdict.OVERLOADED:
            return f"{name} is overloaded ({step.reason})"
        if self.bounds.max_p99_ms is not None and (
            step.p99_ms is not None and step.p99_ms > self.bounds.max_p99_ms
        ):
            return (
                f"{name}: e2e p99 {step.p99_ms:.2f} ms is past the bound "
                f"{self.bounds.max_p99_ms:g} ms"
            )
        if self.bounds.max_backlog is not None and (
            step.backlog is not None and step.backlog > self.bounds.max_backlog
        ):
            return (
                f"{name}: backlog {step.backlog:,} messages is past the bound "
                f"{self.bounds.max_backlog:,}"
            )
        if best_before > 0 and step.point.throughput <= best_before / THROUGHPUT_TOLERANCE:
            self.flat += 1
        else:
            self.flat = 0
        if self.flat >= FLAT_STEPS:
            return (
                f"throughput stopped rising: {FLAT_STEPS} steps without beating the best "
                f"({self.best().throughput:,.1f} msg/s) by more than "
                f"{1 / THROUGHPUT_TOLERANCE - 1:.0%}"
            )
        if self.next_value() is None:
            return f"the ladder ends at {name}"
        return None

    def confirm(self, step: StepResult) -> int | None:
        """Take the phase the run was left in at the chosen value, judged like a step (the
        report ranks it too, and a steady phase there sets a catch-up step of the same value
        aside); the value to confirm next when the choice moves with it, else None."""
        self.steps.append(step)
        self.confirmed.add(step.value)
        chosen = self.choice().value
        return chosen if chosen is not None and chosen not in self.confirmed else None

    def best(self) -> SweepPoint:
        return max((s.point for s in self.steps), key=lambda p: p.throughput)

    def choice(self) -> Recommendation:
        """The value to leave the run at: the report's recommendation over the steps."""
        points = [s.point for s in self.steps]
        return recommend(self.setting.value, points, self.bounds.max_p99_ms)


# -- figures of a step -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Depth:
    """Queue depth over a phase, from the broker's polls, as the report takes it."""

    start: float | None = None
    end: float | None = None
    slope: float | None = None
    alarm_s: float = 0.0
    last: int | None = None


def depth_between(samples: Sequence[BrokerSample], begin: float, end: float) -> Depth:
    """The fresh polls of the source with most of them taken in (begin, end]: ready count
    first and last, its least-squares slope (msg/s; None with fewer than two polls), and
    the seconds any node was in alarm (a poll's state holds until the next poll)."""
    fresh = [s for s in samples if not s.stale and begin < s.taken_at <= end]
    if not fresh:
        return Depth()
    sources = {s.source for s in fresh}
    source = max(sources, key=lambda name: sum(s.source == name for s in fresh))
    polls = sorted((s for s in fresh if s.source == source), key=lambda s: s.taken_at)
    alarm_s = 0.0
    for poll, after in zip(polls, [*polls[1:], None], strict=True):
        if poll.memory_alarm or poll.disk_alarm:
            alarm_s += (after.taken_at if after else end) - poll.taken_at
    ready = [float(p.queue_ready) for p in polls]
    slope = None
    if len(polls) >= 2:
        times = [p.taken_at - begin for p in polls]
        t_mean, r_mean = sum(times) / len(times), sum(ready) / len(ready)
        sxx = sum((t - t_mean) ** 2 for t in times)
        if sxx > 0:
            slope = sum((t - t_mean) * (r - r_mean) for t, r in zip(times, ready, strict=True))
            slope /= sxx
    return Depth(ready[0], ready[-1], slope, alarm_s, polls[-1].queue_ready)


def phase_load(figures: PhaseFigures, settings: Settings, depth: Depth) -> PhaseLoad:
    """What the verdict looks at for a phase, from the live per-phase figures."""
    return PhaseLoad(
        publish_rate=figures.publish_rate_mean,
        consume_rate=figures.consume_rate_mean,
        confirm_rate=figures.confirm_rate_mean,
        target_rate=figures.target_rate,
        pending_confirms_mean=figures.pending_confirms_mean,
        inflight=settings.inflight,
        publishers=settings.publishers,
        blocked_s=float(figures.blocked_s),
        alarm_s=depth.alarm_s,
        depth_start=depth.start,
        depth_end=depth.end,
        depth_slope=depth.slope,
        seconds=figures.seconds,
        paused_s=figures.paused_s,
    )


# -- driving a run ---------------------------------------------------------------------------


@runtime_checkable
class Steerable(Protocol):
    """What the autopilot needs of a run: the controller's public surface."""

    spec: RunSpec
    started_at: float

    @property
    def running(self) -> bool: ...

    @property
    def requested_settings(self) -> Settings: ...

    def request(self, change: Change, source: str = "operator") -> int: ...

    def add_sink(self, sink: Sink) -> None: ...

    def report_event(self, kind: EventKind, message: str) -> RunEvent: ...


class State(StrEnum):
    ARMED = "armed"  # begins when the run has started
    SEARCHING = "searching"
    CONFIRMING = "confirming"  # holding the chosen value again before saying it
    DONE = "done"
    STOPPED = "stopped"


@dataclass
class _Step:
    value: int
    change_id: int
    began_at: float | None = None
    phase: int | None = None
    rates: list[float] = field(default_factory=list)


class Autopilot(NullSink):
    """Searches ``setting`` on ``run`` (module docstring). Add it with :meth:`attach`; it
    begins at once on a running run, or when the run starts.

    ``max_p99_ms`` and ``max_backlog`` are the operator's bounds (None: none); ``hold_s``
    the least a step is held (the longest is three times it); ``rule`` replaces both holds.
    """

    #: The settings it can search.
    TUNABLE = TUNABLE

    def __init__(
        self,
        run: Steerable,
        setting: Setting | str,
        *,
        max_p99_ms: float | None = None,
        max_backlog: int | None = None,
        hold_s: float | None = None,
        rule: SteadyRule | None = None,
    ) -> None:
        self.run = run
        self.setting = tunable(setting)
        setting = self.setting
        self.bounds = Bounds(max_p99_ms, max_backlog)
        self.rule = rule or (SteadyRule() if hold_s is None else SteadyRule.holding(hold_s))
        self.search = Search(setting, ladder(setting, run.requested_settings), self.bounds)
        self.state = State.ARMED
        #: The value chosen at the end (None: not yet, or none met every condition).
        self.chosen: int | None = None
        self.recommendation: Recommendation | None = None
        self._before = int(setting_value(run.requested_settings, setting))
        self._table = PhaseTable()
        self._samples: list[BrokerSample] = []
        self._step: _Step | None = None
        #: Why the search ended, for the closing event.
        self._why = ""
        #: Phases opened by changes, by change id: (when, phase index).
        self._opened: dict[int, tuple[float, int]] = {}
        self._attached = False

    @staticmethod
    def can_steer(run: object) -> TypeGuard[Steerable]:
        """Whether ``run`` offers what the autopilot needs (:class:`Steerable`): a run of
        this process's own controller does; a view of a run elsewhere may not."""
        return isinstance(run, Steerable)

    @property
    def active(self) -> bool:
        return self.state in (State.ARMED, State.SEARCHING, State.CONFIRMING)

    def attach(self) -> None:
        """Follow the run, and begin now if it runs (else at its start)."""
        if not self._attached:
            self._attached = True
            self.run.add_sink(self)
        if self.run.running:
            self._table.on_start(RunStarted(self.run.spec, self.run.started_at, 0))
            self._begin()

    def stop(self, reason: str = "stopped by the operator") -> None:
        """End the search; the setting stays where it is."""
        if not self.active:
            return
        self.state = State.STOPPED
        self._step = None
        best = ""
        if self.search.steps:
            point = self.search.best()
            best = f"; best so far {self.setting.value}={point.value}"
            best += f" ({point.throughput:,.1f} msg/s)"
        self._say(f"autotune {reason}: {self.setting.value} stays at the value in force{best}")

    # -- as a sink ---------------------------------------------------------------------------

    def on_start(self, run: RunStarted) -> None:
        self._table.on_start(run)

    def on_snapshot(self, snapshot: ClientSnapshot) -> None:
        self._table.add_snapshot(snapshot)

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self._samples.append(sample)
        if self._step is not None and self._step.began_at is not None:
            self._check_backlog(sample)

    def on_event(self, event: RunEvent) -> None:
        self._table.add_event(event)
        if event.kind is EventKind.RUN_STARTED and self.state is State.ARMED:
            # Changes are taken once start() has returned: begin right after it.
            asyncio.get_running_loop().call_soon(self._begin)
        elif event.kind is EventKind.CHANGE_REQUESTED and self.state in (
            State.SEARCHING,
            State.CONFIRMING,
        ):
            source = event.detail.get("source")
            if source != SOURCE and event.detail.get("setting") == self.setting.value:
                self.stop(f"stopped: the {source} set {event.detail.get('change')}")
        elif event.kind is EventKind.PHASE and event.change_id is not None:
            # A change can be in force before request() returns (an in-process run).
            self._opened[event.change_id] = (event.at, int(event.detail.get("index", 0)))
            self._phase_opened()

    def on_tick(self, tick: Tick) -> None:
        step = self._step
        if not self.active or step is None or step.began_at is None:
            return
        if tick.at - 1.0 < step.began_at - 1e-6:
            return  # a second that began before the step
        step.rates.append(tick.consume_rate)
        steadiness = self.rule.check(step.rates, tick.at - step.began_at)
        if steadiness.hold is not Hold.HOLDING:
            self._judge(steadiness, tick.at)

    def on_finish(self, summary: RunSummary) -> None:
        if self.active:
            self.stop("ended with the run")

    # -- inside ------------------------------------------------------------------------------

    def _begin(self) -> None:
        if self.state is not State.ARMED or not self.run.running:
            return
        self.state = State.SEARCHING
        values = ", ".join(format_number(v) for v in self.search.values)
        rule = self.rule
        bounds = [
            f"p99 > {self.bounds.max_p99_ms:g} ms" if self.bounds.max_p99_ms is not None else "",
            f"backlog > {self.bounds.max_backlog:,}" if self.bounds.max_backlog is not None else "",
        ]
        self._say(
            f"autotune {self.setting.value}: trying {values}; each step held ≥ "
            f"{rule.min_hold_s:g} s until consume msg/s over {rule.window} s has cv ≤ "
            f"{rule.max_cv:.0%} and trend ≤ {rule.max_trend:.0%} (at most "
            f"{rule.max_hold_s:g} s); stops when throughput stops rising, a step is "
            "overloaded" + "".join(f", {b}" for b in bounds if b)
        )
        self._next()

    def _next(self) -> None:
        value = self.search.next_value()
        if value is None:
            self._finish(f"the ladder ends at {self.setting.value}={self.search.values[-1]}")
            return
        try:
            change_id = self.run.request(Change(self.setting, value), SOURCE)
        except FlowdeckError as exc:
            self.state = State.STOPPED
            self._step = None
            self._say(f"autotune stopped: {self.setting.value}={value} was refused: {exc}")
            return
        self._step = _Step(value, change_id)
        self._phase_opened()

    def _phase_opened(self) -> None:
        """The step begins with the phase its change opened."""
        step = self._step
        if step is not None and step.began_at is None and step.change_id in self._opened:
            step.began_at, step.phase = self._opened.pop(step.change_id)

    def _check_backlog(self, sample: BrokerSample) -> None:
        limit = self.bounds.max_backlog
        if limit is not None and not sample.stale and sample.queue_ready > limit:
            self._judge(
                Steadiness(Hold.UNSTEADY, f"cut short: backlog {sample.queue_ready:,} > {limit:,}"),
                sample.taken_at,
            )

    def _judge(self, steadiness: Steadiness, now: float) -> None:
        step = self._step
        assert step is not None and step.began_at is not None and step.phase is not None
        self._step = None
        figures = next(
            (f for f in self._table.figures() if f.index == step.phase and not f.drain), None
        )
        if figures is None or figures.seconds == 0:
            self.state = State.STOPPED
            self._say(f"autotune stopped: no client figures for {self.setting.value}={step.value}")
            return
        depth = depth_between(self._samples, step.began_at, now)
        settings = self.run.requested_settings
        load = phase_load(figures, settings, depth)
        verdict, reason = judge(load)
        latency = figures.latency.get(E2E)
        p99 = latency.p99 if latency is not None and latency.count else None
        point = ranked_throughput(
            step.value,
            figures.consume_rate_mean,
            figures.target_rate,
            p99,
            verdict,
            figures.label,
        )
        result = StepResult(
            value=step.value,
            phase=step.phase,
            held_s=now - step.began_at,
            steadiness=steadiness,
            load=load,
            verdict=verdict,
            reason=reason,
            point=point,
            p99_ms=p99,
            backlog=depth.last,
        )
        if self.state is State.CONFIRMING:
            self._confirmed(result)
            return
        ended = self.search.add(result)
        capped = ""
        if point.achieved is not None:
            capped = f" (capped at the target; {point.achieved:,.1f} consumed)"
        self._say(
            f"autotune step {len(self.search.steps)} {self.setting.value}={step.value}: "
            f"{point.throughput:,.1f} msg/s{capped}, e2e p99 {_ms(p99)}, {verdict.value}; "
            f"{steadiness.text}, held {result.held_s:.0f} s"
        )
        if ended is None:
            self._next()
        else:
            self._finish(ended)

    def _finish(self, why: str) -> None:
        self.recommendation = self.search.choice()
        chosen = self.recommendation.value
        name = self.setting.value
        if chosen is None:
            self.state = State.DONE
            self._request(self._before)
            self._say(
                f"autotune: no {name} met every condition ({why}); {name} back to {self._before}"
            )
            return
        self._why = why
        last = self.search.steps[-1].value if self.search.steps else None
        if last == chosen:
            self._chosen(chosen)
        else:
            self._confirm(chosen)

    def _confirm(self, value: int) -> None:
        """Leave the run at ``value`` and hold it like a step before saying it is chosen:
        the report ranks that phase too, and a step judged while catching up on the rate
        schedule may not hold the target once the backlog is gone."""
        self.state = State.CONFIRMING
        self._say(f"autotune: confirming {self.setting.value}={value}, held like a step")
        try:
            change_id = self.run.request(Change(self.setting, value), SOURCE)
        except FlowdeckError as exc:
            self.state = State.STOPPED
            self._say(f"autotune could not set {self.setting.value}={value}: {exc}")
            return
        self._step = _Step(value, change_id)
        self._phase_opened()

    def _confirmed(self, result: StepResult) -> None:
        point = result.point
        self._say(
            f"autotune held {self.setting.value}={result.value} again: "
            f"{point.throughput:,.1f} msg/s, e2e p99 {_ms(result.p99_ms)}, "
            f"{result.verdict.value}; {result.steadiness.text}"
        )
        moved = self.search.confirm(result)
        self.recommendation = self.search.choice()
        if moved is not None:
            self._confirm(moved)
        elif self.recommendation.value is None:
            self.state = State.DONE
            self._request(self._before)
            self._say(
                f"autotune: no {self.setting.value} met every condition once confirmed; "
                f"{self.setting.value} back to {self._before}"
            )
        else:
            chosen = self.recommendation.value
            if chosen != result.value:
                self._request(chosen)
            self._chosen(chosen)

    def _chosen(self, chosen: int) -> None:
        self.chosen = chosen
        self.state = State.DONE
        recommendation = self.recommendation or self.search.choice()
        points = [s.point for s in self.search.steps if s.value == chosen]
        steady = [p for p in points if not p.catching_up] or points
        point = max(steady, key=lambda p: p.throughput)
        self._say(
            f"autotune: {self.setting.value}={chosen} chosen (msg/s {point.throughput:,.1f}, "
            f"p99 {_ms(point.p99_ms)}): {self._why}; {recommendation.reasoning[-1]}"
        )

    def _request(self, value: int) -> None:
        try:
            self.run.request(Change(self.setting, value), SOURCE)
        except FlowdeckError as exc:
            self._say(f"autotune could not set {self.setting.value}={value}: {exc}")

    def _say(self, message: str) -> None:
        self.run.report_event(EventKind.INFO, message)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"
