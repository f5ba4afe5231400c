"""Latency histograms: HDR histograms in microseconds, four per client snapshot.

Latency is measured two ways (``kind``): end-to-end at the consumer, and publish-to-
confirm at the publisher; each from two send-time ``basis``: the actual send, and the
intended send time on the rate schedule, so time spent blocked on the in-flight window or
on broker flow control shows instead of being hidden (coordinated omission).

Histograms cross process boundaries in HDR's compressed encoding and are stored as
bucket rows ``(value_us, count)`` where ``value_us`` is the bucket's highest equivalent
value. Summing counts per ``value_us`` over any rows and taking the first value whose
running total reaches ``max(1, int(q * total + 0.5))`` gives exactly the percentile HDR
would report for the merged histogram; ``figures.latency`` does that for every per-phase
figure, and the Spark report's per-second chart percentiles in SQL.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from hdrh import codec as hdr_codec
from hdrh.histogram import HdrHistogram
from pyhdrh import decode as decode_varints

# Named here too, where most of the engine imports them from.
from flowdeck.engine.latency_kinds import LATENCY_KEYS as LATENCY_KEYS
from flowdeck.engine.latency_kinds import LatencyKey as LatencyKey
from flowdeck.engine.latency_kinds import LatencyKind as LatencyKind
from flowdeck.engine.latency_kinds import SendBasis as SendBasis

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def values_at_percentiles(
    histogram: HdrHistogram, percentiles: Iterable[float]
) -> dict[float, int]:
    """HdrHistogram's ``get_percentile_to_value_dict``, the same values, from one cumulative
    sum of the counts in numpy: the library walks its 23,552 buckets in Python, some
    milliseconds a histogram, and the cockpit's loop takes several histograms a second."""
    counts = np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len]
    cumulative = np.cumsum(counts)
    values: dict[float, int] = {}
    for percentile in percentiles:
        target = histogram.get_target_count_at_percentile(percentile)
        index = int(np.searchsorted(cumulative, target, side="left"))
        value = histogram.get_value_from_index(min(index, histogram.counts_len - 1))
        values[percentile] = int(
            histogram.get_highest_equivalent_value(value)
            if percentile
            else histogram.get_lowest_equivalent_value(value)
        )
    return values


def record(histogram: HdrHistogram, latency_us: int) -> None:
    """Record one latency, clamped into the histogram's range."""
    histogram.record_value(min(max(latency_us, LOWEST_US), HIGHEST_US))


def encode(histogram: HdrHistogram) -> bytes:
    return bytes(histogram.encode())


def decode(encoded: bytes) -> HdrHistogram:
    return HdrHistogram.decode(encoded)


def merge(encoded: Iterable[bytes]) -> HdrHistogram:
    merged = new_histogram()
    for blob in encoded:
        if blob:
            merged.decode_and_add(blob)
    return merged


def bucket_arrays(histogram: HdrHistogram) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(value_us, count)`` columns for every non-empty bucket, as int64 numpy arrays.

    The same rows as HDR's recorded iterator (value = the bucket's highest equivalent
    value), computed over the counts array in numpy instead of a Python loop: the
    iterator walks all ~23,000 counts per histogram in Python (about 45 ms), far too slow
    for the recorder's four histograms per worker per second.
    """
    relevant = histogram.counts_len
    if histogram.max_value > 0:  # counts past the highest value recorded are all zero
        relevant = min(relevant, histogram.get_counts_array_index(histogram.max_value) + 1)
    counts = np.ctypeslib.as_array(histogram.counts)[:relevant]
    index = np.flatnonzero(counts)
    values = highest_equivalent_values(
        index, histogram.sub_bucket_half_count_magnitude, histogram.unit_magnitude
    )
    return values, counts[index].astype(np.int64)


def highest_equivalent_values(
    index: npt.NDArray[np.intp], sub_bucket_half_count_magnitude: int, unit_magnitude: int
) -> npt.NDArray[np.int64]:
    """HDR's ``get_highest_equivalent_value(get_value_from_index(i))`` for many indexes."""
    index = index.astype(np.int64)
    half_count = 1 << sub_bucket_half_count_magnitude
    # The first bucket holds the whole sub-bucket range, every later one its upper half.
    bucket = (index >> sub_bucket_half_count_magnitude) - 1
    sub_bucket = (index & (half_count - 1)) + half_count
    first = bucket < 0
    sub_bucket[first] -= half_count
    bucket[first] = 0
    shift = bucket + unit_magnitude
    lowest = sub_bucket << shift
    return (lowest + (np.int64(1) << shift) - 1).astype(np.int64)


class BucketDecoder:
    """Encoded histograms straight to bucket rows, without building an HdrHistogram each.

    ``decode`` builds a histogram object (and a fresh 23,552-count array) per call, which
    is most of what turning a worker's four histograms a second into rows costs. This
    decodes the wire format (base64, zlib, HDR's varint payload via hdrh's own C decoder)
    into one reused counts buffer, and clears only the buckets it read. Histograms with
    other settings than ``new_histogram``'s take the ordinary path.
    """

    def __init__(self) -> None:
        reference = new_histogram()
        self._settings = (
            reference.significant_figures,
            reference.lowest_trackable_value,
            reference.highest_trackable_value,
        )
        self._half_magnitude = reference.sub_bucket_half_count_magnitude
        self._unit_magnitude = reference.unit_magnitude
        self._counts_len = reference.counts_len
        self._counts = np.zeros(self._counts_len, dtype=np.uint64)

    def buckets(self, encoded: bytes) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(value_us, count)`` of every non-empty bucket, as :func:`bucket_arrays`."""
        data = zlib.decompress(base64.b64decode(encoded)[hdr_codec.ext_header_size :])
        header = hdr_codec.PayloadHeader.from_buffer_copy(data)
        settings = (
            header.significant_figures,
            header.lowest_trackable_value,
            header.highest_trackable_value,
        )
        v2 = hdr_codec.get_cookie_base(header.cookie) == hdr_codec.V2_ENCODING_COOKIE_BASE
        if settings != self._settings or not v2:
            return bucket_arrays(decode(encoded))
        decoded = decode_varints(
            data,
            hdr_codec.payload_header_size,
            self._counts.ctypes.data,
            self._counts_len,
            self._counts.itemsize,
        )
        if not decoded["total"]:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        counts = self._counts[: decoded["max_nonzero_index"] + 1]
        index = np.flatnonzero(counts)
        found = counts[index].astype(np.int64)
        counts[index] = 0
        return highest_equivalent_values(index, self._half_magnitude, self._unit_magnitude), found


def bucket_rows(histogram: HdrHistogram) -> list[tuple[int, int]]:
    """``(value_us, count)`` for every non-empty bucket, value = highest equivalent value."""
    values, counts = bucket_arrays(histogram)
    return list(zip(values.tolist(), counts.tolist(), strict=True))


#: The precision of recorded latency buckets, and of every per-phase percentile computed
#: live: :func:`coarsen_buckets` maps the live 3-digit buckets onto it (its 256 sub-buckets).
RECORDED_DIGITS = 2


def coarsen_buckets(
    value_us: npt.NDArray[np.int64], count: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """3-digit HDR bucket rows (ascending) as rows of HDR's 2-digit histogram: the
    precision sessions record (:data:`RECORDED_DIGITS`) and every per-phase figure uses.

    A 2-digit histogram (lowest value 1) has 256 sub-buckets: value ``v`` falls in the
    bucket of width ``2**max(0, bit_length(v) - 8)``. Every 3-digit bucket lies inside one
    such bucket, so summing counts per 2-digit bucket is exact.
    """
    _, bit_length = np.frexp(value_us.astype(np.float64))  # exact below 2**53
    shift = np.maximum(bit_length.astype(np.int64) - 8, 0)
    highest = ((value_us >> shift) << shift) + (np.int64(1) << shift) - 1
    if len(highest) == 0:
        return highest, count
    first_of_bucket = np.empty(len(highest), dtype=np.bool_)
    first_of_bucket[0] = True
    np.not_equal(highest[1:], highest[:-1], out=first_of_bucket[1:])
    starts = np.flatnonzero(first_of_bucket)
    return highest[starts], np.add.reduceat(count, starts)


def recorded_buckets(
    encoded: bytes, decoder: BucketDecoder
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """An encoded histogram as the session records it: ``(value_us, count)`` at
    :data:`RECORDED_DIGITS` (a histogram already at that precision comes back unchanged)."""
    return coarsen_buckets(*decoder.buckets(encoded))
