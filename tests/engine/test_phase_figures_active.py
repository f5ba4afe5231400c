"""The live per-phase table (`flowdeck run --json`'s ``phase_table``, thresholds, the
autopilot) says the report's figures: msg/s over the clients' active time, split by the
report's one second rule (pure, no broker)."""

from __future__ import annotations

import pytest

from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis, encode, new_histogram
from flowdeck.engine.phase_figures import PhaseTable
from flowdeck.engine.progress import DataSafety, RunSummary, mean_rate
from flowdeck.engine.sinks import RunStarted
from flowdeck.engine.snapshot import ActiveTimes, ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec

E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)
START = 1000.0
#: Worker 1 snapshots this long after worker 0.
OFFSET = 0.3


def _snap(worker: int, at: float, total: int, interval: float = 1.0) -> ClientSnapshot:
    histogram = new_histogram()
    histogram.record_value(2000 if at < START + 10.2 else 9000)  # 2 ms, then 9 ms
    return ClientSnapshot(
        worker=worker,
        at=at,
        interval=interval,
        counters=Counters(published=total, confirmed=total, consumed=total),
        pending_confirms=1,
        unacked=0,
        connections=2,
        blocked=0,
        settings=Settings.of(
            inflight=1000, prefetch=1000, ack_every=1, rate=100.0, publishers=1, consumers=1
        ),
        target_rate=100.0,
        latency={E2E: encode(histogram)},
    )


def _run(active: ActiveTimes | None) -> PhaseTable:
    """Two workers at 100 msg/s each for 20 s, an in-flight change at 10.15 s — between
    worker 0's snapshot at 10.0 s and worker 1's at 10.3 s — and the drain at 20.05 s."""
    table = PhaseTable()
    table.on_start(RunStarted(RunSpec(), START, 2))
    table.add_event(
        RunEvent(START, EventKind.PHASE, "start", detail={"index": 0, "label": "start"})
    )
    for second in range(1, 21):
        for worker in (0, 1):
            at = START + second + OFFSET * worker
            table.add_snapshot(_snap(worker, at, 100 * second))
            if worker == 0 and second == 10:
                table.add_event(
                    RunEvent(START + 10.15, EventKind.PHASE, "inflight=50",
                             detail={"index": 1, "label": "inflight=50"})
                )  # fmt: skip
    table.add_event(RunEvent(START + 20.05, EventKind.DRAIN, "publishing stopped"))
    for worker in (0, 1):  # the last, cut-short interval after the consumers drained
        table.add_snapshot(_snap(worker, START + 20.4 + OFFSET * worker, 2000, interval=0.4))
    if active is not None:
        safety = DataSafety(4000, 4000, 0, 0, 4000, 0, 0, 0, 0)
        table.on_finish(
            RunSummary("live", START, START + 21.0, "completed", "duration reached", safety,
                       mean_rate(4000, active.publish_seconds),
                       mean_rate(4000, active.confirm_seconds),
                       mean_rate(4000, active.consume_seconds), active=active)
        )  # fmt: skip
    return table


def test_once_the_run_said_when_clients_were_active_the_phases_add_up_to_its_summary() -> None:
    active = ActiveTimes(START + 0.4, START + 20.02, START + 20.03, START + 0.41, START + 20.1)
    start, changed, drain = _run(active).phase_figures(ended=START + 21.0)
    assert (start.label, changed.label, drain.label) == ("start", "inflight=50", "drain")
    # worker 1's snapshot at 10.3 s holds the middle of second 9: the old phase's, whole
    assert (start.figure("published"), changed.figure("published"), drain.figure("published")) == (
        2000,
        2000,
        0,
    )
    # worker 0's cut-short last row ends at 20.4 s: its second, 19, is still the load's
    assert (start.latency[E2E]["count"], changed.latency[E2E]["count"]) == (20, 21)
    assert drain.latency[E2E]["count"] == 1
    # worker 0's rows of the first phase cover [0.4, 10] s, worker 1's [0.4, 10.3] s
    assert start.figure("publish_s") == pytest.approx((9.6 + 9.9) / 2)
    assert start.figure("publish_rate_mean") == pytest.approx(2000 / 9.75)
    # the phases share out first to last send (confirm, delivery) once: the summary's rates
    for rate, count, seconds in (("publish", "published", 19.62),
                                 ("confirm", "confirmed", 19.63),
                                 ("consume", "consumed", 19.69)):  # fmt: skip
        phases = (start, changed, drain)
        assert sum(p.figure(f"{rate}_s") for p in phases) == pytest.approx(seconds)
        assert sum(p.figure(count) for p in phases) == 4000
        assert sum(p.figure(f"{rate}_rate_mean") * p.figure(f"{rate}_s") for p in phases) == (
            pytest.approx(4000)
        )
    # the per-second figures are the report's too: 200 msg/s each whole second
    assert (start.seconds, start.figure("publish_rate_min"), start.figure("publish_rate_sd")) == (
        10,
        200.0,
        0.0,
    )
    assert start.target_rate == 200.0


def test_before_the_run_ends_its_start_and_where_publishing_stopped_stand_in() -> None:
    start, changed, drain = _run(None).phase_figures()
    # worker 0's first row begins at the run's start, worker 1's 0.3 s later
    assert start.figure("publish_s") == pytest.approx((10.0 + 10.0) / 2)
    # publishing stopped at 20.05 s: worker 0's rows cover (10, 20.05] of it, worker 1's
    # (10.3, 20.05]; deliveries, with no end known yet, to their last rows' 20.4 and 20.3 s
    assert changed.figure("publish_s") == pytest.approx((10.05 + 9.75) / 2)
    assert changed.figure("consume_s") == pytest.approx((10.4 + 10.0) / 2)
    assert drain.figure("publish_s") == 0 and drain.figure("published") == 0
