"""Folding raw latency samples gives the histogram recording each value would."""

from __future__ import annotations

import random
from array import array

from flowdeck.engine import latency as hdr
from flowdeck.engine.samples import fold


def test_fold_equals_recording_every_value() -> None:
    rng = random.Random(3)
    values_ns = [int(rng.lognormvariate(13, 2)) for _ in range(20_000)] + [0, 5, 10**13]
    samples = array("q", values_ns)
    folded = hdr.new_histogram()
    assert fold(samples, folded) == len(values_ns)
    assert len(samples) == 0
    direct = hdr.new_histogram()
    for value in values_ns:
        hdr.record(direct, value // 1000)
    assert hdr.bucket_rows(folded) == hdr.bucket_rows(direct)
    assert (folded.total_count, folded.min_value, folded.max_value) == (
        direct.total_count,
        direct.min_value,
        direct.max_value,
    )
    assert hdr.encode(folded) == hdr.encode(direct)
    for percentile in (50, 75, 95, 99, 99.9, 100):
        assert folded.get_value_at_percentile(percentile) == direct.get_value_at_percentile(
            percentile
        )


def test_folding_adds_to_what_the_histogram_holds() -> None:
    rng = random.Random(5)
    first = [int(rng.lognormvariate(14, 1)) for _ in range(3_000)]
    second = [int(rng.lognormvariate(15, 1)) for _ in range(3_000)]
    folded = hdr.new_histogram()
    fold(array("q", first), folded)
    fold(array("q", second), folded)
    direct = hdr.new_histogram()
    for value in first + second:
        hdr.record(direct, value // 1000)
    assert hdr.encode(folded) == hdr.encode(direct)
