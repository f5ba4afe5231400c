"""Sequence tracking: which sequence numbers of a publisher were seen, as interval sets.

Publishers number their messages 0, 1, 2, ...; confirms and deliveries come back mostly
in order, so the set of seen numbers is a handful of ``[start, end)`` ranges and adding the
next number extends the last range in place. Out-of-order and repeated numbers take the
general path, which also tells whether a number was already there (a duplicate).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from flowdeck.engine.snapshot import SequenceRanges


class SequenceSet:
    """A set of non-negative integers kept as sorted, disjoint, non-adjacent ranges."""

    __slots__ = ("_ends", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def add(self, number: int) -> bool:
        """Add ``number``; False when it was already in the set (a duplicate)."""
        ends = self._ends
        if ends and ends[-1] == number:
            ends[-1] = number + 1
            return True
        return self.add_range(number, number + 1) == 1

    def add_range(self, start: int, end: int) -> int:
        """Add ``[start, end)``; returns how many numbers were new."""
        if end <= start:
            return 0
        starts, ends = self._starts, self._ends
        if not ends or start > ends[-1]:
            starts.append(start)
            ends.append(end)
            return end - start
        if start == ends[-1]:
            ends[-1] = end
            return end - start
        # Ranges i..j-1 touch or overlap [start, end): merge them into one.
        i = bisect_left(ends, start)
        j = bisect_right(starts, end)
        covered = 0
        for k in range(i, j):
            covered += max(0, min(ends[k], end) - max(starts[k], start))
        new = (end - start) - covered
        if i < j:
            start = min(start, starts[i])
            end = max(end, ends[j - 1])
        starts[i:j] = [start]
        ends[i:j] = [end]
        return new

    def __contains__(self, number: object) -> bool:
        if not isinstance(number, int):
            return False
        k = bisect_right(self._starts, number) - 1
        return k >= 0 and number < self._ends[k]

    def __len__(self) -> int:
        return sum(e - s for s, e in zip(self._starts, self._ends, strict=True))

    @property
    def ranges(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self._starts, self._ends, strict=True))

    def to_ranges(self, publisher: int) -> SequenceRanges:
        return SequenceRanges(publisher, self.ranges)
