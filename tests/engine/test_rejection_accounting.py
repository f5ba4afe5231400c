"""The accounting of rejected and dead-lettered messages, from workers' reports alone: a
message is consumed, dead-lettered (taken off the run's dead-letter queue), dropped
(rejected for good and seen nowhere after) or lost, never two of them."""

from __future__ import annotations

from flowdeck.engine.accounting import data_safety
from flowdeck.engine.snapshot import Counters, SequenceRanges, WorkerReport


def ranges(*spans: tuple[int, int]) -> tuple[SequenceRanges, ...]:
    return (SequenceRanges(0, spans),)


def test_dead_lettered_and_dropped_are_not_lost() -> None:
    # Publisher 0 sent 0..100, all confirmed. Worker 0 consumed 0..80 and rejected 80..100
    # for good; worker 1 took 80..90 off the dead-letter queue; 90..100 went nowhere.
    reports = [
        WorkerReport(
            worker=0,
            counters=Counters(published=100, confirmed=100, consumed=80, rejected=20),
            confirmed=ranges((0, 100)),
            consumed=ranges((0, 80)),
            discarded=ranges((80, 100)),
        ),
        WorkerReport(
            worker=1,
            counters=Counters(dead_lettered=10),
            dead_lettered=ranges((80, 90)),
        ),
    ]
    safety = data_safety(reports)
    assert (safety.consumed, safety.dead_lettered, safety.dropped) == (80, 10, 10)
    assert safety.rejected == 20 and safety.lost == 0


def test_a_message_neither_consumed_nor_rejected_is_lost_still() -> None:
    report = WorkerReport(
        worker=0,
        counters=Counters(published=10, confirmed=10, consumed=7, rejected=1),
        confirmed=ranges((0, 10)),
        consumed=ranges((0, 7)),
        discarded=ranges((7, 8)),
    )
    safety = data_safety([report])
    assert (safety.dropped, safety.lost) == (1, 2)
