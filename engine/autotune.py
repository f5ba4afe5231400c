"""The autopilot: it searches one setting while the run goes and leaves the run at the best.

An operator tuning the in-flight limit (or prefetch, or the ack interval) steps it up,
waits for msg/s to settle, reads the figures and steps again until more stops paying; the
autopilot does exactly that, through the controller's public surface (``request`` with
source ``autotune``, the change grammar's :class:`Change`) and as a sink of the run, so
every step is a change, every change opens a phase, and the recorded session splits into
the steps the way the report splits any sweep.

The search, as stated in ``docs/engine.md`` (The autopilot):

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
  the one home of the verdict rules. A held step's phase is ended by a mark and the step
  judged once that phase has every row, so its verdict is the one the report gives it.
* **Retake**: a step whose verdict is inconclusive (draining a backlog, catching up, too
  short) is taken again once, at the same value, after the queues have drained.
* **Stop** when throughput stops rising (the best so far not beaten by more than the
  report's tolerance for :data:`FLAT_STEPS` steps), when a step is overloaded (for prefetch
  and the ack interval: overloaded without beating every step before), its e2e p99
  is past ``max_p99_ms`` or the backlog past ``max_backlog``, or the ladder ends; then the
  run is set to the value :func:`~flowdeck.figures.verdict.recommend` picks from the
  steps (the report's recommendation over the same phases) and an event says so.

:class:`Search` and :class:`SteadyRule` hold the decisions and do no I/O (unit tests feed
them); :class:`Autopilot` drives a run with them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeGuard, runtime_checkable

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.change import Change, format_number
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.phase_figures import PhaseTable
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.settings import BY_SETTING, Setting
from flowdeck.engine.sinks import NullSink, Sink
from flowdeck.engine.snapshot import Settings, setting_value
from flowdeck.engine.spec import RunSpec
from flowdeck.figures import (
    THROUGHPUT_TOLERANCE,
    Capacity,
    PhaseFigures,
    PhaseLoad,
    Recommendation,
    RunFigures,
    SweepPoint,
    Verdict,
    recommend,
    sweep_point,
    variation,
)
from flowdeck.figures.phases import phase_at, to_us
from flowdeck.figures.trend import recent, slope
from flowdeck.figures.verdict import BACKLOG_MIN, CATCH_UP_SHARE, MIN_SECONDS

#: The settings the autopilot can search: the three windows (the best value of each), and
#: the rate (the highest the broker sustains for the spec: its capacity).
TUNABLE: tuple[Setting, ...] = (
    Setting.INFLIGHT,
    Setting.PREFETCH,
    Setting.ACK_EVERY,
    Setting.RATE,
)
#: The rate search's resolution: it stops when the lowest rate that failed is within this
#: share above the highest that held.
RATE_RESOLUTION = 0.10
#: The most probes a rate search makes (each a step held like any other).
RATE_MAX_STEPS = 12
#: Where a rate search starts without a rate limit in the spec, msg/s per publisher.
RATE_START = 10.0
#: The seed's shares of the target rate (1 %..200 %), with the 1-2-5 series below 1 %.
SHARES: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
#: ack_every stops at half the prefetch: past the prefetch consumers would never ack.
ACK_SHARE_TOP = 0.5
#: The ladder when there is no base (no rate limit, or prefetch 0 for ack_every).
PLAIN_LADDER: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
#: Steps in a row not beating the best so far (by more than the report's tolerance) that
#: end the search: throughput has stopped rising.
FLAT_STEPS = 2
#: The consumers' windows: a step of theirs that is overloaded while its consumers took
#: more than every step before is below the knee (the window holds the consumers back,
#: as a small prefetch does when each message takes work), so the search climbs on.
CONSUMER_WINDOWS: tuple[Setting, ...] = (Setting.PREFETCH, Setting.ACK_EVERY)
#: The source the autopilot's changes carry in the event log.
SOURCE = "autotune"
#: The latency the bounds and the report's sweep tables use.
E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)


def tunable(setting: Setting | str) -> Setting:
    """The setting named (``inflight``, ``prefetch``, ``ack_every``, ``rate``), or a one-line
    error."""
    names = ", ".join(s.value for s in TUNABLE)
    word = setting.value if isinstance(setting, Setting) else setting.strip().lower()
    found = next((s for s in TUNABLE if s.value == word.replace("-", "_")), None)
    if found is None:
        raise SpecError("autotune", f"the autopilot tunes {names}; got {word!r}")
    return found


def ladder(setting: Setting, settings: Settings) -> tuple[int, ...]:
    """The values to try, smallest first (see the module docstring); the rate has no fixed
    ladder (:class:`RateSearch` doubles, then halves the interval)."""
    setting = tunable(setting)
    if setting is Setting.RATE:
        return ()
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
        """Whether the step whose whole seconds so far had ``rates`` is done holding. A step
        holds at least the seconds a verdict needs (:data:`MIN_SECONDS` whole seconds of
        figures), whatever its minimum hold: a step judged before then is "too short" and
        could neither beat the best nor end the search."""
        if held_s < self.min_hold_s or len(rates) < max(self.window, MIN_SECONDS):
            return Steadiness(Hold.HOLDING, f"held {held_s:.0f} of at least {self.min_hold_s:g} s")
        cv, trend = variation(rates[-self.window :])
        figures = f"cv {cv:.1%}, trend {trend:.1%} over the last {self.window} s"
        if cv <= self.max_cv and trend <= self.max_trend:
            return Steadiness(Hold.STEADY, f"steady: {figures}")
        if held_s >= self.max_hold_s:
            return Steadiness(Hold.UNSTEADY, f"not steady after {held_s:.0f} s: {figures}")
        return Steadiness(Hold.HOLDING, f"settling: {figures}")


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

    value: float
    phase: int
    held_s: float
    steadiness: Steadiness
    load: PhaseLoad | None
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
    confirmed: set[float] = field(default_factory=set)
    #: A step whose figures said nothing of the setting (it drained a backlog, caught up or
    #: was too short) is taken again at the same value once the queues are empty.
    retry: int | None = None

    def next_value(self) -> int | None:
        """The next value to try: a step to take again, else the ladder's next above every
        value tried so far."""
        if self.retry is not None:
            return self.retry
        tried = max((s.value for s in self.steps), default=0)
        return next((v for v in self.values if v > tried), None)

    def add(self, step: StepResult) -> str | None:
        """Take a judged step; why the search ends with it, or None to go on. A step whose
        verdict does not judge capacity (draining a backlog, catching up, too short) is
        taken again once (:attr:`retry`), its e2e p99 (the backlog's) not held against the
        operator's bound; taken a second time so, it neither beats the best nor counts as
        flat."""
        best_before = max(
            (s.point.throughput for s in self.steps if s.verdict.judged_capacity), default=0.0
        )
        self.steps.append(step)
        retried, self.retry = self.retry, None
        name = f"{self.setting.value}={step.value}"
        if step.verdict is Verdict.OVERLOADED and not (
            self.setting in CONSUMER_WINDOWS
            and step.point.throughput > best_before / THROUGHPUT_TOLERANCE
        ):
            return f"{name} is overloaded ({step.reason})"
        if self.bounds.max_backlog is not None and (
            step.backlog is not None and step.backlog > self.bounds.max_backlog
        ):
            return (
                f"{name}: backlog {step.backlog:,} messages is past the bound "
                f"{self.bounds.max_backlog:,}"
            )
        if step.verdict.inconclusive:
            if retried != step.value:
                self.retry = int(step.value)
                return None
        elif self.bounds.max_p99_ms is not None and (
            step.p99_ms is not None and step.p99_ms > self.bounds.max_p99_ms
        ):
            return (
                f"{name}: e2e p99 {step.p99_ms:.2f} ms is past the bound "
                f"{self.bounds.max_p99_ms:g} ms"
            )
        if not step.verdict.judged_capacity:
            pass
        elif best_before > 0 and step.point.throughput <= best_before / THROUGHPUT_TOLERANCE:
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

    def confirm(self, step: StepResult, choice: Recommendation | None = None) -> int | None:
        """Take the phase the run was left in at the chosen value, judged like a step (the
        report ranks it too); the value to confirm next when the choice (``choice``: the
        recommendation over the whole run, else :meth:`choice`) moves with it, else None."""
        self.steps.append(step)
        self.confirmed.add(step.value)
        chosen = (choice or self.choice()).value
        return chosen if chosen is not None and chosen not in self.confirmed else None

    def best(self) -> SweepPoint:
        judged = [s.point for s in self.steps if s.verdict.judged_capacity]
        return max(judged or [s.point for s in self.steps], key=lambda p: p.throughput)

    def choice(self) -> Recommendation:
        """The report's recommendation over the steps alone (the autopilot asks the run's
        own figures, which hold every phase, and falls back to this)."""
        points = [s.point for s in self.steps]
        return recommend(self.setting.value, points, self.bounds.max_p99_ms)


def _two_digits(value: float) -> float:
    """A rate rounded to two significant digits, as an operator would type it."""
    if value <= 0:
        return 0.0
    return float(f"{value:.2g}")


@dataclass
class RateSearch:
    """The capacity search's decisions: from ``start`` msg/s per publisher, double while a
    step is sustainable (target reached, consumers keep up, depth flat, within the p99
    bound); once one fails, halve the interval between the highest rate that held and the
    lowest that failed until they are within :data:`RATE_RESOLUTION`. After a failed step
    the run is held at a rate that held (or a quarter of the failed one) until the backlog
    it left has drained, so the next probe starts from empty queues."""

    start: float
    high: float
    bounds: Bounds = field(default_factory=Bounds)
    steps: list[StepResult] = field(default_factory=list)
    good: float | None = None
    bad: float | None = None
    confirmed: set[float] = field(default_factory=set)
    setting: Setting = Setting.RATE
    #: A probe that said nothing of the rate (it drained a backlog, caught up or was too
    #: short) is made again once the queues are empty.
    retry: float | None = None

    @property
    def values(self) -> tuple[float, ...]:
        """The rates tried so far (the search has no ladder known in advance)."""
        return tuple(s.value for s in self.steps) or (self.start,)

    def held(self, step: StepResult) -> bool:
        if step.verdict is not Verdict.SUSTAINABLE:
            return False
        bound = self.bounds.max_p99_ms
        return bound is None or (step.p99_ms is not None and step.p99_ms <= bound)

    def next_value(self) -> float | None:
        if not self.steps:
            return self.start
        if self.retry is not None:
            return self.retry
        if self.bad is None:
            upper = _two_digits(2 * (self.good or self.start))
            return upper if (self.good or 0.0) < upper <= self.high else None
        if self.good is None:
            lower = _two_digits(self.bad / 2)
            return lower if lower >= 1 else None
        if self.bad <= self.good * (1 + RATE_RESOLUTION):
            return None
        middle = _two_digits((self.good + self.bad) / 2)
        return middle if self.good < middle < self.bad else None

    def add(self, step: StepResult) -> str | None:
        """Take a judged probe; why the search ends with it, or None to go on."""
        self.steps.append(step)
        retried, self.retry = self.retry, None
        if step.verdict.inconclusive and retried != step.value:
            # Once: a second inconclusive probe of the same rate counts as failed.
            self.retry = step.value
            return None
        if self.held(step):
            self.good = max(self.good or 0.0, step.value)
        else:
            self.bad = step.value if self.bad is None else min(self.bad, step.value)
        if len(self.steps) >= RATE_MAX_STEPS:
            return f"the search made its {RATE_MAX_STEPS} probes"
        if self.next_value() is None:
            if self.good is not None and self.bad is not None:
                return (
                    f"rate={self.good:g} held and rate={self.bad:g} did not "
                    f"(within {RATE_RESOLUTION:.0%})"
                )
            if self.bad is None:
                return f"every rate up to {self.good or self.start:g} held (the setting's limit)"
            return f"no rate held down to {self.bad:g} per publisher"
        return None

    def recovery(self) -> float | None:
        """After a failed probe: the rate to hold while its backlog drains (None after a
        probe that held)."""
        if not self.steps or self.held(self.steps[-1]):
            return None
        return self.good if self.good is not None else _two_digits(self.steps[-1].value / 4)

    def best(self) -> SweepPoint:
        held = [s.point for s in self.steps if self.held(s)]
        return max(held or [s.point for s in self.steps], key=lambda p: p.throughput)


# -- driving a run ---------------------------------------------------------------------------


@runtime_checkable
class Steerable(Protocol):
    """What the autopilot needs of a run: the controller's public surface, and the run's
    own per-phase figures (which every front-end and the report compute alike)."""

    spec: RunSpec
    started_at: float
    phase_table: PhaseTable

    @property
    def running(self) -> bool: ...

    @property
    def requested_settings(self) -> Settings: ...

    def request(self, change: Change, source: str = "operator") -> int: ...

    def add_sink(self, sink: Sink) -> None: ...

    def report_event(self, kind: EventKind, message: str) -> RunEvent: ...


class State(StrEnum):
    ARMED = "armed"  # begins when the run has started
    WAITING = "waiting"  # a backlog drains before the first step
    SEARCHING = "searching"
    CONFIRMING = "confirming"  # holding the chosen value again before saying it
    DONE = "done"
    STOPPED = "stopped"


#: How long the autopilot waits for a backlog to drain before its first step, as a multiple
#: of the longest hold of a step: past it, it says it cannot judge while one drains.
WAIT_HOLDS = 5.0
#: The run's last seconds a recovery looks at: while its consumers took more than its
#: publishers sent in them (above :data:`CATCH_UP_SHARE`), a backlog is still draining,
#: wherever it waits (in the queues, or before them where the polls do not see it).
RECENT_SECONDS = 3


#: A step whose hold is over waits at most this long (by the run's ticks) for its phase's
#: last rows after the mark that ends it; a worker that stopped sending snapshots (lost)
#: does not hold the search up past it, and the step is judged on what came in.
SETTLE_LIMIT_S = 5.0


@dataclass
class _Step:
    value: float
    change_id: int
    began_at: float | None = None
    rates: list[float] = field(default_factory=list)
    #: The hold is over: how it ended, the mark that ended the step's phase (its change id,
    #: and when it was in force), and the tick at which it ended (the settle's bound).
    held: Steadiness | None = None
    mark_id: int | None = None
    marked_at: float | None = None
    held_until: float | None = None


@dataclass(frozen=True, slots=True)
class Backlog:
    """The run's queues now: ready messages at the last fresh poll of the main source, and
    their trend over the recent window (msg/s; None: not known)."""

    depth: int
    slope: float | None

    @property
    def draining(self) -> bool:
        return self.depth >= BACKLOG_MIN and (self.slope or 0.0) < -1.0


def backlog_of(figures: RunFigures | None) -> Backlog | None:
    """What the queues hold now, from the run's figures' polls (None: no poll yet)."""
    if figures is None or not figures.polls:
        return None
    start = figures.start_us
    points = [
        ((row["t_us"] - start) / 1e6, float(row["queue_ready"]))
        for row in figures.polls
        if row.get("queue_ready") is not None
    ]
    if not points:
        return None
    return Backlog(int(points[-1][1]), slope(recent(points)))


class Autopilot(NullSink):
    """Searches ``setting`` on ``run`` (module docstring). Add it with :meth:`attach`; it
    begins at once on a running run (after any backlog has drained), or when the run
    starts.

    ``max_p99_ms`` and ``max_backlog`` are the operator's bounds (None: none); ``hold_s``
    the least a step is held (the longest is three times it); ``rule`` replaces both holds.
    A step is judged by the run's own per-phase figures (``run.phase_table``: the messages
    of the step's own phase, whenever the autopilot started) and the choice is the run's
    recommendation for the setting over every load phase so far: what the report
    recommends on the same session.
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
        on_done: Callable[[Autopilot], None] | None = None,
    ) -> None:
        self.run = run
        #: Called once when the search has ended (done or stopped): e.g. to stop the run.
        self.on_done = on_done
        self.setting = tunable(setting)
        setting = self.setting
        self.bounds = Bounds(max_p99_ms, max_backlog)
        self.rule = rule or (SteadyRule() if hold_s is None else SteadyRule.holding(hold_s))
        self.search: Search | RateSearch
        if setting is Setting.RATE:
            current = setting_value(run.requested_settings, setting)
            self.search = RateSearch(current or RATE_START, BY_SETTING[setting].high, self.bounds)
        else:
            self.search = Search(setting, ladder(setting, run.requested_settings), self.bounds)
        self.state = State.ARMED
        #: The value chosen at the end (None: not yet, or none met every condition).
        self.chosen: float | None = None
        self.recommendation: Recommendation | None = None
        #: A rate search's answer: the highest total rate the run sustained.
        self.capacity: Capacity | None = None
        self._before = setting_value(run.requested_settings, setting)
        #: Holding a rate that held after a failed probe, until its backlog has drained;
        #: how many probes had been made when the last such hold began.
        self._recovering = False
        self._recovered_after = 0
        #: The current wait for the queues has been said (once per wait).
        self._wait_said = False
        #: When the current recovery began (the first tick it was waited on).
        self._recovery_since: float | None = None
        self._introduced = False
        self._step: _Step | None = None
        #: Why the search ended, for the closing event.
        self._why = ""
        #: Phases opened by changes, by change id: when.
        self._opened: dict[int, float] = {}
        self._attached = False
        self._waiting_since: float | None = None
        #: When the autopilot first found the publishers silent before its first step.
        self._silent_since: float | None = None
        #: The run's last seconds: (publish, consume) msg/s of each tick.
        self._recent: deque[tuple[float, float]] = deque(maxlen=RECENT_SECONDS)
        #: What it has said (each also an event of the run), in order.
        self.said: list[str] = []

    @staticmethod
    def can_steer(run: object) -> TypeGuard[Steerable]:
        """Whether ``run`` offers what the autopilot needs (:class:`Steerable`): a run of
        this process's own controller does; a view of a run elsewhere may not."""
        return isinstance(run, Steerable)

    @property
    def active(self) -> bool:
        return self.state in (State.ARMED, State.WAITING, State.SEARCHING, State.CONFIRMING)

    def attach(self) -> None:
        """Follow the run, and begin now if it runs (else at its start)."""
        if not self._attached:
            self._attached = True
            self.run.add_sink(self)
        if self.run.running:
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

    def on_broker_sample(self, sample: BrokerSample) -> None:
        if self.state is State.WAITING:
            self._begin()
        elif self._step is not None and self._step.began_at is not None and self._step.held is None:
            self._check_backlog(sample)

    def on_event(self, event: RunEvent) -> None:
        if event.kind is EventKind.RUN_STARTED and self.state is State.ARMED:
            # Changes are taken once start() has returned: begin right after it.
            asyncio.get_running_loop().call_soon(self._begin)
        elif event.kind is EventKind.CHANGE_REQUESTED and self.state in (
            State.WAITING,
            State.SEARCHING,
            State.CONFIRMING,
        ):
            source = event.detail.get("source")
            if source != SOURCE and event.detail.get("setting") == self.setting.value:
                self.stop(f"stopped: the {source} set {event.detail.get('change')}")
        elif event.kind is EventKind.PHASE and event.change_id is not None:
            # A change can be in force before request() returns (an in-process run).
            self._opened[event.change_id] = event.at
            self._phase_opened()

    def on_tick(self, tick: Tick) -> None:
        self._recent.append((tick.publish_rate, tick.consume_rate))
        if self.state is State.WAITING:
            self._begin(tick.at)
            return
        step = self._step
        if not self.active or step is None or step.began_at is None:
            return
        if step.held is not None:
            self._settle(step, tick.at)
            return
        if tick.at - 1.0 < step.began_at - 1e-6:
            return  # a second that began before the step
        step.rates.append(tick.consume_rate)
        steadiness = self.rule.check(step.rates, tick.at - step.began_at)
        if steadiness.hold is not Hold.HOLDING:
            self._end_hold(steadiness, tick.at)

    def on_finish(self, summary: RunSummary) -> None:
        if self.active:
            self.stop("ended with the run")

    # -- inside ------------------------------------------------------------------------------

    def _figures(self) -> RunFigures | None:
        return self.run.phase_table.figures(max_p99_ms=self.bounds.max_p99_ms)

    def _begin(self, now: float | None = None) -> None:
        """Start (or go on with) the search, unless a backlog is draining: then wait for it
        (said once), and give up after :data:`WAIT_HOLDS` longest holds."""
        if self.state not in (State.ARMED, State.WAITING) or not self.run.running:
            return
        if self._publishers_silent(now) or self._waits(now):
            return
        self.state = State.SEARCHING
        self._recovering = False
        self._recovery_since = None
        self._wait_said = False
        if not self._introduced:
            self._introduced = True
            self._say(self._intro())
        self._next()

    def _publishers_silent(self, now: float | None) -> bool:
        """Before the first step: whether the run's publishers have yet to send (a run just
        started, its clients still connecting). A step begun then has those seconds in its
        phase and reads under its value's rate, where the session, measured from the first
        send, does not: beside a CPU hog a rate search's first step read 41.2 msg/s for 50
        (back-pressured), its clients a second connecting through a delayed link. So the
        first step waits for the run's first messages published (a snapshot or a second of
        the run's that has them), and gives up after :data:`WAIT_HOLDS` longest holds."""
        if self.search.steps or self._step is not None:
            return False
        settings = self.run.requested_settings
        if settings.paused or not settings.publishers:
            return False  # nothing to wait for: no publisher sends
        if self.run.phase_table.published or any(publish > 0 for publish, _ in self._recent):
            return False
        self.state = State.WAITING
        if now is not None:
            since = self._silent_since = self._silent_since or now
            if now - since > WAIT_HOLDS * self.rule.max_hold_s:
                self.stop(f"cannot judge: the publishers sent nothing in {now - since:.0f} s")
        return True

    def _waits(self, now: float | None) -> bool:
        """Whether to wait for the queues before the next step: a backlog draining before
        the first one, or (after a failed rate probe, or a step that measured a backlog)
        any backlog above the backlog size."""
        backlog = backlog_of(self._figures())
        if self._recovering:
            # Back at a rate that held: the queues' polls lag them by a statistics interval
            # or two, so the recovery holds at least a step's minimum before it looks. Only
            # the run's ticks time that hold: a broker poll in between waits for the next.
            if now is None:
                self.state = State.WAITING
                return True
            self._recovery_since = self._recovery_since or now
            if now - self._recovery_since < self.rule.min_hold_s:
                self.state = State.WAITING
                return True
        clients_draining = self._recovering and self._consumers_ahead()
        if backlog is None and not clients_draining:
            return False
        rising = backlog is not None and backlog.slope is not None and backlog.slope > 1.0
        waiting = clients_draining or (
            backlog is not None
            and (
                backlog.draining or (self._recovering and (backlog.depth >= BACKLOG_MIN or rising))
            )
        )
        if not waiting:
            return False
        self.state = State.WAITING
        if not self._wait_said:
            self._wait_said = True
            self._waiting_since = now
            if backlog is not None and (backlog.draining or backlog.depth >= BACKLOG_MIN):
                trend = "" if backlog.slope is None else f", {backlog.slope:+,.0f} msg/s"
                where = f"a backlog of {backlog.depth:,} messages{trend} is " + (
                    "draining" if backlog.draining else "in the queues"
                )
            else:
                publish, consume = self._recent_rates()
                where = (
                    f"consumers take {consume:,.0f} msg/s where publishers send "
                    f"{publish:,.0f}: a backlog drains before the queues"
                )
            self._say(
                f"autotune {self.setting.value} waits: {where}; a step judged now would "
                "measure the backlog, not the setting"
            )
        if now is not None:
            since = self._waiting_since = self._waiting_since or now
            if now - since > WAIT_HOLDS * self.rule.max_hold_s:
                left = "" if backlog is None else f"{backlog.depth:,} messages in the queues "
                self.stop(
                    f"cannot judge while a backlog drains ({left}left after {now - since:.0f} s)"
                )
        return True

    def _recent_rates(self) -> tuple[float, float]:
        """Publish and consume msg/s, the means over the run's last seconds."""
        count = max(1, len(self._recent))
        return (
            sum(p for p, _ in self._recent) / count,
            sum(c for _, c in self._recent) / count,
        )

    def _consumers_ahead(self) -> bool:
        """Whether the consumers took more than the publishers sent over the run's last
        seconds, by at least :data:`BACKLOG_MIN` messages (a backlog still draining,
        wherever it waits)."""
        if len(self._recent) < RECENT_SECONDS:
            return False
        publish, consume = self._recent_rates()
        ahead = (consume - publish) * len(self._recent)
        return consume > CATCH_UP_SHARE * publish and ahead >= BACKLOG_MIN

    def _intro(self) -> str:
        rule = self.rule
        held = (
            f"each step held ≥ {rule.min_hold_s:g} s until consume msg/s over {rule.window} s "
            f"has cv ≤ {rule.max_cv:.0%} and trend ≤ {rule.max_trend:.0%} (at most "
            f"{rule.max_hold_s:g} s)"
        )
        bounds = [
            f"p99 > {self.bounds.max_p99_ms:g} ms" if self.bounds.max_p99_ms is not None else "",
            f"backlog > {self.bounds.max_backlog:,}" if self.bounds.max_backlog is not None else "",
        ]
        if isinstance(self.search, RateSearch):
            return (
                f"autotune rate: finding the highest rate this broker sustains for the spec, "
                f"from {self.search.start:g} msg/s per publisher, doubling while a step is "
                f"sustainable"
                + "".join(f" and not {b}" for b in bounds if b)
                + f", then halving the interval to {RATE_RESOLUTION:.0%}; after a step that "
                "fails, the run waits at a rate that held until its backlog has drained; " + held
            )
        values = ", ".join(format_number(v) for v in self.search.values)
        return (
            f"autotune {self.setting.value}: trying {values}; {held}; stops when throughput "
            "stops rising, a step is overloaded"
            + "".join(f", {b}" for b in bounds if b)
            + "; a step that measured a backlog is taken again once the queues are empty"
        )

    def _next(self) -> None:
        search = self.search
        if self._recovered_after != len(search.steps):
            if isinstance(search, RateSearch):
                # Back to a rate that held: the failed probe's backlog drains before the next.
                recovery = search.recovery()
                if recovery is not None:
                    self._recover()
                    self._request(recovery)
                    return
            elif search.retry is not None:
                # The step measured a backlog, not its value: the value stays while the
                # backlog drains, and the step is taken again from empty queues.
                self._recover()
                return
        value = search.next_value()
        if value is None:
            self._finish(f"the ladder ends at {self.setting.value}={search.values[-1]}")
            return
        change = Change(self.setting, value)
        if isinstance(search, Search) and search.retry is not None:
            # The value is in force: a mark opens the step's new phase.
            name = f"{self.setting.value}={format_number(value)}"
            change = Change(Setting.MARK, label=f"autotune takes {name} again")
        try:
            change_id = self.run.request(change, SOURCE)
        except FlowdeckError as exc:
            self.state = State.STOPPED
            self._step = None
            self._say(f"autotune stopped: {self.setting.value}={value} was refused: {exc}")
            return
        self._step = _Step(value, change_id)
        self._phase_opened()

    def _recover(self) -> None:
        """Wait for the queues before the next step (:meth:`_waits`), once per step."""
        self._recovered_after = len(self.search.steps)
        self._recovering = True
        self.state = State.WAITING
        self._waiting_since = None

    def _phase_opened(self) -> None:
        """The step begins with the phase its change opened, and its phase ends with the
        phase its mark opened."""
        step = self._step
        if step is None:
            return
        if step.began_at is None and step.change_id in self._opened:
            step.began_at = self._opened.pop(step.change_id)
        if step.marked_at is None and step.mark_id in self._opened:
            step.marked_at = self._opened.pop(step.mark_id)

    def _end_hold(self, steadiness: Steadiness, now: float | None) -> None:
        """The step has been held: end its phase with a mark (the setting stays) and judge
        it once that phase's figures are final (:meth:`_settle`). Judged at once, its
        phase would go on to the next step's change and take in the seconds after the
        verdict (and the rows straddling that change), and the report, reading the
        finished phase, could judge it otherwise (a step read 97 % sustainable live and
        93.6 % overloaded in the session)."""
        step = self._step
        assert step is not None
        step.held = steadiness
        step.held_until = now
        label = f"after autotune step {len(self.search.steps) + 1}"
        if self.state is State.CONFIRMING:
            label = f"after confirming {format_number(step.value)}"
        try:
            step.mark_id = self.run.request(Change(Setting.MARK, label=label), SOURCE)
        except FlowdeckError:
            self._judge(steadiness)  # the run no longer takes changes: judge what is in
            return
        self._phase_opened()
        if now is not None:
            self._settle(step, now)

    def _settle(self, step: _Step, now: float) -> None:
        """Judge the held step once its phase has every row (each worker's snapshots past
        the mark, a poll after it), or after :data:`SETTLE_LIMIT_S` of waiting for them."""
        if step.held_until is None:
            step.held_until = now
        complete = step.marked_at is not None and self.run.phase_table.complete_before(
            step.marked_at
        )
        if complete or now - step.held_until >= SETTLE_LIMIT_S:
            assert step.held is not None
            self._judge(step.held)

    def _check_backlog(self, sample: BrokerSample) -> None:
        limit = self.bounds.max_backlog
        if limit is not None and not sample.stale and sample.queue_ready > limit:
            self._end_hold(
                Steadiness(Hold.UNSTEADY, f"cut short: backlog {sample.queue_ready:,} > {limit:,}"),
                None,
            )

    def _phase_of(self, figures: RunFigures, began_at: float) -> PhaseFigures | None:
        """The phase the step's change opened: the one in force just after it began."""
        loaded = [p for p in figures.phases if not p.is_drain]
        if not loaded:
            return None
        found = phase_at([p.phase for p in loaded], to_us(began_at) + 1)
        return next((p for p in loaded if p.phase is found), None)

    def _judge(self, steadiness: Steadiness) -> None:
        step = self._step
        assert step is not None and step.began_at is not None
        self._step = None
        figures = self._figures()
        phase = None if figures is None else self._phase_of(figures, step.began_at)
        if figures is None or phase is None or not phase.has_data:
            self.state = State.STOPPED
            self._say(f"autotune stopped: no client figures for {self.setting.value}={step.value}")
            return
        point = sweep_point(phase, self.setting.value, figures.fan_out)
        depth = phase.broker.get("depth_end")
        result = StepResult(
            value=step.value,
            phase=phase.index,
            held_s=phase.seconds,
            steadiness=steadiness,
            load=phase.load,
            verdict=phase.verdict or Verdict.OVERLOADED,
            reason=phase.reason,
            point=point,
            p99_ms=phase.p99_ms,
            backlog=None if depth is None else int(depth),
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
            f"{point.throughput:,.1f} msg/s{capped}, e2e p99 {_ms(result.p99_ms)}, "
            f"{result.verdict.value}; {steadiness.text}, {result.held_s:.0f} s of figures"
        )
        if ended is None:
            self._next()
        else:
            self._finish(ended)

    def _choice(self) -> Recommendation:
        """The run's recommendation for the setting over every load phase so far (the
        report's on the same session); the steps' own when the run has no sweep of it."""
        figures = self._figures()
        sweep = None if figures is None else figures.sweep(self.setting.value)
        if sweep is not None:
            return sweep.recommendation
        assert isinstance(self.search, Search)  # a rate search ends in _finish_rate
        return self.search.choice()

    def _finish(self, why: str) -> None:
        if isinstance(self.search, RateSearch):
            self._finish_rate(why)
            return
        self.recommendation = self._choice()
        chosen = self.recommendation.value
        name = self.setting.value
        if chosen is None:
            self.state = State.DONE
            self._request(self._before)
            self._say(
                f"autotune: no {name} recommended ({why}; "
                f"{self.recommendation.reasoning[-1]}); {name} back to {self._before}"
            )
            return
        self._why = why
        last = self.search.steps[-1].value if self.search.steps else None
        if last == chosen:
            self._chosen(chosen)
        else:
            self._confirm(chosen)

    def _finish_rate(self, why: str) -> None:
        """Leave the run at the capacity the run's figures found (the report's, over the
        same phases) and say it: total and per publisher, and where it broke."""
        self.state = State.DONE
        figures = self._figures()
        self.capacity = None if figures is None else figures.capacity
        found = self.capacity
        if found is None or found.per_publisher is None:
            self._request(self._before)
            reason = found.reasoning[-1] if found is not None else "no step held"
            self._say(
                f"autotune rate: no rate held ({why}; {reason}); rate back to {self._before:g}"
            )
            return
        self.chosen = found.per_publisher
        self._request(found.per_publisher)
        self._say(
            f"autotune rate: this broker sustains {found.rate:,.0f} msg/s in total "
            f"({found.per_publisher:g} per publisher) for this spec ({why}); " + found.reasoning[-1]
        )

    def _confirm(self, value: int) -> None:
        """Leave the run at ``value`` and hold it like a step before saying it is chosen:
        the report ranks that phase too."""
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
        choice = self._choice()
        assert isinstance(self.search, Search)  # a rate search confirms nothing
        moved = self.search.confirm(result, choice)
        self.recommendation = choice
        if moved is not None:
            self._confirm(moved)
        elif choice.value is None:
            self.state = State.DONE
            self._request(self._before)
            self._say(
                f"autotune: no {self.setting.value} recommended once confirmed "
                f"({choice.reasoning[-1]}); {self.setting.value} back to {self._before}"
            )
        else:
            if choice.value != result.value:
                self._request(choice.value)
            self._chosen(choice.value)

    def _chosen(self, chosen: int) -> None:
        self.chosen = chosen
        self.state = State.DONE
        recommendation = self.recommendation or self._choice()
        point = recommendation.point
        figures = (
            "" if point is None else f" (msg/s {point.throughput:,.1f}, p99 {_ms(point.p99_ms)})"
        )
        self._say(
            f"autotune: {self.setting.value}={chosen} chosen{figures}: {self._why}; "
            f"{recommendation.reasoning[-1]}"
        )

    def _request(self, value: float) -> None:
        try:
            self.run.request(Change(self.setting, value), SOURCE)
        except FlowdeckError as exc:
            self._say(f"autotune could not set {self.setting.value}={value}: {exc}")

    def _say(self, message: str) -> None:
        self.said.append(message)
        self.run.report_event(EventKind.INFO, message)
        if not self.active and self.on_done is not None:
            done, self.on_done = self.on_done, None
            done(self)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"
