"""Phase splitting, verdicts and the sweep recommendation: pure functions, no Spark."""

from __future__ import annotations

from flowdeck.figures.phases import AFTER_EVERYTHING_US, BEFORE_EVERYTHING_US, split_phases
from flowdeck.figures.sweep import SweepPoint, ranked_throughput, recommend
from flowdeck.figures.verdict import PhaseLoad, Verdict, judge

START = 1_700_000_000.0


def event(at: float, kind: str, message: str = "", change_id: int | None = None) -> dict:
    return {"at": START + at, "kind": kind, "message": message, "change_id": change_id,
            "detail": {}}  # fmt: skip


def test_a_change_and_its_phase_event_start_one_phase() -> None:
    events = [
        event(0, "run_started"),
        event(0, "phase", "warm-up"),
        event(30, "change_applied", "inflight=200", 1),
        event(30.01, "phase", "inflight 200", 1),
        event(45, "phase", "mark: consumers slow"),
        event(60, "run_stopped"),
    ]
    phases = split_phases(events, START, None)
    assert [p.label for p in phases] == ["warm-up", "inflight 200", "mark: consumers slow"]
    assert [p.duration_s for p in phases] == [30.0, 15.0, 15.0]
    assert phases[0].start_us == BEFORE_EVERYTHING_US
    assert phases[-1].end_us == AFTER_EVERYTHING_US
    assert phases[1].start_us == phases[0].end_us == round((START + 30) * 1e6)


def test_an_unfinished_session_has_an_open_last_phase() -> None:
    phases = split_phases([event(10, "change_applied", "prefetch=10", 3)], START, None)
    assert len(phases) == 2
    assert phases[0].label == "start"
    assert phases[1].finish_us is None and phases[1].duration_s is None


def test_changes_outside_the_run_are_ignored() -> None:
    events = [event(-5, "change_applied", "early", 1), event(100, "change_applied", "late", 2)]
    phases = split_phases(events, START, START + 50)
    assert len(phases) == 1 and phases[0].duration_s == 50.0


def load(**overrides: object) -> PhaseLoad:
    base = dict(publish_rate=1000.0, consume_rate=1000.0, target_rate=1000.0,
                pending_confirms_mean=10.0, inflight=100, publishers=10, blocked_s=0.0,
                alarm_s=0.0, depth_start=0.0, depth_end=5.0, depth_slope=0.1)  # fmt: skip
    base.update(overrides)
    return PhaseLoad(**base)  # type: ignore[arg-type]


def test_verdict_thresholds() -> None:
    assert judge(load())[0] is Verdict.SUSTAINABLE
    # depth growth just under and over max(1, 2% of 1000) = 20 msg/s
    assert judge(load(depth_slope=19.9, depth_end=400.0))[0] is Verdict.SUSTAINABLE
    verdict, why = judge(load(depth_slope=20.1, depth_end=400.0))
    assert verdict is Verdict.OVERLOADED and "depth growing 20.1" in why
    assert judge(load(alarm_s=1.0))[0] is Verdict.OVERLOADED
    assert judge(load(consume_rate=949.0))[0] is Verdict.OVERLOADED
    assert judge(load(consume_rate=950.0))[0] is Verdict.SUSTAINABLE
    assert judge(load(publish_rate=949.0, consume_rate=949.0))[0] is Verdict.BACK_PRESSURED
    assert judge(load(blocked_s=2.0))[0] is Verdict.BACK_PRESSURED
    assert judge(load(pending_confirms_mean=900.0))[0] is Verdict.BACK_PRESSURED
    assert judge(load(pending_confirms_mean=899.0))[0] is Verdict.SUSTAINABLE
    assert judge(load(target_rate=None))[0] is Verdict.BACK_PRESSURED
    # With confirms, consumers are measured against what the broker confirmed: the rest of
    # the publish rate is a widening in-flight window, not a backlog (a real sweep's last
    # step: window 4,000 -> 20,000, depth 0).
    widening = load(publish_rate=20684.6, confirm_rate=19082.0, consume_rate=19115.7,
                    target_rate=20000.0, pending_confirms_mean=20000.0, inflight=2000,
                    depth_end=0.0, depth_slope=0.0)  # fmt: skip
    assert judge(widening)[0] is Verdict.BACK_PRESSURED
    verdict, why = judge(load(confirm_rate=1000.0, consume_rate=949.0))
    assert verdict is Verdict.OVERLOADED and "949.0 of 1000.0 msg/s confirmed" in why
    assert "msg/s published" in judge(load(consume_rate=949.0))[1]


def test_recommendation_is_the_smallest_limit_near_the_best_throughput() -> None:
    points = [
        SweepPoint(3, 8000.0, 2.0, Verdict.BACK_PRESSURED),
        SweepPoint(6, 9600.0, 3.0, Verdict.BACK_PRESSURED),
        SweepPoint(12, 10000.0, 5.0, Verdict.BACK_PRESSURED),
        SweepPoint(60, 9900.0, 40.0, Verdict.OVERLOADED),
    ]
    chosen = recommend("inflight", points)
    assert chosen.value == 6  # 9600 >= 95% of 10000; 3 is below, 60 overloaded
    assert any("inflight=3: excluded" in line for line in chosen.reasoning)
    # A p99 bound narrows the candidates first: the best is the best within it.
    bounded = recommend("inflight", points, max_p99_ms=2.5)
    assert bounded.value == 3
    assert "inflight=6: excluded (p99 3.00 ms is above 2.5 ms)" in bounded.reasoning
    assert recommend("inflight", points, max_p99_ms=4.0).value == 6
    assert recommend("inflight", points, max_p99_ms=1.0).value is None


def test_a_sweep_in_which_no_phase_moved_a_message_recommends_nothing() -> None:
    # Every phase consumed nothing (a broker that took nothing, consumers that never
    # started): there is no best throughput to be near, and no value to name.
    points = [
        SweepPoint(10, 0.0, 1.0, Verdict.BACK_PRESSURED),
        SweepPoint(20, 0.0, 1.0, Verdict.BACK_PRESSURED),
    ]
    chosen = recommend("inflight", points)
    assert chosen.value is None
    assert chosen.reasoning[-1] == (
        "no phase moved a message: nothing to compare, no recommendation"
    )


def test_the_drain_event_starts_a_last_phase_of_its_own() -> None:
    events = [
        event(0, "run_started"),
        event(0, "phase", "inflight=10"),
        event(20, "change_applied", "inflight=20", 1),
        event(20.01, "phase", "inflight=20", 1),
        event(39.8, "change_applied", "inflight=40", 2),  # just before the drain: kept
        event(40, "drain", "publishing stopped (completed)"),
        event(41, "change_applied", "prefetch=5", 3),  # after publishing stopped: no phase
        event(46, "run_stopped"),
    ]
    phases = split_phases(events, START, START + 46)
    assert [p.label for p in phases] == ["inflight=10", "inflight=20", "inflight=40", "drain"]
    assert [p.drain for p in phases] == [False, False, False, True]
    assert [p.duration_s for p in phases] == [20.0, 19.8, 0.2, 6.0]
    drain = phases[-1]
    assert drain.start_us == phases[2].end_us == round((START + 40) * 1e6)
    assert drain.end_us == AFTER_EVERYTHING_US


def test_without_a_drain_event_the_last_phase_keeps_the_drain() -> None:
    # A format 1.1 session: no drain event, the last phase runs to the end as before.
    events = [event(0, "phase", "start"), event(20, "change_applied", "inflight=20", 1)]
    phases = split_phases(events, START, START + 46)
    assert [p.label for p in phases] == ["start", "inflight=20"]
    assert not any(p.drain for p in phases)
    assert phases[-1].duration_s == 26.0


def test_the_target_is_reached_over_the_seconds_not_paused() -> None:
    # 2 of 10 seconds paused: 8 s at 1000 msg/s = 800 msg/s over the phase.
    paused = load(publish_rate=800.0, consume_rate=800.0, publish_rate_unpaused=1000.0)
    assert judge(paused)[0] is Verdict.SUSTAINABLE
    verdict, why = judge(load(publish_rate=800.0, consume_rate=800.0))
    assert verdict is Verdict.BACK_PRESSURED and "reach 800.0 of the 1000.0" in why


def test_a_catch_up_burst_above_the_target_does_not_win_the_ranking() -> None:
    # Target 2000 msg/s in every phase. inflight=5 fell behind; inflight=25 consumed its
    # backlog at 2400 msg/s; inflight=1 and 100 held the target.
    achieved = {1: 1960.0, 5: 1500.0, 25: 2400.0, 100: 2000.0}
    points = [
        ranked_throughput(value, rate, 2000.0, 5.0, Verdict.SUSTAINABLE)
        for value, rate in achieved.items()
    ]
    assert [p.throughput for p in points] == [1960.0, 1500.0, 2000.0, 2000.0]
    chosen = recommend("inflight", points)
    assert chosen.value == 1  # 1960 >= 95% of 2000; uncapped, 2400 would have needed 2280
    # inflight=25 and 100 rank equal at the target: the steady one is the best quoted
    assert chosen.reasoning[0].startswith("best throughput 2000.0 msg/s at inflight=100")
    assert chosen.reasoning[1] == (
        "throughput capped at the phase's target where the consume mean exceeded it "
        "(catch-up on a backlog, not capacity): inflight=25 2400.0 → 2000.0 msg/s"
    )
    # A consume mean above 105% of the target is a backlog being taken: never a candidate.
    assert (
        "inflight=25: excluded (catching up on a backlog at 2400.0 msg/s, above 105% of its "
        "cap 2000.0)"
    ) in chosen.reasoning
    # A mean a hair above the target is capped but not worth a word.
    jitter = [ranked_throughput(1, 2000.04, 2000.0, 5.0, Verdict.SUSTAINABLE), *points[1:]]
    assert jitter[0].throughput == 2000.0
    assert "inflight=1 " not in recommend("inflight", jitter).reasoning[1]
    uncapped = [SweepPoint(v, r, 5.0, Verdict.SUSTAINABLE) for v, r in achieved.items()]
    assert recommend("inflight", uncapped).value == 25  # the defect this cap fixes
    # No target (unlimited publishers): nothing to cap at.
    assert ranked_throughput(25, 2400.0, None, 5.0, Verdict.SUSTAINABLE).achieved is None
    # Fan-out: each message consumed from 3 queues, the cap is 3 × the publish target.
    fanned = ranked_throughput(25, 6300.0, 2000.0, 5.0, Verdict.SUSTAINABLE, fan_out=3)
    assert (fanned.throughput, fanned.achieved) == (6000.0, 6300.0)


def test_phases_at_the_same_value_are_told_apart_by_label() -> None:
    # A real run: consumers stopped for 2 s at inflight=100, then caught up at 5648 msg/s.
    points = [
        ranked_throughput(20, 1923.9, 2000.0, 12.6, Verdict.SUSTAINABLE, "start"),
        ranked_throughput(100, 177.7, 2000.0, 22.7, Verdict.OVERLOADED, "consumers=0"),
        ranked_throughput(100, 5648.2, 2000.0, 2007.0, Verdict.SUSTAINABLE, "consumers=1"),
    ]
    chosen = recommend("inflight", points)
    assert chosen.value == 20
    assert "inflight=100 (consumers=1) 5648.2 → 2000.0 msg/s" in chosen.reasoning[1]
    assert "inflight=100 (consumers=0): excluded (overloaded)" in chosen.reasoning
    assert "inflight=20: candidate (1923.9 msg/s, p99 12.60 ms)" in chosen.reasoning


def test_a_phase_paused_throughout_is_paused_not_judged_as_publishing() -> None:
    paused = load(publish_rate=0.0, consume_rate=50.0, target_rate=None, seconds=5,
                  paused_s=5, depth_start=100.0, depth_end=0.0)  # fmt: skip
    verdict, why = judge(paused)
    assert verdict is Verdict.PAUSED
    assert why == (
        "publishers paused throughout: no load to judge; consumers took 50.0 msg/s, "
        "queue depth 100 → 0"
    )
    verdict, why = judge(load(target_rate=None, seconds=5, paused_s=5, alarm_s=2.0))
    assert verdict is Verdict.OVERLOADED and "alarm for 2 s" in why
    # Partly paused: judged as before, over the seconds not paused.
    assert judge(load(seconds=5, paused_s=1))[0] is Verdict.SUSTAINABLE


def test_a_catch_up_is_never_a_candidate_and_the_steady_phase_stands_for_its_value() -> None:
    # A live run: at inflight=100 a steady phase (p99 8.32 ms) and, after the consumers
    # stopped, a catch-up at 5648 msg/s (p99 2932 ms) — the recommendation quotes the first.
    points = [
        ranked_throughput(20, 1923.9, 2000.0, 12.6, Verdict.SUSTAINABLE, "start"),
        ranked_throughput(100, 1999.5, 2000.0, 8.32, Verdict.SUSTAINABLE, "inflight=100"),
        ranked_throughput(100, 5648.2, 2000.0, 2932.0, Verdict.SUSTAINABLE, "consumers=1"),
    ]
    assert [p.catching_up for p in points] == [False, False, True]
    chosen = recommend("inflight", points)
    assert chosen.reasoning[0].startswith("best throughput 1999.5 msg/s at inflight=100;")
    assert (
        "inflight=100 (consumers=1): excluded (catching up on a backlog at 5648.2 msg/s, "
        "above 105% of its cap 2000.0)"
    ) in chosen.reasoning
    assert chosen.reasoning[-1] == (
        "recommended inflight=20: the smallest candidate (96% of the best throughput, "
        "p99 12.60 ms vs 8.32 ms at the best)"
    )


def test_the_load_keeps_its_target_when_its_last_second_holds_the_stopping_row() -> None:
    """As a real run records its end (issue 17's demo run): the worker's snapshot at
    19.829 s, publishing stopped at 20.014 s, and the next snapshot, 0.504 s long, at
    20.333 s with target 0 because the worker stopped. Both rows hold the middle of second
    19, a load second: the phase keeps its 800 msg/s target and is judged against it,
    not read as publishers without a rate limit."""
    from flowdeck.figures.stats import client_seconds, phase_client_stats

    phases = split_phases([event(20.014, "drain", "publishing stopped")], START, START + 21)
    start_us = round(START * 1e6)

    def row(at: float, interval: float, published: int, target: float) -> dict:
        return {"worker": 0, "t_us": start_us + round(at * 1e6), "interval_s": interval,
                "published": published, "confirmed": published, "consumed": published,
                "nacked": 0, "returned": 0, "pending_confirms": 1, "unacked": 0,
                "blocked_connections": 0, "target_rate": target, "paused": False,
                "inflight": 50, "prefetch": 1000, "ack_every": 1, "rate": 800.0,
                "publishers": 1, "consumers": 1}  # fmt: skip

    rows = [row(at + 0.829, 1.0, 800, 800.0) for at in range(20)]
    rows += [row(20.333, 0.504, 149, 0.0), row(20.9, 0.567, 0, 0.0)]
    seconds = client_seconds(rows, "s", start_us, phases)
    assert [(s["sec"], s["phase"], s["target_rate"]) for s in seconds[-3:]] == [
        (18, 0, 800.0),
        (19, 0, 800.0),  # the stopping row carries the worker's target from before
        (20, 1, None),  # the drain's second keeps its 0: no target
    ]
    load, drain = sorted(phase_client_stats(seconds, {}), key=lambda s: s["phase"])
    assert load["target_rate"] == 800.0
    assert drain["target_rate"] is None
