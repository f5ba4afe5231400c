"""Data-safety accounting: every worker's end-of-run report merged into one DataSafety.

A queue's consumers may sit in several workers, so no single worker can tell what was lost
or consumed twice: a message published by worker 0's publisher 4 may be consumed by worker
1. Each report carries, per publisher id, the sequence numbers confirmed, nacked and
consumed as ranges; merged across workers:

* lost = confirmed by the broker and never consumed anywhere;
* duplicates = deliveries of a sequence already consumed: each worker counts its own, and
  a sequence consumed in two workers adds one more per extra worker;
* unconfirmed = published but neither confirmed nor nacked when the run ended.

All of it is interval arithmetic on sorted ``[start, end)`` ranges, so the cost follows the
number of gaps, not the number of messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from flowdeck.engine.progress import DataSafety
from flowdeck.engine.snapshot import Counters, SequenceRanges, WorkerReport

Range = tuple[int, int]


def union(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, non-overlapping, non-adjacent ranges covering the same numbers."""
    out: list[Range] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def difference(left: Sequence[Range], right: Sequence[Range]) -> list[Range]:
    """Numbers in ``left`` and not in ``right``; both sorted and non-overlapping."""
    out: list[Range] = []
    j = 0
    for start, end in left:
        cursor = start
        while j < len(right) and right[j][1] <= cursor:
            j += 1
        k = j
        while k < len(right) and right[k][0] < end:
            r_start, r_end = right[k]
            if r_start > cursor:
                out.append((cursor, r_start))
            cursor = max(cursor, r_end)
            if cursor >= end:
                break
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def count(ranges: Iterable[Range]) -> int:
    return sum(end - start for start, end in ranges)


def _by_publisher(groups: Iterable[Iterable[SequenceRanges]]) -> dict[int, list[Range]]:
    merged: dict[int, list[Range]] = {}
    for group in groups:
        for seq in group:
            merged.setdefault(seq.publisher, []).extend(seq.ranges)
    return merged


def cross_worker_duplicates(reports: Sequence[WorkerReport]) -> int:
    """Sequences consumed in more than one worker: one duplicate per extra worker."""
    per_publisher = _by_publisher(r.consumed for r in reports)
    counted = sum(count(rs) for rs in per_publisher.values())
    distinct = sum(count(union(rs)) for rs in per_publisher.values())
    # Each worker's ranges are distinct within the worker; overlap is across workers.
    return counted - distinct


def lost_messages(reports: Sequence[WorkerReport]) -> int:
    """Confirmed but never consumed, across all workers."""
    confirmed = _by_publisher(r.confirmed for r in reports)
    consumed = _by_publisher(r.consumed for r in reports)
    lost = 0
    for publisher, ranges in confirmed.items():
        lost += count(difference(union(ranges), union(consumed.get(publisher, []))))
    return lost


def data_safety(reports: Sequence[WorkerReport], *, confirms: bool = True) -> DataSafety:
    """Merge every worker's report into the run's accounting."""
    totals = Counters()
    for report in reports:
        totals = totals + report.counters
    return DataSafety(
        published=totals.published,
        confirmed=totals.confirmed,
        nacked=totals.nacked,
        returned=totals.returned,
        consumed=totals.consumed,
        redelivered=totals.redelivered,
        duplicates=totals.duplicates + cross_worker_duplicates(reports),
        unconfirmed=sum(r.published_unconfirmed for r in reports) if confirms else 0,
        lost=lost_messages(reports),
        confirms=confirms,
    )
