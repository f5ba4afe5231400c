"""Independent computation of the report's figures from the rows a synthetic session wrote
(plain Python, no Spark), following the rules stated in ``docs/reports.md``."""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from typing import Any

from hdrh.histogram import HdrHistogram

from flowdeck.engine.latency import (
    HIGHEST_US,
    LOWEST_US,
    SIGNIFICANT_DIGITS,
    percentile_from_buckets,
)
from tests.spark_reports.synthetic import SyntheticSession


def unix(row: dict[str, Any]) -> float:
    return float(row["ts"].timestamp())


def phase_bounds(session: SyntheticSession) -> list[tuple[float, float]]:
    """(start, end] per phase; the first and last are open towards the run's edges."""
    cuts = [float("-inf"), *session.boundaries, float("inf")]
    return list(itertools.pairwise(cuts))


def rows_in(rows: list[dict[str, Any]], bounds: tuple[float, float]) -> list[dict[str, Any]]:
    return [r for r in rows if bounds[0] < unix(r) <= bounds[1]]


def per_second(rows: list[dict[str, Any]], column: str) -> list[float]:
    seconds: dict[float, float] = defaultdict(float)
    for row in rows:
        seconds[unix(row)] += row[column] / row["interval_s"]
    return [seconds[k] for k in sorted(seconds)]


def rate_stats(rows: list[dict[str, Any]], column: str) -> tuple[float, float, float]:
    values = per_second(rows, column)
    return statistics.fmean(values), statistics.pstdev(values), min(values)


def gauge_stats(rows: list[dict[str, Any]], column: str) -> tuple[float, float]:
    values = per_second([{**r, "interval_s": 1.0} for r in rows], column)
    return statistics.fmean(values), max(values)


def percentiles_us(rows: list[dict[str, Any]], kind: str, basis: str) -> dict[str, int]:
    buckets = [
        (r["value_us"], r["count"]) for r in rows if (r["kind"], r["basis"]) == (kind, basis)
    ]
    result = {f"p{q}": percentile_from_buckets(buckets, q) for q in (50, 75, 95, 99)}
    result["max"] = percentile_from_buckets(buckets, 100)
    result["count"] = sum(c for _, c in buckets)
    return result  # type: ignore[return-value]


def hdr_merged(rows: list[dict[str, Any]], kind: str, basis: str) -> HdrHistogram:
    """An HDR histogram holding every recorded value of the rows (a real merge)."""
    histogram = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
    for r in rows:
        if (r["kind"], r["basis"]) == (kind, basis):
            histogram.record_value(r["value_us"], r["count"])
    return histogram


def least_squares_slope(points: list[tuple[float, float]]) -> float:
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)


def alarm_seconds(session: SyntheticSession, bounds: tuple[float, float]) -> float:
    polls = sorted(session.broker, key=unix)
    total = 0.0
    for index, poll in enumerate(polls):
        begin = unix(poll)
        until = unix(polls[index + 1]) if index + 1 < len(polls) else session.end
        lo, hi = max(begin, bounds[0]), min(until, bounds[1], session.end)
        if poll["mem_alarm"] and hi > lo:
            total += hi - lo
    return total
