"""Judging a phase and recommending a setting from a sweep (pure functions, no Spark).

The thresholds are constants here and are quoted in every report and in
``docs/reports.md``, so a reader can check each verdict by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

#: Queue depth "grows" when its slope exceeds this share of the publish rate...
DEPTH_GROWTH_SHARE = 0.02
#: ...and at least this many messages per second, and ends above where it started.
DEPTH_GROWTH_MIN = 1.0
#: Consumers "keep up" when they take at least this share of the publish rate.
CONSUME_KEEPS_UP = 0.95
#: Publishers are "held" when they reach less than this share of their target rate...
TARGET_REACHED = 0.95
#: ...or their pending confirms average at least this share of the in-flight window.
WINDOW_FULL = 0.90
#: A sweep setting is "within a few percent" of the best when its throughput is at least
#: this share of the best one.
THROUGHPUT_TOLERANCE = 0.95
#: A phase consuming more than this share of its target is catching up on a backlog (a
#: slower phase before it left one): above a second's jitter, below any real catch-up.
CATCH_UP_SHARE = 1.05


class Verdict(StrEnum):
    SUSTAINABLE = "sustainable"
    BACK_PRESSURED = "back-pressured"
    OVERLOADED = "overloaded"
    #: Not a judgement: the consumers' drain after publishing stopped, which has no target
    #: and no load to judge. :func:`judge` never returns it; the report gives it to the
    #: drain phase.
    DRAIN = "drain"
    #: Not a judgement either: publishers were paused throughout the phase, so there is no
    #: load to judge (an alarm still makes it overloaded).
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class PhaseLoad:
    """What the verdict looks at, per phase (rates in msg/s, depth slope in msg/s)."""

    publish_rate: float
    consume_rate: float
    target_rate: float | None  # None: no rate limit
    pending_confirms_mean: float
    inflight: int  # per publisher, 0 = no window
    publishers: int
    blocked_s: float
    alarm_s: float
    depth_start: float | None
    depth_end: float | None
    depth_slope: float | None
    #: The publish mean over the seconds not paused: what the target (taken over the same
    #: seconds) is compared with. None: no second was paused, the same as ``publish_rate``.
    publish_rate_unpaused: float | None = None
    #: The confirm mean, with publisher confirms on: what the broker took. Consumers keep up
    #: when they take what the broker took; the rest of the publish rate is messages still
    #: in flight (a widening in-flight window), not a backlog. None or 0: compare with publish.
    confirm_rate: float | None = None
    #: The phase's seconds, and those in which publishing was paused for all or part of
    #: the second. 0 and 0 (the default): not known, judged as a phase that published.
    seconds: int = 0
    paused_s: int = 0

    @property
    def paused_throughout(self) -> bool:
        return self.seconds > 0 and self.paused_s >= self.seconds


def judge(load: PhaseLoad) -> tuple[Verdict, str]:
    """The phase's verdict and the reason, in the words of the thresholds above.

    A phase paused throughout has no load to judge: it is ``paused`` (``overloaded`` with
    an alarm), and the reason says what the consumers did meanwhile."""
    overloaded: list[str] = []
    if load.alarm_s > 0:
        overloaded.append(f"memory or disk alarm for {load.alarm_s:.0f} s")
    if load.paused_throughout:
        consumed = f"consumers took {load.consume_rate:.1f} msg/s"
        if load.depth_start is not None and load.depth_end is not None:
            consumed += f", queue depth {load.depth_start:.0f} → {load.depth_end:.0f}"
        if overloaded:
            return Verdict.OVERLOADED, "; ".join([*overloaded, "publishers paused throughout"])
        return Verdict.PAUSED, f"publishers paused throughout: no load to judge; {consumed}"
    if (
        load.depth_slope is not None
        and load.depth_start is not None
        and load.depth_end is not None
        and load.depth_end > load.depth_start
        and load.depth_slope > max(DEPTH_GROWTH_MIN, DEPTH_GROWTH_SHARE * load.publish_rate)
    ):
        overloaded.append(f"queue depth growing {load.depth_slope:.1f} msg/s")
    taken, what = load.publish_rate, "published"
    if load.confirm_rate:
        taken, what = load.confirm_rate, "confirmed"
    if taken > 0 and load.consume_rate < CONSUME_KEEPS_UP * taken:
        overloaded.append(
            f"consumers take {load.consume_rate:.1f} of {taken:.1f} msg/s {what} "
            f"(< {CONSUME_KEEPS_UP:.0%})"
        )
    if overloaded:
        return Verdict.OVERLOADED, "; ".join(overloaded)

    held: list[str] = []
    if load.blocked_s > 0:
        held.append(f"connections blocked by flow control for {load.blocked_s:.0f} s")
    if load.target_rate is not None and load.target_rate > 0:
        reached = load.publish_rate
        if load.publish_rate_unpaused is not None:
            reached = load.publish_rate_unpaused
        if reached < TARGET_REACHED * load.target_rate:
            held.append(
                f"publishers reach {reached:.1f} of the {load.target_rate:.1f} msg/s "
                f"target (< {TARGET_REACHED:.0%})"
            )
    elif load.publish_rate > 0:
        held.append("no target rate: publishers go as fast as confirms and flow control allow")
    window = load.inflight * load.publishers
    if window > 0 and load.pending_confirms_mean >= WINDOW_FULL * window:
        held.append(
            f"pending confirms {load.pending_confirms_mean:.0f} fill the in-flight window "
            f"{window} (≥ {WINDOW_FULL:.0%})"
        )
    if held:
        return Verdict.BACK_PRESSURED, "; ".join(held) + "; depth flat"
    return Verdict.SUSTAINABLE, "consumers keep up, depth flat, target reached"


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One row of a sweep: the setting's value, throughput for ranking and e2e latency (ms).

    ``achieved`` is the phase's mean when it was above the target and ``throughput`` is the
    target instead (see :func:`ranked_throughput`); None when no cap applied.
    """

    value: int
    throughput: float
    p99_ms: float | None
    verdict: Verdict
    label: str = ""
    achieved: float | None = None

    @property
    def catching_up(self) -> bool:
        """Consumed more than :data:`CATCH_UP_SHARE` of its target: a backlog left by a
        slower phase was being taken, so its latency is the backlog's wait, not the
        setting's."""
        return self.achieved is not None and self.achieved > CATCH_UP_SHARE * self.throughput


def ranked_throughput(
    value: int,
    achieved: float,
    target: float | None,
    p99_ms: float | None,
    verdict: Verdict,
    label: str = "",
    fan_out: int = 1,
) -> SweepPoint:
    """A sweep point whose throughput is the achieved consume mean capped at the target: a
    phase that consumed faster than its target was catching up on a backlog left by a
    slower phase; that is not capacity the setting gives and must not win the ranking.

    ``target`` is the publish target; ``fan_out`` how many times each published message is
    consumed (a fanout exchange to 3 queues: 3), so the cap is ``target × fan_out``.
    """
    cap = None if target is None or target <= 0 else target * max(1, fan_out)
    if cap is not None and achieved > cap:
        return SweepPoint(value, cap, p99_ms, verdict, label, achieved=achieved)
    return SweepPoint(value, achieved, p99_ms, verdict, label)


@dataclass(frozen=True, slots=True)
class Recommendation:
    value: int | None
    reasoning: tuple[str, ...]


def recommend(
    setting: str,
    points: Sequence[SweepPoint],
    max_p99_ms: float | None = None,
    fan_out: int = 1,
) -> Recommendation:
    """The smallest value within :data:`THROUGHPUT_TOLERANCE` of the best throughput, among
    points that are not overloaded and (when given) whose p99 is at most ``max_p99_ms``.
    Throughputs capped by :func:`ranked_throughput` are said so in the reasoning
    (``fan_out`` as it was given there).

    A value is judged by its steady phases: a phase catching up on a backlog
    (:attr:`SweepPoint.catching_up`) is set aside when a steady phase (not catching up, not
    overloaded) ran at the same value,
    so neither the ranking nor the p99 quoted comes from a backlog's wait. Between phases
    of equal throughput (a capped catch-up and a steady phase at the target), the steady
    one is the best and the one quoted."""
    if not points:
        return Recommendation(None, ("no phases to compare",))
    repeated = {v for v in (p.value for p in points) if sum(q.value == v for q in points) > 1}

    def name(point: SweepPoint) -> str:
        """``inflight=100``, with the phase's label when several phases ran at that value."""
        plain = f"{setting}={point.value}"
        if point.value in repeated and point.label and point.label != plain:
            return f"{plain} ({point.label})"
        return plain

    steady_values = {
        p.value for p in points if not p.catching_up and p.verdict is not Verdict.OVERLOADED
    }
    set_aside = [p for p in points if p.catching_up and p.value in steady_values]
    ranked = [p for p in points if p not in set_aside]
    best = max(ranked, key=lambda p: (p.throughput, not p.catching_up))
    floor = THROUGHPUT_TOLERANCE * best.throughput
    reasoning = [
        f"best throughput {best.throughput:.1f} msg/s at {name(best)}; "
        f"candidates need ≥ {THROUGHPUT_TOLERANCE:.0%} of it ({floor:.1f} msg/s)"
        + (f" and p99 ≤ {max_p99_ms:g} ms" if max_p99_ms is not None else "")
        + ", and must not be overloaded"
    ]
    # Caps are named where they change a figure as printed; a mean a hair above its target
    # (a second's jitter) is capped all the same.
    capped = [p for p in sorted(points, key=lambda p: p.value) if _visibly_capped(p)]
    if capped:
        target = "target" if fan_out <= 1 else f"target × {fan_out} (messages fan out)"
        reasoning.append(
            f"throughput capped at the phase's {target} where the consume mean exceeded it "
            "(catch-up on a backlog, not capacity): "
            + ", ".join(f"{name(p)} {p.achieved:.1f} → {p.throughput:.1f} msg/s" for p in capped)
        )
    candidates: list[SweepPoint] = []
    for point in sorted(points, key=lambda p: (p.value, p.catching_up, -p.throughput)):
        if point in set_aside:
            reasoning.append(
                f"{name(point)}: set aside (catching up on a backlog at "
                f"{point.achieved or 0.0:.1f} msg/s, p99 {_ms(point.p99_ms)}: the steady "
                f"phase at {setting}={point.value} stands for this value)"
            )
            continue
        why_not: list[str] = []
        if point.throughput < floor:
            why_not.append(f"{point.throughput:.1f} msg/s is below {floor:.1f}")
        if point.verdict is Verdict.OVERLOADED:
            why_not.append("overloaded")
        if max_p99_ms is not None and (point.p99_ms is None or point.p99_ms > max_p99_ms):
            why_not.append(f"p99 {_ms(point.p99_ms)} is above {max_p99_ms:g} ms")
        if why_not:
            reasoning.append(f"{name(point)}: excluded ({'; '.join(why_not)})")
        else:
            reasoning.append(
                f"{name(point)}: candidate ({point.throughput:.1f} msg/s"
                + (
                    f" capped at the target, {point.achieved:.1f} achieved"
                    if _visibly_capped(point)
                    else ""
                )
                + f", p99 {_ms(point.p99_ms)})"
            )
            candidates.append(point)
    if not candidates:
        reasoning.append("no value meets every condition: no recommendation")
        return Recommendation(None, tuple(reasoning))
    chosen = min(candidates, key=lambda p: (p.value, p.catching_up, -p.throughput))
    reasoning.append(
        f"recommended {name(chosen)}: the smallest candidate "
        f"({chosen.throughput / best.throughput:.0%} of the best throughput, "
        f"p99 {_ms(chosen.p99_ms)}"
        + (f" vs {_ms(best.p99_ms)} at the best)" if best is not chosen else ")")
    )
    return Recommendation(chosen.value, tuple(reasoning))


def _visibly_capped(point: SweepPoint) -> bool:
    return point.achieved is not None and f"{point.achieved:.1f}" != f"{point.throughput:.1f}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"
