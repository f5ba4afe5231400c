"""Sweeps and the recommended setting: which value of a setting is best, and why.

A run sweeps a setting when its load phases (not the drain, not paused throughout) ran at
two or more values of it. Each phase is a :class:`SweepPoint`; :func:`recommend` picks by
rules stated in its reasoning, which every place that shows a recommendation prints:

* **Candidates** are phases whose verdict says what the setting can carry
  (:attr:`Verdict.judged_capacity`): never a phase draining a backlog, catching up,
  overloaded, paused or too short to judge.
* **Throughput** is the phase's consume mean capped at its target (× the fan-out): above
  the target a phase consumes a backlog, which is not capacity.
* **Latency counts**: a candidate whose e2e p99 is above max(:data:`P99_FACTOR` × the
  lowest candidate p99, that p99 + :data:`P99_SLACK_MS`) is excluded, so a phase with
  seconds of queueing never wins on throughput alone; with ``--max-p99-ms`` a candidate
  must also be within it.
* **Best** is the highest throughput among the remaining candidates; the recommendation is
  the smallest value within :data:`THROUGHPUT_TOLERANCE` of it.
* **Nothing bound**: when the setting never limited anything — for the in-flight limit,
  pending confirms stayed below :data:`BIND_SHARE` of every window; for prefetch, unacked
  messages below that share of every prefetch window — and the candidates' figures are
  within noise of each other, no value is recommended: the sweep did not ask the question
  (the rate or the scale was too low for any value to matter), and the reasoning says what
  would make it bind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowdeck.figures.verdict import CATCH_UP_SHARE, Verdict

#: A sweep setting is "within a few percent" of the best when its throughput is at least
#: this share of the best one.
THROUGHPUT_TOLERANCE = 0.95
#: A candidate's p99 above max(this many times the lowest candidate p99, that p99 plus
#: :data:`P99_SLACK_MS`) is excluded.
P99_FACTOR = 5.0
P99_SLACK_MS = 50.0
#: A limit binds when what it limits reaches this share of it in some phase.
BIND_SHARE = 0.5
#: Candidates whose p99s are within this factor of each other (and throughputs within the
#: tolerance) are "within noise": nothing to choose between them.
NOISE_P99_FACTOR = 2.0


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One row of a sweep: the setting's value, throughput for ranking and e2e p99 (ms).

    ``achieved`` is the phase's mean when it was above the cap and ``throughput`` the cap
    instead (:func:`ranked_throughput`); None when no cap applied. ``load_share`` is how
    full the setting's window was at its fullest (pending confirms over the in-flight
    window, unacked over the prefetch window); None when the setting has no window or no
    limit (0).
    """

    value: int
    throughput: float
    p99_ms: float | None
    verdict: Verdict
    label: str = ""
    achieved: float | None = None
    load_share: float | None = None

    @property
    def catching_up(self) -> bool:
        """Consumed more than :data:`~figures.verdict.CATCH_UP_SHARE` of its cap: a backlog
        left by a slower phase was being taken, so its throughput and latency are the
        backlog's, not the setting's (the figures judge such a phase draining a backlog;
        a point made by hand is held to the same rule)."""
        return self.achieved is not None and self.achieved > CATCH_UP_SHARE * self.throughput

    @property
    def candidate(self) -> bool:
        """Whether the point can say what its setting carries (rules in the module)."""
        return self.verdict.judged_capacity and not self.catching_up


def ranked_throughput(
    value: int,
    achieved: float,
    target: float | None,
    p99_ms: float | None,
    verdict: Verdict,
    label: str = "",
    fan_out: int = 1,
    load_share: float | None = None,
) -> SweepPoint:
    """A sweep point whose throughput is the achieved consume mean capped at the target
    (``target × fan_out``: each published message is consumed ``fan_out`` times)."""
    cap = None if target is None or target <= 0 else target * max(1, fan_out)
    if cap is not None and achieved > cap:
        return SweepPoint(value, cap, p99_ms, verdict, label, achieved, load_share)
    return SweepPoint(value, achieved, p99_ms, verdict, label, None, load_share)


@dataclass(frozen=True, slots=True)
class Recommendation:
    value: int | None
    reasoning: tuple[str, ...]
    #: The point the recommendation stands on (None: no recommendation).
    point: SweepPoint | None = None
    #: True when no value of the setting limited anything (see the module docstring).
    nothing_bound: bool = False


#: What limits each swept setting's window, in the reasoning's words.
BINDS = {
    "inflight": "pending confirms against the in-flight window (limit × publishers)",
    "prefetch": "unacked messages against the prefetch window (prefetch × consumers)",
}


def recommend(
    setting: str,
    points: Sequence[SweepPoint],
    max_p99_ms: float | None = None,
    fan_out: int = 1,
) -> Recommendation:
    """The recommended value of ``setting`` over a sweep's phases, by the module's rules."""
    if not points:
        return Recommendation(None, ("no phases to compare",))
    repeated = {v for v in (p.value for p in points) if sum(q.value == v for q in points) > 1}

    def name(point: SweepPoint) -> str:
        """``inflight=100``, with the phase's label when several phases ran at that value."""
        plain = f"{setting}={point.value}"
        if point.value in repeated and point.label and point.label != plain:
            return f"{plain} ({point.label})"
        return plain

    judged = [p for p in points if p.candidate]
    with_p99 = [p.p99_ms for p in judged if p.p99_ms is not None]
    lowest = min(with_p99, default=None)
    p99_cap = None if lowest is None else max(P99_FACTOR * lowest, lowest + P99_SLACK_MS)
    reasoning: list[str] = []
    why_not: dict[int, list[str]] = {}
    for index, point in enumerate(points):
        reasons: list[str] = []
        if not point.verdict.judged_capacity:
            reasons.append(point.verdict.value)
        elif point.catching_up:
            reasons.append(
                f"catching up on a backlog at {point.achieved or 0.0:.1f} msg/s, above "
                f"{CATCH_UP_SHARE:.0%} of its cap {point.throughput:.1f}"
            )
        elif p99_cap is not None and point.p99_ms is not None and point.p99_ms > p99_cap:
            reasons.append(
                f"p99 {_ms(point.p99_ms)} is above {_ms(p99_cap)} (max({P99_FACTOR:g} × the "
                f"lowest candidate p99 {_ms(lowest)}, it + {P99_SLACK_MS:g} ms))"
            )
        if max_p99_ms is not None and (point.p99_ms is None or point.p99_ms > max_p99_ms):
            reasons.append(f"p99 {_ms(point.p99_ms)} is above {max_p99_ms:g} ms")
        why_not[index] = reasons
    eligible = [p for i, p in enumerate(points) if not why_not[i]]
    if not eligible:
        for index, point in enumerate(points):
            reasoning.append(f"{name(point)}: excluded ({'; '.join(why_not[index])})")
        reasoning.append("no value meets every condition: no recommendation")
        return Recommendation(None, tuple(reasoning))
    best = max(eligible, key=lambda p: p.throughput)
    if best.throughput <= 0:
        for point in eligible:
            reasoning.append(f"{name(point)}: 0 msg/s")
        reasoning.append("no phase moved a message: nothing to compare, no recommendation")
        return Recommendation(None, tuple(reasoning))
    floor = THROUGHPUT_TOLERANCE * best.throughput
    reasoning.append(
        f"best throughput {best.throughput:.1f} msg/s at {name(best)}; candidates need "
        f"≥ {THROUGHPUT_TOLERANCE:.0%} of it ({floor:.1f} msg/s), a verdict that judges "
        "capacity (not draining a backlog, catching up, overloaded or too short), and a "
        "p99 within the latency rule"
        + (f" and ≤ {max_p99_ms:g} ms" if max_p99_ms is not None else "")
    )
    capped = [p for p in sorted(points, key=lambda p: p.value) if _visibly_capped(p)]
    if capped:
        target = "target" if fan_out <= 1 else f"target × {fan_out} (messages fan out)"
        reasoning.append(
            f"throughput capped at the phase's {target} where the consume mean exceeded it "
            "(catch-up on a backlog, not capacity): "
            + ", ".join(
                f"{name(p)} {p.achieved or 0.0:.1f} → {p.throughput:.1f} msg/s" for p in capped
            )
        )
    candidates: list[SweepPoint] = []
    order = sorted(range(len(points)), key=lambda i: (points[i].value, -points[i].throughput))
    for index in order:
        point = points[index]
        reasons = list(why_not[index])
        if not reasons and point.throughput < floor:
            reasons.append(f"{point.throughput:.1f} msg/s is below {floor:.1f}")
        if reasons:
            reasoning.append(f"{name(point)}: excluded ({'; '.join(reasons)})")
        else:
            capped_text = (
                f" capped at the target, {point.achieved:.1f} achieved"
                if _visibly_capped(point)
                else ""
            )
            reasoning.append(
                f"{name(point)}: candidate ({point.throughput:.1f} msg/s{capped_text}, "
                f"p99 {_ms(point.p99_ms)})"
            )
            candidates.append(point)
    unbound = _nothing_bound(setting, points, eligible, best)
    if unbound is not None:
        reasoning.append(unbound)
        return Recommendation(None, tuple(reasoning), nothing_bound=True)
    chosen = min(candidates, key=lambda p: (p.value, -p.throughput))
    reasoning.append(
        f"recommended {name(chosen)}: the smallest candidate "
        f"({chosen.throughput / best.throughput:.0%} of the best throughput, "
        f"p99 {_ms(chosen.p99_ms)}"
        + (f" vs {_ms(best.p99_ms)} at the best)" if best is not chosen else ")")
    )
    return Recommendation(chosen.value, tuple(reasoning), chosen)


def _nothing_bound(
    setting: str, points: Sequence[SweepPoint], eligible: Sequence[SweepPoint], best: SweepPoint
) -> str | None:
    """Why no value is recommended because none of them limited anything, or None."""
    shares = [p.load_share for p in points if p.load_share is not None]
    if setting not in BINDS or not shares or len(shares) < len(points):
        return None
    fullest = max(shares)
    if fullest >= BIND_SHARE:
        return None
    throughputs = [p.throughput for p in eligible]
    p99s = [p.p99_ms for p in eligible if p.p99_ms is not None]
    within_noise = min(throughputs) >= THROUGHPUT_TOLERANCE * best.throughput and (
        not p99s or max(p99s) <= NOISE_P99_FACTOR * min(p99s) + 1.0
    )
    if not within_noise:
        return None
    values = sorted({p.value for p in points})
    return (
        f"no recommendation: no {setting} from {values[0]} to {values[-1]} bound — "
        f"{BINDS[setting]} reached at most {fullest:.0%} (a limit binds at "
        f"≥ {BIND_SHARE:.0%}), and every candidate ran within noise of the best "
        f"({min(throughputs):.1f}–{max(throughputs):.1f} msg/s). The sweep did not ask "
        "the question: raise the rate or the scale until a limit binds (a window binds when "
        "rate × confirm latency approaches it; `flowdeck run --autotune rate` finds the "
        "rate this broker sustains)"
    )


def _visibly_capped(point: SweepPoint) -> bool:
    return point.achieved is not None and f"{point.achieved:.1f}" != f"{point.throughput:.1f}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"


def rules() -> tuple[str, ...]:
    """How a sweep's recommendation is chosen, with the constants it uses: what every report
    and the docs quote after the verdict rules."""
    return (
        f"recommended setting: candidates are phases whose verdict judges capacity "
        f"(sustainable, back-pressured or throttled by credit flow) and whose e2e p99 is at "
        f"most max({P99_FACTOR:g} × the lowest candidate p99, it + {P99_SLACK_MS:g} ms) "
        f"(and within --max-p99-ms when given); throughput is the mean consume rate capped "
        f"at the phase's target (above it is a backlog, not capacity); the recommendation is "
        f"the smallest value within {THROUGHPUT_TOLERANCE:.0%} of the best candidate's "
        "throughput",
        f"no recommendation when nothing bound: pending confirms (in-flight) or unacked "
        f"messages (prefetch) stayed below {BIND_SHARE:.0%} of every window and every "
        "candidate ran within noise of the best: the sweep did not ask the question",
    )


@dataclass(frozen=True, slots=True)
class RatePoint:
    """A phase of a rate search: the total target it ran at (msg/s), the per-publisher rate
    setting, its verdict and e2e p99 (ms)."""

    target: float
    rate: float
    verdict: Verdict
    p99_ms: float | None
    label: str = ""

    def sustained(self, max_p99_ms: float | None = None) -> bool:
        """Held the rate: target reached, consumers kept up, depth flat (``sustainable``),
        and within the p99 bound when one is given."""
        if self.verdict is not Verdict.SUSTAINABLE:
            return False
        return max_p99_ms is None or (self.p99_ms is not None and self.p99_ms <= max_p99_ms)


@dataclass(frozen=True, slots=True)
class Capacity:
    """The highest total rate a run's phases sustained, and why (None: none sustained)."""

    rate: float | None
    per_publisher: float | None
    reasoning: tuple[str, ...]
    #: The lowest rate that did not hold, when one was tried.
    broke_at: float | None = None


def capacity(points: Sequence[RatePoint], max_p99_ms: float | None = None) -> Capacity:
    """The capacity a rate search found: the highest target rate whose phase was sustainable
    (and within ``max_p99_ms``); the lowest rate above it that failed says where it broke."""
    if not points:
        return Capacity(None, None, ("no phases with a target rate",))
    reasoning = [
        "capacity: the highest total rate whose phase was sustainable (target reached, "
        "consumers kept up, depth flat)"
        + (f" with e2e p99 ≤ {max_p99_ms:g} ms" if max_p99_ms is not None else "")
    ]
    for point in sorted(points, key=lambda p: p.target):
        if not (point.verdict.judged_capacity or point.verdict is Verdict.OVERLOADED):
            reasoning.append(
                f"{point.target:.0f} msg/s ({point.label or f'rate={point.rate:g}'}): "
                f"set aside ({point.verdict.value})"
            )
            continue
        kept = point.sustained(max_p99_ms)
        why = point.verdict.value
        if point.verdict is Verdict.SUSTAINABLE and not kept:
            why = f"p99 {_ms(point.p99_ms)} is above {max_p99_ms:g} ms"
        reasoning.append(
            f"{point.target:.0f} msg/s ({point.label or f'rate={point.rate:g}'}): "
            + ("held" if kept else f"did not hold ({why})")
        )
    # Only phases that judged the rate count: a backlog being drained, a catch-up or a phase
    # too short to judge says nothing of it.
    points = [p for p in points if p.verdict.judged_capacity or p.verdict is Verdict.OVERLOADED]
    held = [p for p in points if p.sustained(max_p99_ms)]
    if not points:
        reasoning.append("no phase judged a rate: nothing to say")
        return Capacity(None, None, tuple(reasoning))
    if not held:
        reasoning.append("no rate held: the broker's capacity for this spec is below the lowest")
        return Capacity(None, None, tuple(reasoning), min(p.target for p in points))
    best = max(held, key=lambda p: p.target)
    above = [p.target for p in points if p.target > best.target and not p.sustained(max_p99_ms)]
    broke = min(above, default=None)
    reasoning.append(
        f"capacity {best.target:.0f} msg/s ({best.rate:g} per publisher)"
        + (f"; it broke at {broke:.0f} msg/s" if broke is not None else "; nothing above it failed")
    )
    return Capacity(best.target, best.rate, tuple(reasoning), broke)
