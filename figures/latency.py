"""Latency percentiles at one precision, wherever a phase's latency is shown.

Every latency a phase shows (the live per-setting table, the autopilot, the replay, the run
summary, ``flowdeck sessions show`` and the Spark report) is computed here from the same
input: bucket counts ``value_us → count`` as the session records them (HDR buckets at the
recording's precision, each named by its highest equivalent value). The q-th percentile is
the first value whose running count reaches ``max(1, int(q × total / 100 + 0.5))``: what an
HDR histogram merged from those buckets reports, so merging any rows first (over workers,
seconds or Spark partitions) and then taking percentiles gives the same figure everywhere.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The percentiles every latency figure carries (p99.9: the seed's readers and PerfTest
#: users expect it).
QUANTILES: tuple[float, ...] = (50.0, 75.0, 95.0, 99.0, 99.9)
#: Their column names: ``p50`` ... ``p999``.
QUANTILE_NAMES: tuple[str, ...] = ("p50", "p75", "p95", "p99", "p999")

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Latency percentiles in milliseconds over some window; ``count`` samples."""

    count: int
    p50: float
    p75: float
    p95: float
    p99: float
    p999: float
    max: float

    def quantile(self, name: str) -> float:
        """``p50`` ... ``p999`` or ``max`` by name."""
        value: float = getattr(self, name)
        return value


def percentile(buckets: Sequence[tuple[int, int]], q: float, total: int) -> int | None:
    """The first bucket value (buckets sorted by value) whose running count reaches
    ``max(1, int(q × total / 100 + 0.5))``: what an HDR histogram holding them reports."""
    wanted = max(1, int(float(q) * float(total) / 100.0 + 0.5))
    running = 0
    for value, count in buckets:
        running += count
        if running >= wanted:
            return value
    return None


def percentiles_of(counts: Mapping[int, int] | Iterable[tuple[int, int]]) -> Percentiles | None:
    """The percentiles (ms) of bucket counts in microseconds; None when there are none."""
    pairs = counts.items() if isinstance(counts, Mapping) else counts
    merged: Counter[int] = Counter()
    for value, count in pairs:
        if count > 0:
            merged[int(value)] += int(count)
    if not merged:
        return None
    ordered = sorted(merged.items())
    total = sum(merged.values())
    values = [percentile(ordered, q, total) or 0 for q in QUANTILES]
    p50, p75, p95, p99, p999 = (v / 1000 for v in values)
    return Percentiles(
        count=total, p50=p50, p75=p75, p95=p95, p99=p99, p999=p999, max=ordered[-1][0] / 1000
    )


def merge_buckets(into: Counter[int], values: Iterable[int], counts: Iterable[int]) -> None:
    """Add bucket rows (parallel ``values`` and ``counts``) to ``into``."""
    for value, count in zip(values, counts, strict=True):
        if count > 0:
            into[int(value)] += int(count)


def latency_percentiles(buckets: Iterable[Row], keys: Sequence[str]) -> list[Row]:
    """Count, p50/p75/p95/p99/p99.9 and max (µs) per ``keys`` × kind × basis, merged exactly
    from bucket rows (``value_us``, ``count``): counts of one value are summed first."""
    merged: dict[tuple[Any, ...], Counter[int]] = defaultdict(Counter)
    for row in buckets:
        if row["count"] > 0:
            key = (*(row[k] for k in keys), row["kind"], row["basis"])
            merged[key][row["value_us"]] += row["count"]
    result = []
    for key, counts in merged.items():
        ordered = sorted(counts.items())
        total = sum(counts.values())
        figures: Row = dict(zip([*keys, "kind", "basis"], key, strict=True))
        figures["count"] = total
        for q, name in zip(QUANTILES, QUANTILE_NAMES, strict=True):
            figures[name] = percentile(ordered, q, total)
        figures["max"] = ordered[-1][0]
        result.append(figures)
    return result
