"""Interval sets of sequence numbers: exact for any order, compact for the usual one."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from flowdeck.engine.sequences import SequenceSet


def test_in_order_numbers_make_one_range() -> None:
    seen = SequenceSet()
    assert all(seen.add(n) for n in range(10_000))
    assert seen.ranges == ((0, 10_000),)
    assert len(seen) == 10_000


def test_repeated_number_is_reported_as_duplicate() -> None:
    seen = SequenceSet()
    seen.add(5)
    assert seen.add(5) is False
    assert seen.add(6) is True
    assert seen.add(5) is False
    assert seen.ranges == ((5, 7),)


def test_gaps_stay_until_filled() -> None:
    seen = SequenceSet()
    for n in (0, 1, 2, 7, 8, 4):
        seen.add(n)
    assert seen.ranges == ((0, 3), (4, 5), (7, 9))
    seen.add(3)
    seen.add(5)
    seen.add(6)
    assert seen.ranges == ((0, 9),)


def test_add_range_counts_only_new_numbers() -> None:
    seen = SequenceSet()
    assert seen.add_range(10, 20) == 10
    assert seen.add_range(15, 25) == 5
    assert seen.add_range(0, 30) == 15
    assert seen.add_range(5, 6) == 0
    assert seen.ranges == ((0, 30),)


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 20))))
def test_matches_a_plain_set(operations: list[tuple[int, int]]) -> None:
    seen = SequenceSet()
    reference: set[int] = set()
    for start, length in operations:
        if length == 1:
            assert seen.add(start) == (start not in reference)
        else:
            new = set(range(start, start + length)) - reference
            assert seen.add_range(start, start + length) == len(new)
        reference.update(range(start, start + max(length, 1)) if length != 0 else ())
        if length == 0:
            continue
    assert len(seen) == len(reference)
    assert all(n in seen for n in reference)
    for (s1, e1), (s2, _) in zip(seen.ranges, seen.ranges[1:], strict=False):
        assert s1 < e1 < s2  # sorted, disjoint and not adjacent


def test_shuffled_numbers_end_as_one_range() -> None:
    numbers = list(range(5000))
    random.Random(7).shuffle(numbers)
    seen = SequenceSet()
    for n in numbers:
        seen.add(n)
    assert seen.ranges == ((0, 5000),)
    assert seen.to_ranges(3).count() == 5000
