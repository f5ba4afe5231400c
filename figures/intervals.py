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

:func:`interval_maxima` is pure Python over rows, the report's only use of it so far; the
report's table of it is ``spark_reports.intervals``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

Row = dict[str, Any]

#: The percentiles taken over each interval, as the write-up's tables give them.
INTERVAL_PERCENTILES: tuple[tuple[str, float], ...] = (("p75", 75.0), ("p95", 95.0), ("p99", 99.0))


def interval_maxima(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, ...], Row]:
    """Per (session, phase, kind, basis), the largest of the kept intervals' percentiles.

    ``rows``: one per interval, with ``session``, ``phase``, ``interval`` (its number in the
    phase), ``interval_s`` (the interval length asked for), ``kind``, ``basis``,
    ``seconds`` (the seconds of the interval that had messages) and a value per
    :data:`INTERVAL_PERCENTILES` (µs). The result's rows carry ``intervals`` (how many
    were kept), ``interval_s``, and ``p75_max``, ``p95_max``, ``p99_max`` (µs), with
    ``p99_at`` the number of the interval whose p99 is the largest."""
    grouped: dict[tuple[Any, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["session"], row["phase"], row["kind"], row["basis"])].append(row)
    out: dict[tuple[Any, ...], Row] = {}
    for key, intervals in grouped.items():
        length = int(intervals[0]["interval_s"])
        kept = [r for r in intervals if 2 * int(r["seconds"]) >= length]
        if not kept:
            kept = [max(intervals, key=lambda r: (int(r["seconds"]), -int(r["interval"])))]
        figure: Row = {"intervals": len(kept), "interval_s": length}
        for name, _ in INTERVAL_PERCENTILES:
            values = [r for r in kept if r.get(name) is not None]
            top = max(values, key=lambda r: (r[name], -int(r["interval"])), default=None)
            figure[f"{name}_max"] = None if top is None else top[name]
            if name == "p99":
                figure["p99_at"] = None if top is None else int(top["interval"])
        out[key] = figure
    return out
