"""Trends and steadiness of a series: one least-squares slope for every place that asks.

The queue depth's trend in a phase (the verdict's "growing" and "draining", the cockpit's
arrow), the autopilot's "has this step settled" and the report's depth slope are all the
least-squares slope of the standard library (:func:`statistics.linear_regression`) over
the points in question. What a trend says *now* is the slope over the recent window, not
last minus first: a queue that grew to 166k and is draining reads down while it drains.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from enum import StrEnum

#: The recent window a phase's depth trend is taken over, seconds: long enough to span
#: several broker polls (the management API refreshes every 1-5 s), short enough that a
#: queue that turned round reads the way it goes now.
RECENT_S = 15.0
#: A depth moving less than this many messages a second, or less than this share of the
#: message rate through it, is flat.
FLAT_MSG_S = 1.0
FLAT_SHARE = 0.02


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(x, y)`` points; None below two points or with no spread in
    ``x``."""
    if len(points) < 2:
        return None
    xs = [float(x) for x, _ in points]
    if max(xs) - min(xs) <= 0:
        return None
    fit = statistics.linear_regression(xs, [float(y) for _, y in points])
    return float(fit.slope)


def recent(
    points: Sequence[tuple[float, float]], window_s: float = RECENT_S
) -> list[tuple[float, float]]:
    """The points of the last ``window_s`` (by their ``x``, seconds), at least the last two."""
    if not points:
        return []
    last = points[-1][0]
    inside = [p for p in points if p[0] >= last - window_s]
    return inside if len(inside) >= 2 else list(points[-2:])


class Trend(StrEnum):
    UP = "up"
    DOWN = "down"
    FLAT = "flat"


def trend_of(rate: float | None, through: float = 0.0) -> Trend | None:
    """A slope (msg/s) read as up, down or flat: flat within :data:`FLAT_MSG_S` or
    :data:`FLAT_SHARE` of ``through`` (the message rate through the queues)."""
    if rate is None:
        return None
    if abs(rate) <= max(FLAT_MSG_S, FLAT_SHARE * abs(through)):
        return Trend.FLAT
    return Trend.UP if rate > 0 else Trend.DOWN


def variation(rates: Sequence[float]) -> tuple[float, float]:
    """Coefficient of variation and trend (|least-squares slope| × span / mean) of
    per-second ``rates``; both 0 when nothing flowed at all, infinite when the mean is 0
    otherwise."""
    n = len(rates)
    mean = sum(rates) / n
    if mean <= 0:
        return (0.0, 0.0) if all(r == 0 for r in rates) else (math.inf, math.inf)
    cv = statistics.pstdev(rates) / mean
    per_second = slope([(float(x), r) for x, r in enumerate(rates)]) or 0.0
    return cv, abs(per_second) * (n - 1) / mean


#: The window of :func:`sustained_peak`, seconds: what "peak" means wherever one is shown.
PEAK_WINDOW_S = 5


def sustained_peak(rates: Sequence[float], window: int = PEAK_WINDOW_S) -> float | None:
    """The best rate the run held, not its best burst: the highest rate reached in every
    second of ``window`` consecutive seconds (the best window's slowest second). A run
    shorter than the window gives its slowest second."""
    if not rates:
        return None
    if len(rates) <= window:
        return float(min(rates))
    return float(max(min(rates[i : i + window]) for i in range(len(rates) - window + 1)))
