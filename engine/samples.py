"""Latency samples gathered on the hot path and folded into HDR histograms once a second.

Recording into an ``HdrHistogram`` costs microseconds per value in Python; the hot path
only appends raw nanosecond latencies to typed arrays (tens of nanoseconds), and
:func:`fold` turns an interval's worth into histogram counts with numpy: values are cut to
the histogram's own bucket resolution first, so one ``record_value`` per distinct bucket
gives exactly the histogram that recording every value would.
"""

from __future__ import annotations

from array import array

import numpy as np
from hdrh.histogram import HdrHistogram

from flowdeck.engine.latency import HIGHEST_US, LOWEST_US, SIGNIFICANT_DIGITS

#: Values below 2**_EXACT_BITS µs have their own bucket at 3 significant digits.
_EXACT_BITS = 11 if SIGNIFICANT_DIGITS == 3 else 64


class LatencySamples:
    """Raw latencies in nanoseconds, from the actual and from the intended send time."""

    __slots__ = ("actual", "intended")

    def __init__(self) -> None:
        self.actual = array("q")
        self.intended = array("q")


def fold(samples: array[int], histogram: HdrHistogram) -> int:
    """Record ``samples`` (ns) into ``histogram`` (µs), empty the array; returns the count."""
    count = len(samples)
    if not count:
        return 0
    micros = np.frombuffer(samples, dtype=np.int64) // 1000
    micros = np.clip(micros, LOWEST_US, HIGHEST_US)
    exponent = np.frexp(micros.astype(np.float64))[1]
    shift = np.maximum(exponent - _EXACT_BITS, 0)
    values, counts = np.unique((micros >> shift) << shift, return_counts=True)
    for value, times in zip(values.tolist(), counts.tolist(), strict=True):
        histogram.record_value(value, times)
    del samples[:]
    return count
