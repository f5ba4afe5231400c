"""The pacer holds a rate from the clock, whatever the wake-up pattern."""

from __future__ import annotations

import random

import pytest

from flowdeck.engine.pacer import NS_PER_S, UNLIMITED, Pacer

START = 1_700_000_000 * NS_PER_S


def run(pacer: Pacer, seconds: float, wakeups_ms: tuple[float, float], seed: int = 1) -> int:
    """Wake at random intervals in ``wakeups_ms`` for ``seconds`` and send what is due."""
    rng = random.Random(seed)
    now = START
    end = START + int(seconds * NS_PER_S)
    sent = 0
    while now < end:
        due = pacer.due(now)
        pacer.take(due)
        sent += due
        now += int(rng.uniform(*wakeups_ms) * 1_000_000)
    return sent


@pytest.mark.parametrize("rate", [1.0, 2.0, 30.0, 1000.0, 5000.0, 100_000.0])
@pytest.mark.parametrize("wakeups_ms", [(0.0, 0.05), (0.5, 3.0), (5.0, 40.0)])
def test_rate_within_one_percent_over_ten_seconds(
    rate: float, wakeups_ms: tuple[float, float]
) -> None:
    pacer = Pacer(rate, START)
    sent = run(pacer, 10.0, wakeups_ms)
    assert abs(sent - rate * 10) <= max(1, rate * 10 * 0.01)


def test_many_publishers_each_hold_their_rate() -> None:
    pacers = [Pacer(2.0, START + i * 1_000_000) for i in range(500)]
    counts = [run(p, 10.0, (1.0, 60.0), seed=i) for i, p in enumerate(pacers)]
    assert all(19 <= c <= 21 for c in counts)


def test_intended_times_follow_the_schedule_when_held_back() -> None:
    """A publisher held back 0.5 s (window full) still gets the schedule's intended times,
    so latency measured from them includes the wait.
    """
    pacer = Pacer(100.0, START)
    assert pacer.due(START) == 1
    pacer.take(1)
    late = START + NS_PER_S // 2
    due = pacer.due(late)
    assert due == 50
    intended = [pacer.intended_ns(pacer.sent + i) for i in range(due)]
    assert intended[0] == START + NS_PER_S // 100
    assert intended[-1] == START + 50 * NS_PER_S // 100
    assert late - intended[0] == pytest.approx(0.49 * NS_PER_S)


def test_rate_change_restarts_the_schedule_from_now() -> None:
    pacer = Pacer(10.0, START)
    pacer.take(pacer.due(START + NS_PER_S))  # 11 by one second
    pacer.set_rate(1000.0, START + NS_PER_S)
    assert pacer.due(START + NS_PER_S) == 1
    assert pacer.due(START + 2 * NS_PER_S) == 1001


def test_restart_after_pause_is_not_a_debt() -> None:
    pacer = Pacer(100.0, START)
    pacer.take(pacer.due(START))
    pacer.restart(START + 60 * NS_PER_S)
    assert pacer.due(START + 60 * NS_PER_S) == 1


def test_rate_zero_is_unlimited() -> None:
    pacer = Pacer(0.0, START)
    assert pacer.due(START) == UNLIMITED


def test_negative_rate_refused() -> None:
    with pytest.raises(ValueError, match="rate must be >= 0"):
        Pacer(-1.0, START)


def test_without_catch_up_a_stall_is_skipped_but_its_latency_is_kept() -> None:
    pacer = Pacer(100.0, START, catch_up=False)
    pacer.take(pacer.due(START))  # message 0, on time
    stalled_from = pacer.next_due_ns()  # message 1 was due 10 ms in
    late = START + NS_PER_S  # the window opens again one second later
    assert pacer.due(late) == 1  # 100 owed, 99 written off
    assert pacer.skipped == 99
    assert pacer.intended_ns(pacer.sent) == stalled_from  # it carries the whole stall
    pacer.take(1)
    assert pacer.intended_ns(pacer.sent) == late + NS_PER_S // 100  # then the rate again
    assert pacer.due(late + NS_PER_S // 20) == 5  # and on at the rate, no burst above it


def test_without_catch_up_a_timer_s_jitter_is_still_sent() -> None:
    pacer = Pacer(1000.0, START, catch_up=False)
    pacer.take(pacer.due(START))
    assert pacer.due(START + 50_000_000) == 50  # 50 ms late: within 0.1 s of the rate
    assert pacer.skipped == 0


def test_without_catch_up_a_long_stall_keeps_its_oldest_intended_time() -> None:
    pacer = Pacer(100.0, START, catch_up=False)
    pacer.take(pacer.due(START))
    oldest = pacer.next_due_ns()
    for late_s in (1, 2, 3):  # asked again and again while nothing can be sent
        assert pacer.due(START + late_s * NS_PER_S) == 1
    assert pacer.intended_ns(pacer.sent) == oldest
    pacer.restart(START + 10 * NS_PER_S)  # a pause ends the stall: no debt, no old time
    assert pacer.intended_ns(pacer.sent) == START + 10 * NS_PER_S
