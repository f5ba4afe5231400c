"""Latency over intervals: per phase, the most any interval's p75, p95 and p99 reached.

The low-latency write-up reports PerfTest's "max 99th/95th/75th" over 15 s intervals (its
``--interval 15``): each interval's percentiles from that interval's latencies alone, then
the largest over the run. A run's ``interval`` (RunSpec, or PerfTest's ``--interval`` in
``--perftest``) sets the length here; the report's Spark job
(``measure.interval_percentiles``) takes each interval's percentiles from the merged
histograms of its seconds, and :func:`interval_maxima` keeps the largest per phase.

Intervals start at each phase's first second, so no interval mixes two settings; the last
interval of a phase is usually shorter. An interval with fewer than half the interval's
seconds is left out (a p99 over a few seconds' messages is not an interval's), unless the
phase has no longer one: then its longest stands for the phase.

:func:`interval_table` is the report's table of ``figures.intervals.interval_maxima``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flowdeck.figures.stats import Row
from flowdeck.spark_reports.tables import Cell, Table

if TYPE_CHECKING:
    from flowdeck.spark_reports.figures import SessionFigures

#: The latency the interval table shows: end to end from the actual send, as PerfTest's.
INTERVAL_LATENCY = ("e2e", "actual")
INTERVAL_COLUMNS = (
    "phase", "label", "intervals", "max p99", "max p95", "max p75", "whole-phase p99",
)  # fmt: skip


def interval_table(figures: SessionFigures, maxima: Mapping[tuple[Any, ...], Row]) -> Table:
    """Per load phase of the run (not the drain), the most its intervals' e2e p99, p95 and
    p75 reached: the low-latency write-up's "max 99th / 95th / 75th" columns, a row per
    phase."""
    kind, basis = INTERVAL_LATENCY
    rows: list[tuple[Cell, ...]] = []
    length: int | None = None
    for p in figures.phases:
        found = maxima.get((figures.session.key, p.phase.index, kind, basis))
        if found is None or p.is_drain:  # after publishing stopped: no load to judge
            continue
        length = found["interval_s"]
        rows.append(
            (
                p.phase.index,
                p.phase.label,
                found["intervals"],
                *(_ms(found[f"{name}_max"]) for name in ("p99", "p95", "p75")),
                p.latency_ms(INTERVAL_LATENCY, "p99"),
            )
        )
    shown = f"{length} s" if length is not None else "the run's"
    return Table(
        name=f"{figures.session.key}-intervals",
        title=f"{figures.session.title}: latency over {shown} intervals, the most per phase (ms)",
        columns=INTERVAL_COLUMNS,
        rows=tuple(rows),
        note="e2e latency from the actual send. Each interval's percentiles come from its "
        "own latencies (the workers' histograms of its seconds merged); max = the largest "
        "over the phase's intervals, as PerfTest's --interval and the low-latency "
        "write-up's 'max 99th/95th/75th'. Intervals start at each phase's first second; "
        "one with fewer than half the interval's seconds is left out unless the phase has "
        "no longer one. The run's interval is its spec's (flowdeck run --interval N).",
    )


def _ms(value_us: Any) -> float | None:
    return None if value_us is None else value_us / 1000
