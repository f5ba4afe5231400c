"""The answer where tuning matters: a backlog built and drained, a phase too short to judge,
a sweep where nothing bound, two workers of which one runs no publishers — through
``figures.run.run_figures``, the one computation every front-end and the report share."""

from __future__ import annotations

from typing import Any

import pytest

from flowdeck.figures import RunInputs, Trend, Verdict, recent, run_figures, slope, trend_of
from flowdeck.figures.phases import split_phases
from flowdeck.figures.stats import client_seconds
from flowdeck.figures.sweep import SweepPoint, recommend

START = 1_700_000_000.0
START_US = round(START * 1e6)


def event(at: float, kind: str, label: str = "", change_id: int | None = None) -> dict[str, Any]:
    return {"at": START + at, "kind": kind, "message": label, "change_id": change_id,
            "detail": {"label": label} if label else {}}  # fmt: skip


def row(second: int, published: int, consumed: int, **settings: Any) -> dict[str, Any]:
    """Worker 0's snapshot ending at ``second + 1`` s: one whole second of counts."""
    return {
        "worker": settings.pop("worker", 0),
        "t_us": START_US + (second + 1) * 1_000_000,
        "interval_s": 1.0,
        "published": published,
        "confirmed": published,
        "consumed": consumed,
        "nacked": 0,
        "returned": 0,
        "pending_confirms": settings.pop("pending", 10),
        "unacked": 0,
        "blocked_connections": 0,
        "target_rate": settings.pop("target_rate", 0.0),
        "paused": False,
        "inflight": settings.pop("inflight"),
        "prefetch": 1000,
        "ack_every": 1,
        "rate": settings.pop("rate", 0.0),
        "publishers": settings.pop("publishers", 4),
        "consumers": 4,
    }


def poll(at: float, ready: int) -> dict[str, Any]:
    return {"t_us": START_US + round(at * 1e6), "source": "management", "stale_reason": "",
            "queue_ready": ready, "mem_used": 1, "mem_limit": 10, "mem_alarm": False,
            "disk_alarm": False, "connections_blocked": 0}  # fmt: skip


def buckets(p99_ms: float) -> dict[int, int]:
    """1,000 latencies: 980 at a fifth of ``p99_ms``, 20 at it."""
    return {round(p99_ms * 200): 980, round(p99_ms * 1000): 20}


def backlog_sweep() -> tuple[RunInputs, list[int]]:
    """A rate=0 in-flight sweep past capacity (the tuning session of issue 26): in-flight
    2000 publishes 14,000 msg/s into consumers that take 11,700 and builds a backlog;
    in-flight 20 publishes 6,000 while consumers drain it at 11,700 (p99 15 s: the
    backlog's wait); 50 and 100 keep up at 10,300 and 10,500 msg/s."""
    plan = [(2000, 14_000, 11_700, 6000.0), (20, 6_000, 11_700, 15_000.0),
            (50, 10_300, 10_300, 11.0), (100, 10_500, 10_500, 25.0)]  # fmt: skip
    rows, polls, latency, events, depth = [], [], {}, [event(0, "phase", "inflight=2000")], 0
    for index, (inflight, published, consumed, p99) in enumerate(plan):
        if index:
            events.append(event(index * 20, "change_applied", f"inflight={inflight}", index))
        for second in range(index * 20, index * 20 + 20):
            rows.append(row(second, published, consumed, inflight=inflight))
            depth = max(20, depth + published - consumed)
            polls.append(poll(second + 1.5, depth))
        latency[(index, "e2e", "actual")] = buckets(p99)
    phases = tuple(split_phases(events, START, START + 80))
    return (
        RunInputs(key="s", start_us=START_US, phases=phases, client_rows=rows, polls=polls,
                  latency=latency),
        [inflight for inflight, *_ in plan],
    )  # fmt: skip


def test_a_phase_draining_a_backlog_is_never_recommended() -> None:
    inputs, _ = backlog_sweep()
    figures = run_figures(inputs)
    verdicts = [p.verdict for p in figures.phases]
    assert verdicts == [
        Verdict.OVERLOADED,  # depth grows 2,300 msg/s
        Verdict.DRAINING,  # consumers took 11,700 where 6,000 came in
        Verdict.BACK_PRESSURED,  # no target rate: as fast as confirms allow
        Verdict.BACK_PRESSURED,
    ]
    assert "a backlog from before was being taken" in figures.phases[1].reason
    (sweep,) = figures.sweeps
    recommendation = sweep.recommendation
    assert recommendation.value == 50, recommendation.reasoning
    assert "inflight=20: excluded (draining a backlog)" in recommendation.reasoning
    assert recommendation.reasoning[-1].startswith("recommended inflight=50: the smallest")
    assert sweep.best is figures.phases[2]


def test_the_depth_trend_reads_down_while_the_queue_drains() -> None:
    inputs, _ = backlog_sweep()
    figures = run_figures(inputs)
    draining = figures.phases[1].broker
    assert draining["depth_start"] > 40_000 and draining["depth_end"] == 20
    # over the phase's last 15 s the queue was still going down (it reached 20 after 8 s)
    assert trend_of(draining["depth_recent_slope"], 11_700) is Trend.DOWN
    # a queue drawn down from a peak reads down while it drains, whatever its start
    peak = [(t, 166_000.0 - 5_000 * t) for t in range(0, 20)]
    climbed = [(t - 60.0, 100_000.0 + 1_100 * t) for t in range(60)] + peak
    assert trend_of(slope(recent(climbed)), 12_000) is Trend.DOWN


def test_a_p99_many_times_the_lowest_is_not_a_candidate() -> None:
    points = [
        SweepPoint(20, 11_700.0, 15_204.35, Verdict.BACK_PRESSURED),
        SweepPoint(50, 10_300.0, 11.0, Verdict.BACK_PRESSURED),
        SweepPoint(100, 10_500.0, 25.0, Verdict.BACK_PRESSURED),
    ]
    chosen = recommend("inflight", points)
    assert chosen.value == 50
    assert any(
        line.startswith("inflight=20: excluded (p99 15204.35 ms is above 61.00 ms")
        for line in chosen.reasoning
    ), chosen.reasoning


def test_a_sweep_where_no_limit_bound_names_no_value() -> None:
    """The README's quick start: in-flight 20 to 2000 at 4,000 msg/s, 2-8 pending confirms
    at every limit, every phase within noise: no value is recommended, and the line says
    what would make a limit bind."""
    points = [
        SweepPoint(v, 4000.0 - d, 5.0 + d / 10, Verdict.SUSTAINABLE, load_share=8 / (v * 4))
        for v, d in ((20, 0.0), (50, 1.0), (100, 0.5), (200, 2.0), (2000, 0.0))
    ]
    chosen = recommend("inflight", points)
    assert chosen.value is None and chosen.nothing_bound
    assert chosen.reasoning[-1].startswith("no recommendation: no inflight from 20 to 2000 bound")
    assert "raise the rate or the scale" in chosen.reasoning[-1]
    # a limit that bound (pending confirms at 95% of in-flight 20's window) is a question
    bound = [SweepPoint(20, 3000.0, 5.0, Verdict.BACK_PRESSURED, load_share=0.95), *points[1:]]
    assert recommend("inflight", bound).value == 50


def test_a_phase_too_short_to_judge_is_marked_and_set_aside() -> None:
    events = [event(0, "phase", "inflight=10"), event(20, "change_applied", "inflight=20", 1),
              event(23, "change_applied", "inflight=40", 2)]  # fmt: skip
    rows = [row(s, 1000, 1000, inflight=10 if s < 20 else 20 if s < 23 else 40,
                rate=250.0, target_rate=1000.0) for s in range(40)]  # fmt: skip
    phases = tuple(split_phases(events, START, START + 40))
    figures = run_figures(RunInputs("s", START_US, phases, rows))
    assert [p.verdict for p in figures.phases] == [
        Verdict.SUSTAINABLE, Verdict.TOO_SHORT, Verdict.SUSTAINABLE,
    ]  # fmt: skip
    assert figures.phases[1].reason == "3 s of figures, fewer than the 5 s a verdict needs"
    (sweep,) = figures.sweeps
    assert "inflight=20: excluded (too short to judge)" in sweep.recommendation.reasoning


def test_a_worker_without_publishers_keeps_the_target() -> None:
    """1 publisher at 1,000 msg/s with two workers: worker 1 runs only consumers, its
    target 0 at a rate limit of 1,000 means no publishers, not "no target"."""
    rows = []
    for second in range(10):
        rows.append(row(second, 1000, 0, inflight=100, rate=1000.0, target_rate=1000.0,
                        publishers=1))  # fmt: skip
        rows.append(row(second, 0, 1000, inflight=100, rate=1000.0, target_rate=0.0,
                        publishers=1, worker=1))  # fmt: skip
    phases = tuple(split_phases([event(0, "phase", "start")], START, START + 10))
    seconds = client_seconds(rows, "s", START_US, phases)
    assert {s["target_rate"] for s in seconds} == {1000.0}
    figures = run_figures(RunInputs("s", START_US, phases, rows))
    assert figures.phases[0].verdict is Verdict.SUSTAINABLE
    assert figures.phases[0].target_rate == pytest.approx(1000.0)


def test_a_second_straddling_a_rate_rise_carries_the_target_over_its_interval() -> None:
    """A capacity search's step up: 50 msg/s, then 100 from 6.6 s. The worker's snapshots
    end 0.3 s after each whole second, so the interval ending at 7.3 s ran 0.3 s at 50 and
    0.7 s at 100 (85 sent) and, its middle before the change, belongs to the 50 phase. Its
    target is 85 over the interval, not the 100 its row ends with: the 50 phase reads its
    target reached, not publishers short of a rate they were not yet asked for."""
    rows = []
    for second in range(12):
        rate = 50.0 if second < 6 else 100.0
        sent = 85 if second == 6 else int(rate)
        late = row(second, sent, sent, inflight=0, rate=rate, target_rate=rate, publishers=1)
        late["t_us"] += 300_000
        rows.append(late)
    events = [event(0, "phase", "start"), event(6.6, "change_applied", "rate=100", 1),
              event(6.61, "phase", "rate=100", 1)]  # fmt: skip
    phases = tuple(split_phases(events, START, START + 13))
    seconds = client_seconds(rows, "s", START_US, phases)
    straddling = next(s for s in seconds if s["sec"] == 6)
    assert straddling["phase"] == 0 and straddling["target_rate"] == pytest.approx(85.0)
    figures = run_figures(RunInputs("s", START_US, phases, rows))
    first, second = figures.phases
    assert first.target_rate == pytest.approx((6 * 50 + 85) / 7)
    assert first.verdict is Verdict.SUSTAINABLE, first.reason
    assert second.target_rate == pytest.approx(100.0)


def test_a_start_marker_before_the_first_change_is_no_phase() -> None:
    """The engine's ``start`` phase event, then the schedule's first step in force 0.8 s
    later (every worker had to say so): one phase, named by the step."""
    events = [
        event(0, "phase", "start"),
        event(0.8, "change_applied", "inflight=20", 1),
        event(0.81, "phase", "inflight=20", 1),
        event(10, "change_applied", "inflight=50", 2),
    ]
    phases = split_phases(events, START, START + 20)  # fmt: skip
    assert [p.label for p in phases] == ["inflight=20", "inflight=50"]


def test_messages_waiting_before_the_queues_are_found_and_named() -> None:
    """The overloaded mirrored run of issue 27: the clients sent 8,000 msg/s, the broker
    took in 6,500 (its channels' publish count), consumers kept up with what it took, the
    queues stayed empty and the run's publishers sat in credit flow: the figures say where
    the messages waited and the verdict names it."""
    rows = [row(s, 8000, 6500, inflight=0) for s in range(20)]
    polls = []
    for second in range(20):
        poll_row = poll(second + 1.0, 0)
        poll_row.update(
            run_accepted=6500 * (second + 1), run_accept_rate=6500.0, run_publishers_flow=2,
            connections_flow=2, age_s=0.0,
        )  # fmt: skip
        polls.append(poll_row)
    phases = tuple(split_phases([event(0, "phase", "start")], START, START + 20))
    figures = run_figures(RunInputs("s", START_US, phases, rows, polls))
    (phase,) = figures.phases
    broker = phase.broker
    assert broker["flow_s"] == pytest.approx(19.0, abs=1.0)
    assert broker["run_publishers_flow_max"] == 2
    # 1,500 msg/s more sent than taken in: the gap grows by that much each second
    assert broker["before_queues_max"] == pytest.approx(1500 * 20, rel=0.1)
    assert phase.verdict is Verdict.OVERLOADED  # consumers take 6,500 of 8,000 published
    assert "publishers in credit flow for 19 s" in phase.reason
    assert "messages waited before the queues (≈" in phase.reason


def _in_flow(seconds: int, sent: int, taken: int) -> list[dict[str, Any]]:
    polls = []
    for second in range(seconds):
        poll_row = poll(second + 1.0, 0)
        poll_row.update(run_accepted=taken * (second + 1), run_accept_rate=float(taken),
                        run_publishers_flow=2, connections_flow=2, age_s=0.0)  # fmt: skip
        polls.append(poll_row)
    return polls


def test_a_long_phase_whose_consumers_fall_behind_within_the_share_is_overloaded() -> None:
    """The seed redo's mirrored queues without confirms (benchmark #2 at 1.3x this cluster's
    capacity): 4,000 msg/s sent for 90 s, consumers took 96 % of it (above the 95 % share),
    the queues stayed empty and the publishers sat in credit flow; the 14,000 left behind
    waited before the queues and e2e p99 climbed to 3.6 s. Overloaded, as the seed says,
    not throttled; the same shortfall over 8 s (1,240 messages, 0.3 s) stays throttled."""
    reasons = {}
    for seconds, verdict in ((90, Verdict.OVERLOADED), (8, Verdict.THROTTLED)):
        rows = [row(s, 4000, 3845, inflight=0) for s in range(seconds)]
        phases = tuple(split_phases([event(0, "phase", "start")], START, START + seconds))
        polls = _in_flow(seconds, 4000, 3845)
        (phase,) = run_figures(RunInputs("s", START_US, phases, rows, polls)).phases
        assert phase.verdict is verdict, (seconds, phase.reason)
        assert phase.load is not None and phase.load.left_behind == seconds * 155
        reasons[seconds] = phase.reason
    assert "of the 360,000 messages confirmed in its 90 s: 13,950 left behind, 3.6 s of the " \
        "consume rate (≥ 2 s)" in reasons[90]  # fmt: skip


def test_publishers_held_by_credit_flow_while_consumers_keep_up_are_throttled() -> None:
    rows = [row(s, 5000, 5000, inflight=0) for s in range(20)]
    polls = []
    for second in range(20):
        poll_row = poll(second + 1.0, 10)
        poll_row.update(run_accepted=5000 * (second + 1), run_accept_rate=5000.0,
                        run_publishers_flow=1)  # fmt: skip
        polls.append(poll_row)
    phases = tuple(split_phases([event(0, "phase", "start")], START, START + 20))
    (phase,) = run_figures(RunInputs("s", START_US, phases, rows, polls)).phases
    assert phase.verdict is Verdict.THROTTLED, phase.reason
    assert phase.reason.startswith("publishers in credit flow for 19 s of 20 (≥ 50%)")


def test_a_sweep_compares_only_phases_that_held_every_other_setting() -> None:
    # The demo's shape: a capacity probe at no rate limit and in-flight 200 moves the most
    # messages; then in-flight 1, 10 and 100 at a target of 4 × 1,000 msg/s. The probe's
    # msg/s says nothing about in-flight (its rate differs), so it is no candidate.
    plan = [(200, 0.0, 9_000), (1, 1000.0, 2_500), (10, 1000.0, 4_000), (100, 1000.0, 4_000)]
    rows, events = [], [event(0, "phase", "capacity probe")]
    latency = {}
    for index, (inflight, rate, moved) in enumerate(plan):
        if index:
            events.append(event(index * 20, "change_applied", f"inflight={inflight}", index))
        for second in range(index * 20, index * 20 + 20):
            rows.append(row(second, moved, moved, inflight=inflight, rate=rate,
                            target_rate=rate * 4))  # fmt: skip
        latency[(index, "e2e", "actual")] = buckets(5.0)
    phases = tuple(split_phases(events, START, START + 80))
    figures = run_figures(RunInputs(key="s", start_us=START_US, phases=phases, client_rows=rows,
                                    polls=[poll(s + 1.5, 20) for s in range(80)],
                                    latency=latency))  # fmt: skip
    (sweep,) = figures.sweeps
    assert [p.phase.index for p in sweep.rows] == [1, 2, 3]
    recommendation = sweep.recommendation
    assert recommendation.value == 10, recommendation.reasoning
    assert recommendation.reasoning[0].startswith("left out: capacity probe (other settings")
    assert "rate=1000" in recommendation.reasoning[0]
