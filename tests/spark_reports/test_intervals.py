"""The most of each phase's interval percentiles, as pure Python over interval rows."""

from __future__ import annotations

from typing import Any

from flowdeck.figures.intervals import interval_maxima

KEY = ("s", 0, "e2e", "actual")


def interval(number: int, seconds: int, p99: int, phase: int = 0) -> dict[str, Any]:
    """Interval ``number`` of a phase at 15 s intervals, with ``seconds`` of messages."""
    return {
        "session": "s", "phase": phase, "interval": number, "interval_s": 15,
        "kind": "e2e", "basis": "actual", "seconds": seconds,
        "p75": p99 // 4, "p95": p99 // 2, "p99": p99,
    }  # fmt: skip


def test_the_largest_of_the_phases_intervals_with_where_it_was() -> None:
    found = interval_maxima([interval(0, 15, 500), interval(1, 15, 900), interval(2, 15, 700)])
    figure = found[KEY]
    assert (figure["intervals"], figure["interval_s"]) == (3, 15)
    assert (figure["p99_max"], figure["p95_max"], figure["p75_max"]) == (900, 450, 225)
    assert figure["p99_at"] == 1


def test_a_short_last_interval_is_left_out_a_half_one_counts() -> None:
    """A phase of 37 s at 15 s intervals: 15, 15 and a 7 s remainder (under half: out);
    one of 38 s ends in 8 s (at least half: in)."""
    short = interval_maxima([interval(0, 15, 100), interval(1, 15, 200), interval(2, 7, 9000)])
    assert (short[KEY]["p99_max"], short[KEY]["intervals"]) == (200, 2)
    half = interval_maxima([interval(0, 15, 100), interval(1, 15, 200), interval(2, 8, 9000)])
    assert (half[KEY]["p99_max"], half[KEY]["intervals"]) == (9000, 3)


def test_a_phase_shorter_than_half_an_interval_is_its_one_interval() -> None:
    found = interval_maxima([interval(0, 4, 300, phase=3)])
    assert found[("s", 3, "e2e", "actual")] == {
        "intervals": 1, "interval_s": 15, "p75_max": 75, "p95_max": 150, "p99_max": 300,
        "p99_at": 0,
    }  # fmt: skip
