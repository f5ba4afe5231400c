"""Independent computation of the report's figures from the rows a synthetic session wrote
(plain Python, no Spark), following the rules stated in ``docs/reports.md``."""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from hdrh.histogram import HdrHistogram

from flowdeck.engine.latency import HIGHEST_US, LOWEST_US, SIGNIFICANT_DIGITS
from tests.spark_reports.synthetic import SyntheticSession

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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


def percentile_from_buckets(buckets: list[tuple[int, int]], percentile: float) -> int | None:
    """HDR's percentile over bucket rows, written out here as the oracle (the report's own
    is ``figures.latency``)."""
    merged: dict[int, int] = defaultdict(int)
    for value, count in buckets:
        merged[value] += count
    total = sum(merged.values())
    if total == 0:
        return None
    target = max(1, int(min(percentile, 100.0) * total / 100 + 0.5))
    running = 0
    for value in sorted(merged):
        running += merged[value]
        if running >= target:
            return value
    return max(merged)


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
    """Per phase, the per-second rate figures (sd, min; the means are :func:`active_rates`'),
    client counts and e2e latency figures of a session, read back
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
            result[f"{name} per-second sd"] = statistics.pstdev(values)
            result[f"{name} per-second min"] = min(values)
        for kind, basis in (("e2e", "actual"), ("e2e", "intended"), ("confirm", "actual")):
            merged = hdr_merged([r for r in latency if phase(second(r)) == index], kind, basis)
            result[f"{kind} {basis} p99"] = merged.get_value_at_percentile(99)
            result[f"{kind} {basis} count"] = merged.get_total_count()
        figures.append(result)
    return figures


def micros(row: dict[str, Any]) -> int:
    """A row's ``ts`` as exact integer microseconds since the epoch."""
    return (row["ts"] - EPOCH) // timedelta(microseconds=1)


def active_rates(
    path: Path,
    run_start: float,
    boundaries: list[float],
    spans: dict[str, tuple[float, float]],
) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Per phase and for the whole run: messages, active seconds and msg/s of publish,
    confirm and consume, read back from the session's Parquet files with pyarrow — no
    flowdeck code — by the rule ``docs/reports.md`` states: every client row (short ones
    too) belongs whole to the phase in force at the middle of its run second; a row's active
    time is the part of its interval ``[ts - interval_s, ts]`` inside the span (``spans``:
    first and last unix second per rate); a phase's active time is its rows' summed over
    every worker, divided by the number of workers; msg/s = messages / active time. The
    whole run sums the phases' messages and active times."""
    client = pq.read_table(path / "client").to_pylist()
    start_us = round(run_start * 1e6)
    cuts_us = [round(b * 1e6) for b in boundaries]
    workers = len({r["worker"] for r in client})
    counted = {"publish": "published", "confirm": "confirmed", "consume": "consumed"}
    messages: dict[tuple[int, str], int] = defaultdict(int)
    covered: dict[tuple[int, str], int] = defaultdict(int)
    for row in client:
        end = micros(row)
        begin = end - round(row["interval_s"] * 1e6)
        second = (end - start_us - 500_000) // 1_000_000
        phase = bisect.bisect_right(cuts_us, start_us + second * 1_000_000 + 500_000)
        for name, column in counted.items():
            first, last = (round(t * 1e6) for t in spans[name])
            messages[(phase, name)] += row[column]
            covered[(phase, name)] += max(0, min(end, last) - max(begin, first))
    phases = []
    for phase in range(len(boundaries) + 1):
        figures: dict[str, float] = {}
        for name in counted:
            seconds = covered[(phase, name)] / (workers * 1_000_000)
            figures[f"{name} messages"] = messages[(phase, name)]
            figures[f"{name} active s"] = seconds
            figures[f"{name} mean"] = messages[(phase, name)] / seconds if seconds > 0 else 0.0
        phases.append(figures)
    whole: dict[str, float] = {}
    for name in counted:
        total = sum(p[f"{name} messages"] for p in phases)
        seconds = sum(p[f"{name} active s"] for p in phases)
        whole[f"{name} messages"] = total
        whole[f"{name} active s"] = seconds
        whole[f"{name} mean"] = total / seconds if seconds > 0 else 0.0
    return phases, whole


def bounds_spans(session: SyntheticSession, drain: float | None) -> dict[str, tuple[float, float]]:
    """The spans of a session that kept no active times: publish and confirm from the run's
    start to where publishing stopped (``drain``, else the end), consume to the end."""
    publishing = (session.start, session.end if drain is None else drain)
    return {"publish": publishing, "confirm": publishing, "consume": (session.start, session.end)}
