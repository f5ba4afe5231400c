"""The controller's maths: rates from cumulative counters, merged latency, loss accounting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowdeck.engine.accounting import (
    count,
    cross_worker_duplicates,
    data_safety,
    difference,
    union,
)
from flowdeck.engine.aggregate import SnapshotAggregator, rates_between
from flowdeck.engine.latency import (
    LatencyKind,
    SendBasis,
    encode,
    new_histogram,
    record,
    values_at_percentiles,
)
from flowdeck.engine.snapshot import (
    ClientSnapshot,
    Counters,
    SequenceRanges,
    Settings,
    WorkerReport,
)

E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)
SETTINGS = Settings.of(inflight=10, prefetch=10, ack_every=1, rate=100, publishers=1, consumers=1)


def snapshot(
    worker: int, at: float, published: int, latencies_us: tuple[int, ...] = ()
) -> ClientSnapshot:
    histogram = new_histogram()
    for value in latencies_us:
        record(histogram, value)
    return ClientSnapshot(
        worker=worker,
        at=at,
        interval=1.0,
        counters=Counters(published=published, confirmed=published, consumed=published),
        pending_confirms=worker + 1,
        unacked=2,
        connections=2,
        blocked=0,
        settings=SETTINGS,
        target_rate=100.0,
        latency={E2E: encode(histogram)} if latencies_us else {},
    )


def test_rates_are_counter_differences_over_time() -> None:
    r = rates_between(Counters(published=100), Counters(published=350, nacked=5), 2.5)
    assert r.publish == 100 and r.nack == 2
    assert rates_between(Counters(), Counters(published=5), 0).publish == 0


def test_rates_do_not_alias_when_a_tick_sees_two_snapshots_of_a_worker() -> None:
    agg = SnapshotAggregator()
    agg.add(snapshot(0, 100.0, 100))
    agg.add(snapshot(1, 100.0, 100))
    first = agg.tick(100.5)
    # worker 0's next snapshot comes twice within the next tick, worker 1's once
    agg.add(snapshot(0, 101.0, 200))
    agg.add(snapshot(0, 102.0, 300))
    agg.add(snapshot(1, 101.0, 200))
    second = agg.tick(102.5)  # a tick counts the snapshots taken by its time
    assert first.rates.publish == pytest.approx(200)
    assert second.rates.publish == pytest.approx(200)  # 100/s from each worker
    assert second.totals.published == 500
    assert second.pending_confirms == 1 + 2
    assert second.target_rate == 200


def test_a_silent_worker_contributes_no_rate_but_keeps_its_totals() -> None:
    agg = SnapshotAggregator()
    agg.add(snapshot(0, 100.0, 100))
    agg.add(snapshot(0, 101.0, 200))
    tick = agg.tick(110.0)
    assert tick.rates.publish == 0
    assert tick.totals.published == 200


def test_latency_percentiles_merge_workers_and_windows() -> None:
    agg = SnapshotAggregator()
    agg.add(snapshot(0, 1.0, 10, (1000,) * 90))
    agg.add(snapshot(1, 1.0, 10, (10_000,) * 10))
    tick = agg.tick(1.1)
    p = tick.latency[E2E]
    assert p.count == 100
    assert p.p50 == pytest.approx(1.0, rel=0.01)
    assert p.p95 == pytest.approx(10.0, rel=0.01)
    agg.add(snapshot(0, 2.0, 20, (50_000,) * 100))
    assert agg.tick(2.1).latency[E2E].p50 == pytest.approx(50.0, rel=0.01)  # new window only
    run = agg.run_latency()[E2E]
    assert run.count == 200 and run.max == pytest.approx(50.0, rel=0.01)


def test_interval_arithmetic() -> None:
    assert union([(5, 10), (0, 3), (3, 4), (8, 12), (20, 20)]) == [(0, 4), (5, 12)]
    assert difference([(0, 10), (20, 30)], [(2, 3), (5, 25)]) == [(0, 2), (3, 5), (25, 30)]
    assert difference([(0, 10)], []) == [(0, 10)]
    assert difference([(0, 10)], [(0, 10)]) == []
    assert count([(0, 4), (5, 12)]) == 11


def _report(
    worker: int,
    confirmed_ranges: dict[int, list[tuple[int, int]]],
    consumed_ranges: dict[int, list[tuple[int, int]]],
    **counts: int,
) -> WorkerReport:
    return WorkerReport(
        worker=worker,
        counters=Counters(**counts),
        confirmed=tuple(SequenceRanges(p, tuple(r)) for p, r in confirmed_ranges.items()),
        consumed=tuple(SequenceRanges(p, tuple(r)) for p, r in consumed_ranges.items()),
        published_unconfirmed=counts.get("published", 0) - counts.get("confirmed", 0),
    )


def test_loss_is_confirmed_minus_consumed_across_workers() -> None:
    # publisher 0 in worker 0, publisher 1 in worker 1; each worker's consumer got part of
    # both publishers' messages (one queue, two consumers).
    w0 = _report(
        0, {0: [(0, 100)]}, {0: [(0, 50)], 1: [(0, 40)]}, published=100, confirmed=100, consumed=90
    )
    w1 = _report(
        1,
        {1: [(0, 100)]},
        {0: [(50, 100)], 1: [(40, 95)]},
        published=102,
        confirmed=100,
        consumed=105,
    )
    safety = data_safety([w0, w1])
    assert safety.lost == 5  # publisher 1's 95..99 were confirmed and never consumed
    assert safety.published == 202 and safety.unconfirmed == 2
    assert safety.duplicates == 0


def test_a_message_consumed_in_two_workers_is_a_duplicate() -> None:
    w0 = _report(0, {0: [(0, 10)]}, {0: [(0, 10)]}, consumed=10, duplicates=1)
    w1 = _report(1, {}, {0: [(8, 10)]}, consumed=2)
    assert cross_worker_duplicates([w0, w1]) == 2
    safety = data_safety([w0, w1])
    assert safety.duplicates == 3 and safety.lost == 0


@given(
    latencies=st.lists(st.integers(1, 3_600_000_000), min_size=1, max_size=300),
    percentile=st.floats(0.0, 100.0),
)
def test_percentiles_from_the_cumulative_counts_are_the_librarys(
    latencies: list[int], percentile: float
) -> None:
    """The cockpit's percentiles (numpy over the counts) are HdrHistogram's own, value for
    value, over latencies from 1 µs to the histogram's hour, p0 and p100 included."""
    histogram = new_histogram()
    for latency in latencies:
        record(histogram, latency)
    wanted = [0.0, 50.0, 75.0, 95.0, 99.0, 100.0, percentile]
    assert values_at_percentiles(histogram, wanted) == histogram.get_percentile_to_value_dict(
        wanted
    )
