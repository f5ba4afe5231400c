"""The seed write-up's conclusions as data, and each checked against a matrix's runs.

The write-up our users redo ("Quorum Queues and Flow Control", ``seeds/``) states, per
benchmark, what each set-up did: mirrored queues without confirms fell apart, confirms
with a low in-flight limit kept latency low, the multiple flag helped a little... Each
:class:`Claim` is one such sentence, tied to the preset (or presets) of ``flowdeck run
--matrix`` that redo it and to one check: a pure function of the runs' figures
(``figures.run``), judged by the same verdict rules as everything else. A matrix's report
prints a row per claim: what the seed says, what happened here, whether it agrees (fully,
partly, not at all) and the figure that decides it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from flowdeck.figures.run import SWEEP_LATENCY, PhaseFigures, RunFigures, load_phases
from flowdeck.figures.verdict import Verdict

#: Latency the seed calls "sub-second".
SUB_SECOND_MS = 1000.0
#: A latency "rises" with the limit when the highest limit's p99 is at least this many
#: times the lowest's; "partly" when it rose at all (above noise).
RISES = 2.0
RISES_AT_ALL = 1.2
#: The multiple flag "helps" when the multi-ack sweep's best throughput beats the plain
#: sweep's by more than this share, or its worst p99 is this much lower.
HELPS = 0.05


class Agreement(StrEnum):
    AGREES = "agrees"
    PARTLY = "partly"
    DISAGREES = "disagrees"
    NOT_RUN = "not run here"


@dataclass(frozen=True, slots=True)
class Finding:
    """What a check found: the agreement, what happened here in words, and the figure
    that decided it."""

    agreement: Agreement
    here: str
    deciding: str


Runs = Mapping[str, RunFigures]
Check = Callable[[Runs, Sequence[str]], Finding]


@dataclass(frozen=True, slots=True)
class Claim:
    """One of the seed's conclusions: the benchmark, the presets it speaks of (the runs of
    ``--matrix``), its words and how it is checked."""

    benchmark: int
    presets: tuple[str, ...]
    says: str
    check: Check

    def judge(self, runs: Runs) -> Finding:
        missing = [p for p in self.presets if p not in runs]
        if missing:
            return Finding(Agreement.NOT_RUN, f"no run of {', '.join(missing)}", "")
        return self.check(runs, self.presets)


def _p99(phase: PhaseFigures) -> float | None:
    return phase.p99_ms


def _whole_p99(run: RunFigures) -> float | None:
    row = run.whole_latency.get(SWEEP_LATENCY)
    return None if not row or row.get("p99") is None else float(row["p99"]) / 1000


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f} ms"


def _rates(phase: PhaseFigures) -> str:
    return (
        f"publish {phase.figure('publish_rate_mean'):,.0f}, consume "
        f"{phase.figure('consume_rate_mean'):,.0f} msg/s"
    )


def keeps_up(runs: Runs, presets: Sequence[str]) -> Finding:
    """The load is within capacity: target matched, consumers keep up, latency
    sub-second."""
    run = runs[presets[0]]
    phases = load_phases(run.phases)
    overloaded = [p for p in phases if p.verdict is Verdict.OVERLOADED]
    p99 = _whole_p99(run)
    sub_second = p99 is not None and p99 < SUB_SECOND_MS
    deciding = f"whole-run e2e p99 {_ms(p99)}; verdicts " + ", ".join(
        sorted({p.verdict.value for p in phases if p.verdict is not None})
    )
    if overloaded:
        return Finding(Agreement.DISAGREES, f"overloaded: {overloaded[0].reason}", deciding)
    if not sub_second:
        return Finding(Agreement.PARTLY, "kept up, but latency was not sub-second", deciding)
    return Finding(Agreement.AGREES, "kept up, sub-second latency", deciding)


def falls_behind(runs: Runs, presets: Sequence[str]) -> Finding:
    """Past capacity without back pressure: publish exceeds consume, queues fill, latency
    climbs (or messages wait before the queues, held in credit flow)."""
    run = runs[presets[0]]
    phases = load_phases(run.phases)
    overloaded = [p for p in phases if p.verdict is Verdict.OVERLOADED]
    throttled = [p for p in phases if p.verdict is Verdict.THROTTLED]
    p99 = _whole_p99(run)
    deciding = f"whole-run e2e p99 {_ms(p99)}"
    if overloaded:
        phase = overloaded[0]
        deciding = f"{_rates(phase)}; {deciding}"
        if p99 is not None and p99 >= SUB_SECOND_MS:
            return Finding(Agreement.AGREES, f"overloaded: {phase.reason}", deciding)
        return Finding(
            Agreement.PARTLY, f"overloaded but latency stayed under 1 s: {phase.reason}", deciding
        )
    if throttled:
        return Finding(
            Agreement.PARTLY,
            f"held back by credit flow instead (messages waited before the queues): "
            f"{throttled[0].reason}",
            deciding,
        )
    return Finding(Agreement.DISAGREES, "kept up: this broker was not past capacity", deciding)


def _swept(run: RunFigures) -> list[PhaseFigures]:
    """A sweep's load phases in in-flight order (one per value: the last phase at it)."""
    by_value: dict[int, PhaseFigures] = {}
    for phase in load_phases(run.phases):
        value = phase.setting("inflight")
        if value is not None:
            by_value[value] = phase
    return [by_value[v] for v in sorted(by_value)]


def latency_rises(runs: Runs, presets: Sequence[str]) -> Finding:
    """Latency rises with the in-flight limit (a low limit gives the lowest)."""
    phases = _swept(runs[presets[0]])
    if len(phases) < 2:
        return Finding(Agreement.NOT_RUN, "the run swept no in-flight limit", "")
    low, high = phases[0], phases[-1]
    low_p99, high_p99 = _p99(low), _p99(high)
    deciding = (
        f"p99 at in-flight {low.setting('inflight')}: {_ms(low_p99)}, at "
        f"{high.setting('inflight')}: {_ms(high_p99)}"
    )
    if low_p99 is None or high_p99 is None:
        return Finding(Agreement.NOT_RUN, "no latency measured", deciding)
    if high_p99 >= RISES * low_p99:
        return Finding(Agreement.AGREES, "latency rose with the limit", deciding)
    if high_p99 >= RISES_AT_ALL * low_p99:
        return Finding(Agreement.PARTLY, "latency rose a little with the limit", deciding)
    return Finding(Agreement.DISAGREES, "latency did not rise with the limit", deciding)


def confirms_hold_it_back(runs: Runs, presets: Sequence[str]) -> Finding:
    """With confirms and a low in-flight limit the publishers are held back and consumers
    keep up, where the same load without confirms fell behind."""
    without, sweep = runs[presets[0]], runs[presets[1]]
    phases = _swept(sweep)
    if not phases:
        return Finding(Agreement.NOT_RUN, "the sweep has no load phases", "")
    low = phases[0]
    fell = any(p.verdict is Verdict.OVERLOADED for p in load_phases(without.phases))
    kept = low.verdict is not None and low.verdict.judged_capacity
    deciding = (
        f"in-flight {low.setting('inflight')}: {low.verdict.value if low.verdict else 'n/a'}, "
        f"{_rates(low)}, p99 {_ms(_p99(low))}; without confirms: "
        + ("overloaded" if fell else "kept up")
    )
    if kept and fell:
        return Finding(
            Agreement.AGREES,
            "confirms held publishers back where no confirms fell behind",
            deciding,
        )
    if kept:
        return Finding(
            Agreement.PARTLY, "a low limit kept up, but so did the run without confirms", deciding
        )
    return Finding(Agreement.DISAGREES, "even the lowest limit did not keep up", deciding)


def high_limit_overloads(runs: Runs, presets: Sequence[str]) -> Finding:
    """At the highest limits (100-200 % of the target rate) the queues start filling."""
    phases = _swept(runs[presets[0]])
    if len(phases) < 2:
        return Finding(Agreement.NOT_RUN, "the run swept no in-flight limit", "")
    high = phases[-1]
    deciding = f"in-flight {high.setting('inflight')}: {_rates(high)}, p99 {_ms(_p99(high))}"
    if high.verdict is Verdict.OVERLOADED:
        return Finding(Agreement.AGREES, f"overloaded: {high.reason}", deciding)
    high_p99, low_p99 = _p99(high), _p99(phases[0])
    if high_p99 is not None and low_p99 is not None and high_p99 >= RISES * low_p99:
        climbed = "latency climbed at the highest limit, queues did not fill"
        return Finding(Agreement.PARTLY, climbed, deciding)
    return Finding(Agreement.DISAGREES, "the highest limit kept up", deciding)


def multiple_flag_helps(runs: Runs, presets: Sequence[str]) -> Finding:
    """The multiple flag (an ack every N) helps a little: more throughput or lower worst
    latency than the same sweep acking each message. Only steps whose verdict speaks of
    their setting count: a step catching up on what an earlier one held back, or draining
    its backlog, moves the backlog's messages, not the setting's."""

    def judged(run: RunFigures) -> list[PhaseFigures]:
        phases = _swept(run)
        kept = [p for p in phases if p.verdict is not None and p.verdict.judged_capacity]
        return kept or phases

    plain, multi = judged(runs[presets[0]]), judged(runs[presets[1]])
    if not plain or not multi:
        return Finding(Agreement.NOT_RUN, "a sweep has no load phases", "")

    def best(phases: list[PhaseFigures]) -> float:
        return max(p.figure("consume_rate_mean") for p in phases)

    def worst(phases: list[PhaseFigures]) -> float:
        return max((_p99(p) or 0.0) for p in phases)

    gain = best(multi) / best(plain) - 1 if best(plain) > 0 else 0.0
    calmer = 1 - worst(multi) / worst(plain) if worst(plain) > 0 else 0.0
    deciding = (
        f"best msg/s {best(plain):,.0f} → {best(multi):,.0f} ({gain:+.0%}), worst p99 "
        f"{_ms(worst(plain))} → {_ms(worst(multi))}"
    )
    if gain > HELPS or calmer > HELPS:
        return Finding(Agreement.AGREES, "acking with the multiple flag helped", deciding)
    if gain > -HELPS and calmer > -HELPS:
        return Finding(Agreement.PARTLY, "no difference beyond noise", deciding)
    return Finding(Agreement.DISAGREES, "acking with the multiple flag did worse", deciding)


def reaches_target(runs: Runs, presets: Sequence[str]) -> Finding:
    """The run reached its target rate (at the highest in-flight limit for a sweep)."""
    run = runs[presets[0]]
    phases = _swept(run) or load_phases(run.phases)
    if not phases:
        return Finding(Agreement.NOT_RUN, "no load phases", "")
    phase = phases[-1]
    target = phase.target_rate
    consumed = phase.figure("consume_rate_mean")
    deciding = f"{_rates(phase)} against a target of {target or 0:,.0f}"
    if target and consumed >= 0.95 * target and phase.verdict is not Verdict.OVERLOADED:
        return Finding(Agreement.AGREES, "reached the target rate", deciding)
    if target and consumed >= 0.8 * target:
        return Finding(Agreement.PARTLY, "came within 20 % of the target", deciding)
    return Finding(Agreement.DISAGREES, "fell well short of the target", deciding)


CLAIMS: tuple[Claim, ...] = (
    Claim(1, ("bench1-mirrored-noconfirms",),
          "mirrored without confirms: target matched, sub-second latency", keeps_up),
    Claim(1, ("bench1-quorum-noconfirms",),
          "quorum without confirms: target matched, latency sub-second", keeps_up),
    Claim(1, ("bench1-sweep",),
          "quorum with confirms: latency rises with the in-flight limit (a low limit gives "
          "the best latency)", latency_rises),
    Claim(2, ("bench2-mirrored-noconfirms",),
          "mirrored without confirms fell apart: publish exceeds consume, queues fill, "
          "latencies skyrocket", falls_behind),
    Claim(2, ("bench2-mirrored-noconfirms", "bench2-mirrored-sweep"),
          "mirrored with confirms: a low in-flight limit applies effective back pressure, "
          "low latency", confirms_hold_it_back),
    Claim(2, ("bench2-mirrored-sweep",),
          "mirrored with confirms: as the limit rises, latency shoots up", latency_rises),
    Claim(2, ("bench2-mirrored-sweep", "bench2-mirrored-multi-sweep"),
          "mirrored: the multiple flag helps, but not strongly", multiple_flag_helps),
    Claim(2, ("bench2-quorum-noconfirms",),
          "quorum without confirms achieved the target rate: back pressure not needed",
          reaches_target),
    Claim(2, ("bench2-sweep",),
          "quorum with confirms reached the target at the highest in-flight limit",
          reaches_target),
    Claim(2, ("bench2-sweep", "bench2-multi-sweep"),
          "quorum: a mild benefit from the multiple flag", multiple_flag_helps),
    Claim(3, ("bench3-quorum-noconfirms",),
          "within capacity: target matched without confirms", keeps_up),
    Claim(3, ("bench3-sweep",), "latency creeps up with the in-flight limit", latency_rises),
    Claim(4, ("bench4-mirrored-noconfirms",),
          "mirrored without confirms: consumers can't keep up, latencies of minutes",
          falls_behind),
    Claim(4, ("bench4-quorum-noconfirms",),
          "quorum without confirms: consumers not keeping up, queues filling", falls_behind),
    Claim(4, ("bench4-quorum-noconfirms", "bench4-sweep"),
          "with confirms consumers keep up: the publishers are rate limited by their "
          "in-flight limit", confirms_hold_it_back),
    Claim(4, ("bench4-sweep",),
          "quorum with confirms: at 200 % of the target the queues start filling",
          high_limit_overloads),
    Claim(4, ("bench4-mirrored-sweep", "bench4-mirrored-multi-sweep"),
          "mirrored: the multiple flag definitely helps", multiple_flag_helps),
    Claim(5, ("bench5-mirrored-noconfirms",),
          "mirrored without confirms: overwhelmed, throughput plummets", falls_behind),
    Claim(5, ("bench5-quorum-noconfirms",),
          "quorum without confirms: TCP back pressure was not enough to stop overload",
          falls_behind),
    Claim(5, ("bench5-sweep",),
          "quorum with confirms: things go wrong at 100 % and really bad at 200 %",
          high_limit_overloads),
)  # fmt: skip


def claims_of(benchmarks: Sequence[int]) -> list[Claim]:
    """The claims of these benchmarks, in the write-up's order."""
    return [c for c in CLAIMS if c.benchmark in benchmarks]


def preset_benchmark(name: str) -> int | None:
    """The seed benchmark a preset name belongs to (``bench2-sweep``: 2), or None."""
    head = name.split("-", 1)[0]
    if head.startswith("bench") and head[5:].isdigit():
        return int(head[5:])
    return None
