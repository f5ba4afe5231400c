"""Data-safety accounting: every worker's end-of-run report merged into one DataSafety.

A queue's consumers may sit in several workers, so no single worker can tell what was lost
or consumed twice: a message published by worker 0's publisher 4 may be consumed by worker
1. Each report carries, per publisher id, the sequence numbers confirmed, nacked and
consumed as ranges; merged across workers:

* lost = confirmed by the broker and never consumed anywhere, nor taken off the run's
  dead-letter queue, nor rejected for good by a consumer (the broker dead-letters or drops
  those: ``dead_lettered`` and ``dropped``);
* duplicates = deliveries of a sequence already consumed: each worker counts its own, and
  a sequence consumed in two workers adds one more per extra worker;
* unconfirmed = published but neither confirmed nor nacked when the run ended.

All of it is interval arithmetic on sorted ``[start, end)`` ranges, so the cost follows the
number of gaps, not the number of messages.

A worker whose report never came (its process killed, its host gone) leaves a gap: its
last snapshot's counts stand in for it (:func:`stand_in_report`), but not which sequences
its consumers took, so messages other workers published and it consumed would count as
lost. Such figures are marked incomplete, and ``lost`` is then bounded by the broker's own
counts over the run's queues (``engine.queue_counts``) when they could be read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from flowdeck.engine.progress import DataSafety
from flowdeck.engine.snapshot import ClientSnapshot, Counters, SequenceRanges, WorkerReport

if TYPE_CHECKING:
    from flowdeck.engine.queue_counts import QueueCounts

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
    """Confirmed but never consumed, dead-lettered or rejected for good, across all
    workers."""
    confirmed = _by_publisher(r.confirmed for r in reports)
    accounted = _by_publisher((*r.consumed, *r.dead_lettered, *r.discarded) for r in reports)
    lost = 0
    for publisher, ranges in confirmed.items():
        lost += count(difference(union(ranges), union(accounted.get(publisher, []))))
    return lost


def dead_lettered_and_dropped(reports: Sequence[WorkerReport]) -> tuple[int, int]:
    """Messages taken off the run's dead-letter queue, and messages rejected for good that
    were neither consumed nor seen there (the broker dropped them), across all workers."""
    dead = _by_publisher(r.dead_lettered for r in reports)
    taken = _by_publisher((*r.consumed, *r.dead_lettered) for r in reports)
    discarded = _by_publisher(r.discarded for r in reports)
    dropped = sum(
        count(difference(union(ranges), union(taken.get(publisher, []))))
        for publisher, ranges in discarded.items()
    )
    return sum(count(union(ranges)) for ranges in dead.values()), dropped


def stand_in_report(worker: int, last: ClientSnapshot | None) -> WorkerReport:
    """The report of a worker that never sent one: what its last snapshot said. Its
    published-but-unsettled messages are unconfirmed; its sequences are unknown, so nothing
    of its own counts as lost or as consumed twice."""
    counters = last.counters if last is not None else Counters()
    unsettled = counters.published - counters.confirmed - counters.nacked
    return WorkerReport(worker=worker, counters=counters, published_unconfirmed=max(0, unsettled))


@dataclass(frozen=True, slots=True)
class LostWorker:
    """A worker whose end-of-run report never came; :func:`stand_in_report` stands in."""

    worker: int
    reason: str
    #: When the run learnt it was gone (unix seconds).
    lost_at: float
    #: Its last snapshot (None: it never sent one).
    last: ClientSnapshot | None


def data_safety(
    reports: Sequence[WorkerReport], *, confirms: bool = True, stream: bool = False
) -> DataSafety:
    """Merge every worker's report into the run's accounting. On stream queues
    (``stream``) every consumer reads every message: a sequence consumed in two workers is
    a replay, not a duplicate."""
    totals = Counters()
    for report in reports:
        totals = totals + report.counters
    dead_lettered, dropped = dead_lettered_and_dropped(reports)
    across = cross_worker_duplicates(reports)
    return DataSafety(
        published=totals.published,
        confirmed=totals.confirmed,
        nacked=totals.nacked,
        returned=totals.returned,
        consumed=totals.consumed,
        redelivered=totals.redelivered,
        duplicates=totals.duplicates + (0 if stream else across),
        replayed=sum(r.replayed for r in reports) + (across if stream else 0),
        unconfirmed=sum(r.published_unconfirmed for r in reports) if confirms else 0,
        lost=lost_messages(reports),
        confirms=confirms,
        rejected=totals.rejected,
        requeued=totals.requeued,
        dead_lettered=dead_lettered,
        dropped=dropped,
    )


def with_lost_workers(safety: DataSafety, broker: QueueCounts | None) -> DataSafety:
    """The accounting of a run some of whose workers never reported (their stand-in
    reports merged in ``safety``): incomplete, and ``lost`` at most what the broker's
    counts of the run's queues (``broker``, when read) allow."""
    lost = safety.lost if broker is None else min(safety.lost, broker.never_acked)
    return replace(safety, lost=lost, complete=False)


def incomplete_figures(
    safety: DataSafety,
    lost_workers: Sequence[LostWorker],
    *,
    started_at: float,
    client_lost: int,
    broker: QueueCounts | None,
    broker_unread: str = "",
) -> tuple[str, ...]:
    """One line per reason the run's figures are incomplete, saying which and why."""
    lines = []
    for gone in lost_workers:
        if gone.last is None:
            known = "it sent no snapshot, so none of its counts are known"
        else:
            consumed = gone.last.counters.consumed
            known = (
                f"its counts are those of its last snapshot, {gone.lost_at - gone.last.at:.1f} s "
                "before: published, confirmed, consumed and unconfirmed miss what it did after "
                f"that, and which messages its consumers took ({consumed:,} by then) is not known"
            )
        lines.append(
            f"worker {gone.worker} was lost {gone.lost_at - started_at:.1f} s into the run "
            f"({gone.reason}): {known}"
        )
    if not safety.confirms:  # nothing was confirmed: lost means nothing
        return tuple(lines)
    if broker is not None:
        lines.append(
            f"lost {safety.lost:,} is bounded by the broker's counts of the run's queues over "
            f"the run: {broker.routed:,} routed in, {broker.acked:,} acked, {broker.left:,} "
            f"left, so at most {broker.never_acked:,} never acked (the workers' reports alone "
            f"would say {client_lost:,}, counting what the lost worker consumed)"
        )
    else:
        lines.append(
            f"lost {safety.lost:,} is an upper bound: it counts what the lost worker consumed "
            f"as lost, and the broker's counts of the run's queues could not be read to "
            f"bound it ({broker_unread or 'no management API'})"
        )
    return tuple(lines)
