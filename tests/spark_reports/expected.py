"""Independent computation of the report's figures from the rows a synthetic session wrote
(plain Python, no Spark), following the rules stated in ``docs/reports.md``."""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
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


def recompute_from_parquet(
    path: Path, run_start: float, boundaries: list[float]
) -> list[dict[str, Any]]:
    """Per phase, every rate, client count and e2e latency figure of a session, read back
    from its Parquet files with pyarrow and merged with HdrHistogram — no flowdeck code —
    by the rules ``docs/reports.md`` states: a row's second holds the middle of its
    one-second interval (``floor(ts - 0.5 s - start)``), a second belongs to the phase in
    force at its middle, rates are summed over workers per second, client counts are the
    largest any worker recorded."""
    client = pq.read_table(path / "client").to_pylist()
    latency = pq.read_table(path / "latency").to_pylist()

    def second(row: dict[str, Any]) -> int:
        return math.floor(unix(row) - 0.5 - run_start)

    def phase(sec: int) -> int:
        return bisect.bisect_right(boundaries, run_start + sec + 0.5)

    figures: list[dict[str, Any]] = []
    for index in range(len(boundaries) + 1):
        rows = [r for r in client if r["interval_s"] >= 0.5 and phase(second(r)) == index]
        result: dict[str, Any] = {
            "publishers": max(r["publishers"] for r in rows),
            "consumers": max(r["consumers"] for r in rows),
        }
        for column, name in (("published", "publish"), ("confirmed", "confirm"),
                             ("consumed", "consume")):  # fmt: skip
            per_second: dict[int, float] = defaultdict(float)
            for r in rows:
                per_second[second(r)] += r[column] / r["interval_s"]
            values = list(per_second.values())
            result[f"{name} mean"] = statistics.fmean(values)
            result[f"{name} sd"] = statistics.pstdev(values)
            result[f"{name} min"] = min(values)
        for kind, basis in (("e2e", "actual"), ("e2e", "intended"), ("confirm", "actual")):
            merged = hdr_merged([r for r in latency if phase(second(r)) == index], kind, basis)
            result[f"{kind} {basis} p99"] = merged.get_value_at_percentile(99)
            result[f"{kind} {basis} count"] = merged.get_total_count()
        figures.append(result)
    return figures
