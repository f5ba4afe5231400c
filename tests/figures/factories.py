"""Hand-made figures for tests of what reads them (thresholds, the JSON summary, tables):
the values ``figures.run`` would compute, set directly."""

from __future__ import annotations

from typing import Any

from flowdeck.figures import PhaseFigures, RunFigures, Verdict
from flowdeck.figures.phases import Phase

START_US = 1_000_000_000


def phase(
    index: int,
    label: str,
    *,
    p99: float = 5.0,
    consume: float = 1000.0,
    drain: bool = False,
    seconds: int = 5,
    start_s: float | None = None,
    verdict: Verdict | None = Verdict.SUSTAINABLE,
    **client: Any,
) -> PhaseFigures:
    """A phase of ``seconds`` at ``consume`` msg/s (publish and confirm alike), its e2e p99
    ``p99`` ms (p50 a fifth of it); ``client`` adds or replaces client figures."""
    begin = start_s if start_s is not None else index * float(seconds)
    figures: dict[str, Any] = {
        "seconds": seconds,
        "target_rate": None if drain else 1000.0,
        **{f"{rate}_rate_mean": consume for rate in ("publish", "confirm", "consume")},
        **{f"{rate}_rate_sd": 1.0 for rate in ("publish", "confirm", "consume")},
        **{f"{rate}_rate_min": consume - 5 for rate in ("publish", "confirm", "consume")},
        "pending_confirms_mean": 3.0,
        "pending_confirms_max": 9,
        "unacked_mean": 0.0,
        "unacked_max": 0,
        "blocked_s": 0,
        "paused_s": 0,
        "inflight": 1000,
        "prefetch": 1000,
        "ack_every": 1,
        "rate": 1000.0,
        "publishers": 1,
        "consumers": 1,
        **client,
    }
    us = round(p99 * 1000)
    latency = {
        ("e2e", "actual"): {
            "count": 5000, "p50": us // 5, "p75": us // 3, "p95": us // 2, "p99": us,
            "p999": us * 2, "max": us * 3,
        }
    }  # fmt: skip
    begin_us = START_US + round(begin * 1e6)
    return PhaseFigures(
        session="",
        phase=Phase(index, label, begin_us, begin_us + seconds * 1_000_000, begin_us,
                    begin_us + seconds * 1_000_000, drain),
        start_s=begin,
        duration_s=float(seconds),
        client=figures,
        broker={},
        latency=latency,
        verdict=Verdict.DRAIN if drain else verdict,
        reason="",
    )  # fmt: skip


def run(*phases: PhaseFigures) -> RunFigures:
    """The phases as a run's figures (no sweeps)."""
    return RunFigures(
        key="",
        start_us=START_US,
        phases=tuple(phases),
        sweeps=(),
        whole={},
        whole_latency={},
        duration_s=sum(p.duration_s or 0.0 for p in phases),
        fan_out=1,
        active_recorded=True,
    )
