"""The demo's guided tour as data: the seed's benchmark #2 story, one step per key press.

"Quorum Queues and Flow Control - Stress Tests" tells its benchmark #2 in four beats: with
no back pressure the queues fill; confirms with an in-flight limit of 1 % of the target
rate give low latency; at 100-200 % latency climbs again; multiple-flag acks help a
little. The tour replays those beats on one live run, each step a caption, the settings it
puts in force and the figures to look at, so a presenter can tell the story in front of
an audience with one key. Everything here is pure (no Textual, no I/O) so it is tested
without a screen and the story can be read in one place.

A story told live must match what the audience sees, on any machine. So the tour first
measures what this broker takes (:class:`Probe`: a few seconds of publishing as fast as it
confirms, the consume rate read from the run's figures) and sets step 1's load above it
(:func:`overload_rate`), and each step's caption is checked against the figures on screen
(:func:`observe`): when the broker does what the story says, the caption says so with the
figures; when it does not, it says what is happening instead.

The engine cannot switch publisher confirms off while a run goes (``confirms`` is a
RunSpec field, not a steerable setting), so the first step stands for the seed's runs
without confirms with an in-flight limit of 0 (no limit): confirms still come back and
are counted, but no publisher ever waits for one, which is what takes the back pressure
away.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from flowdeck.engine import Change, RunSpec, Setting, Settings, preset, setting_value
from flowdeck.figures import Trend, Verdict
from flowdeck.figures.verdict import (
    BACKLOG_MIN,
    BACKLOG_SECONDS,
    CATCH_UP_SHARE,
    TARGET_REACHED,
)

#: The preset the tour runs: the seed's benchmark #2 (20 publishers x 2000 msg/s, 10 quorum
#: queues, 20 consumers, 1 kB persistent messages, prefetch 2000).
TOUR_PRESET = "bench2"
#: Scale of the tour's clients and queues: 4 publishers, 2 quorum queues, 4 consumers. The
#: load is not the preset's: the capacity probe sets it from what this broker takes.
DEFAULT_TOUR_SCALE = 0.2
#: Step 1 offers this many times what the probe measured: the queues fill by half the
#: broker's rate each second (a backlog of seconds within ten), without a memory alarm
#: before the presenter has said a word.
OVERLOAD = 1.5
#: A step's figures are "watched" until its phase has this many seconds (the verdicts'
#: own minimum, ``figures.verdict.MIN_SECONDS``).
WATCH_SECONDS = 5
#: p99 "in seconds" from here (ms); "milliseconds" below.
SECONDS_MS = 1000.0
#: A demo runs until the presenter stops it; the run ends by itself after an hour.
DEFAULT_TOUR_SECONDS = 3600.0

#: Names of the figures a step points at (as ``tui.widgets.figure_strip.figures`` names them).
PUBLISH = "publish"
CONSUME = "consume"
P99 = "e2e p99"
PENDING = "pending"
DEPTH = "queue depth"


@dataclass(frozen=True, slots=True)
class TourStep:
    """One beat of the story: what the audience is told, what changes, what to look at."""

    title: str
    #: What this step does and why, in two or three sentences.
    caption: str
    #: What the audience should see happen on the figures and the chart.
    look_at: str
    #: The tour's settings in this step, absolute: going back to a step puts them all back.
    changes: tuple[Change, ...]
    #: The big figures to point at (highlighted on screen).
    watch: tuple[str, ...] = ()
    #: What the figures should show if the broker behaves as the story says
    #: (:func:`observe` checks it).
    expect: Expect | None = None

    @property
    def inflight(self) -> int:
        return int(next((c.value or 0 for c in self.changes if c.setting is Setting.INFLIGHT), 0))


class Expect(StrEnum):
    """What a step's figures should show, as its caption tells it."""

    OVERLOAD = "queues fill, p99 climbs"
    DRAIN_THEN_STEADY = "the backlog drains, then publish equals consume at ms p99"
    LATENCY_UP = "p99 climbs again"
    LATENCY_UP_MORE = "p99 higher still"
    ACKS_HELP = "consume a little higher or p99 a little lower"
    STEADY = "steady msg/s at millisecond p99"


@dataclass(frozen=True, slots=True)
class Probe:
    """The capacity probe before step 1: ``seconds`` of publishing as fast as the broker
    confirms (no rate limit, ``inflight`` unconfirmed messages per publisher: enough to
    keep it busy without piling up an unbounded backlog), the consume rate after the first
    seconds read from the run's figures."""

    seconds: int = 8
    inflight: int = 200

    @property
    def changes(self) -> tuple[Change, ...]:
        return (
            Change(Setting.INFLIGHT, float(self.inflight)),
            Change(Setting.ACK_EVERY, 1.0),
            Change(Setting.RATE, 0.0),
        )


@dataclass(frozen=True, slots=True)
class Tour:
    """A run spec and the steps played on it, in order."""

    title: str
    #: Shown while the broker comes up, before the first step.
    intro: str
    spec: RunSpec
    steps: tuple[TourStep, ...]
    #: Measure the broker before step 1 (None: the steps' load is the preset's).
    probe: Probe | None = None
    #: The story's publish rate per publisher (msg/s): the preset's, or set from the probe.
    rate: float = 0.0
    #: What the probe measured (msg/s consumed), once it has.
    capacity: float | None = None

    def step(self, index: int) -> TourStep:
        return self.steps[index]

    def clamp(self, index: int) -> int:
        """``index`` kept within the steps."""
        return min(max(index, 0), len(self.steps) - 1)

    def at_rate(self, rate: float, capacity: float | None) -> Tour:
        """The tour with its steps' load at ``rate`` msg/s per publisher (the in-flight
        limits are percentages of it), after a probe that measured ``capacity``."""
        steps = bench2_steps(self.spec, rate, capacity)
        return replace(self, steps=steps, rate=rate, capacity=capacity)

    def probing(self, settings: Settings) -> bool:
        """Whether ``settings`` are the probe's (a watcher reads the tour off the run)."""
        return self.probe is not None and settings.rate == 0

    def step_of(self, settings: Settings) -> int | None:
        """The step whose settings are ``settings`` (each step's are its own), or None."""
        for index, step in enumerate(self.steps):
            if not changes_to(step, settings):
                return index
        return None


def overload_rate(capacity: float, publishers: int, fallback: float) -> float:
    """The rate per publisher (msg/s) that offers :data:`OVERLOAD` times ``capacity`` (the
    msg/s the probe saw consumed) in all, rounded up to two significant digits and at least
    1 msg/s; ``fallback`` (the preset's rate) when the probe measured nothing."""
    if capacity <= 0 or publishers <= 0:
        return fallback
    wanted = OVERLOAD * capacity / publishers
    digits = 10 ** max(0, math.floor(math.log10(wanted)) - 1)
    return float(math.ceil(wanted / digits) * digits)


def in_flight_limit(rate: float, percent: float) -> int:
    """The in-flight limit that is ``percent`` of a publisher's target ``rate`` (the seed's
    way of choosing limits: 1 % of 2000 msg/s is 20); at least 1."""
    return max(1, round(rate * percent / 100))


def changes_to(step: TourStep, requested: Settings) -> tuple[Change, ...]:
    """The changes that put ``step``'s settings in force when the run has asked for
    ``requested`` so far (the controller's ``requested_settings``): only those that differ,
    so going back and forth never sends a change that changes nothing."""
    return tuple(
        change
        for change in step.changes
        if change.value is None or setting_value(requested, change.setting) != change.value
    )


def bench2_steps(spec: RunSpec, rate: float, capacity: float | None = None) -> tuple[TourStep, ...]:
    """The benchmark #2 story's steps on ``spec``'s clients and queues, at ``rate`` msg/s per
    publisher (the in-flight limits are the seed's percentages of it); ``capacity``: what the
    probe measured, quoted in step 1."""
    one_percent = in_flight_limit(rate, 1)
    five_percent = in_flight_limit(rate, 5)
    full = in_flight_limit(rate, 100)
    double = in_flight_limit(rate, 200)
    # The seed's multiple-flag runs acked every 10 % of the prefetch.
    multiple = max(2, spec.prefetch // 10)
    total = rate * spec.publishers
    queues = f"{spec.queues} quorum queue{'s' if spec.queues != 1 else ''}"
    measured = (
        f"{OVERLOAD:g}× the {capacity:,.0f} msg/s this broker took in the probe"
        if capacity
        else "more than this broker can take"
    )

    def settings(inflight: int, ack_every: int) -> tuple[Change, ...]:
        return (
            Change(Setting.INFLIGHT, float(inflight)),
            Change(Setting.ACK_EVERY, float(ack_every)),
            Change(Setting.RATE, float(rate)),
        )

    return (
        TourStep(
            "No back pressure",
            f"{spec.publishers} publishers try {total:,.0f} msg/s into {queues}: {measured}. "
            "With no in-flight limit no publisher ever waits for a confirm, as in the seed's "
            "runs without confirms: nothing slows them down.",
            "publish runs ahead of consume: queue depth and pending confirms climb, and "
            "p99 climbs with them, into seconds.",
            settings(0, 1),
            (PUBLISH, CONSUME, DEPTH, P99),
            Expect.OVERLOAD,
        ),
        TourStep(
            f"Confirms, in-flight 1 % ({one_percent})",
            f"Each publisher now keeps at most {one_percent} messages unconfirmed (1 % of "
            f"its {rate:,.0f} msg/s) and waits for the broker before it sends more: "
            "confirms have become back pressure.",
            "first the backlog drains (depth falls, publish near 0), then publish equals "
            "consume at the broker's pace and p99 drops to milliseconds.",
            settings(one_percent, 1),
            (PENDING, DEPTH, P99),
            Expect.DRAIN_THEN_STEADY,
        ),
        TourStep(
            f"In-flight 100 % ({full})",
            f"A whole second's worth of messages in flight per publisher ({full}): the "
            "broker holds far more at once and its buffers fill.",
            "pending confirms jump; publish may edge up, but consume does not keep up: "
            "queue depth climbs and p99 goes back to seconds.",
            settings(full, 1),
            (PENDING, P99, PUBLISH),
            Expect.LATENCY_UP,
        ),
        TourStep(
            f"In-flight 200 % ({double})",
            f"Twice that ({double}): more in flight buys no throughput, only latency. "
            "The seed saw the same past 100 %: queues start filling.",
            "p99 higher still; consume falls behind publish in bursts.",
            settings(double, 1),
            (P99, DEPTH, CONSUME),
            Expect.LATENCY_UP_MORE,
        ),
        TourStep(
            f"Multiple-flag acks (every {multiple})",
            f"Consumers now ack once every {multiple} deliveries with the multiple flag "
            f"(10 % of the prefetch of {spec.prefetch}): one ack frame instead of "
            f"{multiple}, less work for the broker per message.",
            "consume a little higher, latency a little lower: the seed found the multiple "
            "flag helpful, not game changing.",
            settings(double, multiple),
            (CONSUME, P99),
            Expect.ACKS_HELP,
        ),
        TourStep(
            f"The rule of thumb: in-flight 5 % ({five_percent})",
            "The seed's advice: an in-flight limit of 1-10 % of the target rate (towards "
            "10 % with few fast publishers, 1 % with hundreds), multiple-flag acks, and "
            "never load a broker hard without publisher confirms.",
            "steady msg/s at millisecond latency. Every step is a phase of the recorded "
            "session: flowdeck report shows them side by side.",
            settings(five_percent, multiple),
            (PUBLISH, CONSUME, P99),
            Expect.STEADY,
        ),
    )


def bench2_tour(
    scale: float = DEFAULT_TOUR_SCALE,
    duration: float = DEFAULT_TOUR_SECONDS,
    uri: str = "",
    management_url: str = "",
    prometheus_url: str = "",
    *,
    probe: Probe | None = Probe(),
) -> Tour:
    """The benchmark #2 tour, its clients and queues scaled by ``scale`` (SpecError when it
    cannot be). With ``probe`` the run starts by measuring the broker and step 1's load is
    set from what it takes (``Tour.at_rate``); without, the steps run at the preset's rate.

    With no ``uri`` the run goes to a private RabbitMQ node the cockpit starts.
    """
    base = preset(TOUR_PRESET, scale)
    steps = bench2_steps(base, base.rate)
    spec = base
    for change in steps[0].changes if probe is None else probe.changes:
        spec = spec.with_change(change)
    spec = replace(
        spec,
        name="tour-bench2",
        description=f"guided tour of the seed's benchmark #2 (scale {scale:g})",
        queue_pattern="flowdeck-tour-%d",
        uri=uri,
        management_url=management_url,
        prometheus_url=prometheus_url,
        schedule=(),
    ).with_duration(duration)
    queues = f"{base.queues} quorum queue{'s' if base.queues != 1 else ''}"
    load = (
        f"a load set from what this broker takes (measured first: {probe.seconds} s of "
        "publishing as fast as it confirms)"
        if probe is not None
        else f"{base.rate:,.0f} msg/s each"
    )
    intro = (
        "Benchmark #2 of 'Quorum Queues and Flow Control - Stress Tests', live: "
        f"{base.publishers} publishers into {queues}, {base.consumers} consumers, 1 kB "
        f"persistent messages, prefetch {base.prefetch}, {load}. "
        f"{len(steps)} steps, from no back pressure to the seed's rule of thumb; "
        "the presenter moves on with space and back with p."
    )
    return Tour("flowdeck tour: confirms as flow control", intro, spec, steps, probe, base.rate)


# -- what the screen shows, against what the story says -------------------------------------


class Seen(StrEnum):
    """How a step's figures compare with its caption."""

    WATCHING = "watching"  # too few seconds yet to say
    AS_TOLD = "as told"
    OTHERWISE = "otherwise"  # the broker did something else: the caption says what


@dataclass(frozen=True, slots=True)
class StepFigures:
    """What the screen shows of the step in force: the big figures (the last second's msg/s,
    e2e p99, pending confirms; the queue depth and the direction its arrow shows) and the
    step's phase as the run's figures judge it (``figures.run``: its verdict and reason,
    and how many seconds of figures it has)."""

    seconds: int
    verdict: Verdict | None
    reason: str
    publish: float
    consume: float
    p99_ms: float | None
    pending: float
    depth: float | None
    depth_slope: float | None
    depth_trend: Trend | None
    #: The publishers' target rate in all (msg/s; 0: no rate limit).
    target: float = 0.0


@dataclass(frozen=True, slots=True)
class Observation:
    seen: Seen
    #: What is on screen, in words, with its figures.
    text: str


def _ms(value: float | None) -> str:
    if value is None:
        return "not measured"
    if value >= SECONDS_MS:
        return f"{value / 1000:.1f} s"
    return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"


def _rate(value: float) -> str:
    return f"{value:,.0f} msg/s"


def _depth(now: StepFigures) -> str:
    if now.depth is None:
        return "queue depth not known"
    words = {Trend.UP: "climbing", Trend.DOWN: "falling", Trend.FLAT: "flat"}
    if now.depth_trend is None or now.depth_slope is None:
        return f"queue depth {now.depth:,.0f}"
    if now.depth_trend is Trend.FLAT:
        return f"queue depth {now.depth:,.0f}, flat"
    return f"queue depth {now.depth:,.0f}, {words[now.depth_trend]} {now.depth_slope:+,.0f}/s"


def _filling(now: StepFigures) -> bool:
    return now.depth_trend is Trend.UP or now.verdict is Verdict.OVERLOADED


def _backlog(now: StepFigures) -> bool:
    """Whether the queues hold a backlog worth the name: the verdicts' rule
    (``figures.verdict``: at least BACKLOG_SECONDS of the consume rate)."""
    wanted = max(BACKLOG_MIN, BACKLOG_SECONDS * now.consume)
    return now.depth is not None and now.depth >= wanted


def _draining(now: StepFigures) -> bool:
    return now.verdict is Verdict.DRAINING or (now.depth_trend is Trend.DOWN and _backlog(now))


def _catching_up(now: StepFigures) -> bool:
    """Publishers above their target: the rate schedule making up for seconds it was held."""
    return now.target > 0 and now.publish > CATCH_UP_SHARE * now.target


def observe(
    step: TourStep,
    now: StepFigures | None,
    before: StepFigures | None = None,
    capacity: float | None = None,
) -> Observation:
    """Whether the figures on screen show what ``step``'s caption says (``before``: what the
    screen showed when the step before it ended; ``capacity``: what the probe measured),
    and what they show, in words with the figures."""
    if now is None or now.seconds < WATCH_SECONDS:
        seconds = 0 if now is None else now.seconds
        return Observation(Seen.WATCHING, f"watching: {seconds} s of this step's figures so far")
    flows = f"consumers take {_rate(now.consume)} of {_rate(now.publish)} published"
    p99 = f"p99 {_ms(now.p99_ms)}"
    in_seconds = now.p99_ms is not None and now.p99_ms >= SECONDS_MS
    judged = f"judged {now.verdict.value}" if now.verdict is not None else "not judged yet"
    match step.expect:
        case Expect.OVERLOAD:
            if _filling(now):
                rising = "into seconds" if in_seconds else "rising with the queue"
                if now.depth_trend is Trend.UP:
                    return Observation(Seen.AS_TOLD, f"{_depth(now)}; {flows}; {p99}, {rising}")
                return Observation(Seen.AS_TOLD, f"{flows}; {p99}, {rising}; {_depth(now)}")
            short = now.target > 0 and now.publish < TARGET_REACHED * now.target
            if in_seconds or short:
                sent = f"publishers send {_rate(now.publish)}"
                if now.target > 0:
                    sent += f" of the {_rate(now.target)} they try"
                return Observation(
                    Seen.OTHERWISE,
                    f"the overload shows before the queues: {p99} and {now.pending:,.0f} "
                    f"messages unconfirmed, while {_depth(now)}; {sent} and consumers take "
                    f"{_rate(now.consume)}: messages wait in the publishers' connections (held "
                    "by the broker's flow control or by the client itself), not in the queues",
                )
            took = f" (the probe measured {_rate(capacity)})" if capacity else ""
            return Observation(
                Seen.OTHERWISE,
                f"consumers keep up: {flows}, {_depth(now)}, {p99} ({judged}). This broker "
                f"carries this load{took}, so no backlog builds for the next steps to drain.",
            )
        case Expect.DRAIN_THEN_STEADY:
            if _draining(now):
                return Observation(
                    Seen.AS_TOLD,
                    f"the backlog drains: {_depth(now)}, publish {_rate(now.publish)}; {p99}",
                )
            if _filling(now):
                return Observation(
                    Seen.OTHERWISE,
                    f"the queues still fill: {_depth(now)}; {flows}: even {step.inflight} in "
                    f"flight per publisher is more than this broker keeps up with ({p99})",
                )
            if not in_seconds:
                queued = before is None or before.depth is None or _backlog(before)
                where = "" if queued else " (step 1's messages waited before the queues)"
                if _catching_up(now):
                    where += (
                        f"; publishers above their {_rate(now.target)} target: catching up on "
                        "the schedule step 1 left them behind"
                    )
                return Observation(
                    Seen.AS_TOLD,
                    f"publish equals consume at the broker's pace: {_rate(now.consume)}, "
                    f"{p99}, {_depth(now)}{where}",
                )
            return Observation(
                Seen.OTHERWISE,
                f"{_depth(now)} but {p99} still: messages wait before the queues ({judged})",
            )
        case Expect.LATENCY_UP | Expect.LATENCY_UP_MORE:
            factor = 2.0 if step.expect is Expect.LATENCY_UP else 1.2
            was = None if before is None else before.p99_ms
            higher = was is not None and now.p99_ms is not None and now.p99_ms >= factor * was
            since = "" if was is None else f" (it was {_ms(was)} at the step before)"
            if _filling(now) or higher:
                return Observation(Seen.AS_TOLD, f"{p99}{since}; {_depth(now)}; {flows}")
            return Observation(
                Seen.OTHERWISE,
                f"{p99}{since}, {_depth(now)}: this broker confirms {_rate(now.publish)} "
                f"without queueing even with {step.inflight} in flight per publisher "
                f"(pending confirms {now.pending:,.0f}); more in flight cost nothing here",
            )
        case Expect.ACKS_HELP:
            if before is None:
                return Observation(Seen.AS_TOLD, f"{flows}; {p99}")
            more = now.consume >= 1.01 * before.consume
            faster = (
                now.p99_ms is not None
                and before.p99_ms is not None
                and now.p99_ms <= 0.9 * before.p99_ms
            )
            compared = (
                f"consume {_rate(now.consume)} (was {_rate(before.consume)}), {p99} "
                f"(was {_ms(before.p99_ms)})"
            )
            if more or faster:
                return Observation(Seen.AS_TOLD, compared)
            return Observation(
                Seen.OTHERWISE, f"no gain to see here: {compared}; the seed found it small too"
            )
        case Expect.STEADY:
            if _catching_up(now):
                return Observation(
                    Seen.OTHERWISE,
                    f"publishers catch up on the rate schedule they fell behind: publish "
                    f"{_rate(now.publish)}, above the {_rate(now.target)} target; {p99}; "
                    "steady figures once they have",
                )
            if _draining(now):
                return Observation(
                    Seen.OTHERWISE,
                    f"the backlog from before still drains: {_depth(now)}; steady figures "
                    "once it is gone",
                )
            steady = now.verdict in (Verdict.SUSTAINABLE, Verdict.BACK_PRESSURED)
            if steady and not _filling(now) and not in_seconds:
                return Observation(
                    Seen.AS_TOLD, f"steady: {_rate(now.consume)} at {p99}, {_depth(now)}"
                )
            return Observation(
                Seen.OTHERWISE, f"not steady yet: {flows}, {_depth(now)}, {p99} ({judged})"
            )
    return Observation(Seen.AS_TOLD, f"{flows}; {p99}; {_depth(now)}")


def probe_observation(probe: Probe, now: StepFigures | None) -> Observation:
    """The probe's progress, in words."""
    if now is None:
        return Observation(Seen.WATCHING, "waiting for the run's first figures")
    return Observation(
        Seen.WATCHING,
        f"measuring: {_rate(now.consume)} consumed, p99 {_ms(now.p99_ms)}, {now.seconds} s "
        f"of {probe.seconds}",
    )
