"""The pacer holds a rate from the clock, whatever the wake-up pattern."""

from __future__ import annotations

import itertools
import random

import pytest

from flowdeck.engine.pacer import NS_PER_S, UNLIMITED, Pacer, spread_phase

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
    pacers = [Pacer(2.0, START + i * 1_000_000, phase=spread_phase(i)) for i in range(500)]
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


def send_times(pacer: Pacer, until_ns: int) -> list[int]:
    """When a publisher woken exactly when its next message is due sends each message."""
    times = []
    while (due_at := pacer.next_due_ns()) < until_ns:
        assert pacer.due(due_at - 1) == 0  # nothing goes before its time
        assert pacer.due(due_at) == 1
        pacer.take(1)
        times.append(due_at)
    return times


@pytest.mark.parametrize(("publishers", "rate"), [(500, 2.0), (500, 30.0), (100, 100.0), (7, 1.0)])
def test_publishers_started_together_send_spread_over_the_interval(
    publishers: int, rate: float
) -> None:
    """Started in the same instant (a run's start), N publishers at rate r send at N
    distinct points spread over each 1/r interval, not all in that instant; each keeps its
    rate and sends at the same point of every interval."""
    interval = NS_PER_S / rate
    end = START + 4 * int(interval)
    recorded = [
        send_times(Pacer(rate, START, phase=spread_phase(i)), end) for i in range(publishers)
    ]
    assert all(len(times) == 4 for times in recorded)
    for n in range(4):
        offsets = sorted((times[n] - START - n * interval) / interval for times in recorded)
        assert offsets[0] > -1e-6 and offsets[-1] < 1  # within a ns of the interval
        gaps = [b - a for a, b in itertools.pairwise(offsets)]
        gaps.append(1 - offsets[-1] + offsets[0])
        # Evenly spread, every gap would be 1/N; all in one instant, one gap would be 1.
        assert max(gaps) <= 2 / publishers, (n, max(gaps))
        assert min(gaps) > 0.3 / publishers, (n, min(gaps))


def test_each_message_intended_at_its_own_slot() -> None:
    """The intended send time is the publisher's slot, so latency measured from it is the
    wait, not the phase; a rate change or resume starts again at the same point of the new
    interval."""
    phase = spread_phase(3)
    pacer = Pacer(10.0, START, phase=phase)
    slot = START + int(phase * NS_PER_S / 10)
    assert pacer.due(START) == 0
    assert pacer.next_due_ns() == pacer.intended_ns(0) == slot
    assert pacer.due(slot + NS_PER_S // 2) == 6  # held back half a second: 6 owed
    assert [pacer.intended_ns(i) for i in (0, 5)] == [slot, slot + NS_PER_S // 2]
    pacer.take(6)
    pacer.set_rate(100.0, START + 10 * NS_PER_S)
    assert pacer.next_due_ns() == START + 10 * NS_PER_S + int(phase * NS_PER_S / 100)
    pacer.restart(START + 20 * NS_PER_S)
    assert pacer.next_due_ns() == START + 20 * NS_PER_S + int(phase * NS_PER_S / 100)


def test_phase_outside_the_interval_refused() -> None:
    with pytest.raises(ValueError, match="phase must be in"):
        Pacer(1.0, START, phase=1.0)
