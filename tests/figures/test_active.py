"""msg/s on the run summary's basis: a phase's messages over the clients' active time in it
(``figures.active``), on hand-made rows whose every figure is worked out here."""

from __future__ import annotations

from typing import Any

import pytest

from flowdeck.figures.active import ActiveSpans, phase_throughput, whole_throughput
from flowdeck.figures.phases import split_phases

START = 1_700_000_000.0
START_US = 1_700_000_000_000_000


def row(worker: int, at: float, interval: float, published: int, consumed: int) -> dict[str, Any]:
    """A client row ending ``at`` seconds after the start."""
    return {"worker": worker, "t_us": START_US + round(at * 1e6), "interval_s": interval,
            "published": published, "confirmed": published, "consumed": consumed}  # fmt: skip


def phases(*changes: float, drain: float | None = None, end: float = 30.0) -> list[Any]:
    events = [{"at": START + at, "kind": "change_applied", "change_id": n, "message": f"c{n}"}
              for n, at in enumerate(changes, 1)]  # fmt: skip
    if drain is not None:
        events.append({"at": START + drain, "kind": "drain", "message": "publishing stopped"})
    return split_phases(events, START, START + end)


def spans(first: float, last_publish: float, last_consume: float) -> ActiveSpans:
    return ActiveSpans.from_times(
        START + first, START + last_publish, START + last_publish, START + first,
        START + last_consume,
    )  # fmt: skip


def test_a_row_straddling_the_last_send_gives_the_drain_its_rate_not_a_spike() -> None:
    """Worker 0 snapshots at .6 s: its row (9.6, 10.6] holds the middle of second 10, which
    is the drain's (publishing stopped at 10.02 s). Its 336 messages were sent in the
    0.42 s before the last send: the drain publishes at the row's 800 msg/s, not 336
    messages over the 0.02 s between the second's start and the last send."""
    rows = [row(0, at + 0.6, 1.0, 800, 800) for at in range(10)]  # up to 9.6 s
    rows.append(row(0, 10.6, 1.0, 336, 800))
    rows.append(row(0, 11.6, 1.0, 0, 0))
    figures = phase_throughput(
        rows, START_US, phases(drain=10.02, end=12.0), spans(0.0, 10.02, 10.6)
    )
    load, drain = figures[0], figures[1]
    assert (load["published"], load["publish_s"]) == (8000, pytest.approx(9.6))
    assert (drain["published"], drain["publish_s"]) == (336, pytest.approx(0.42))
    assert drain["publish_rate_mean"] == pytest.approx(800.0)
    assert drain["consume_s"] == pytest.approx(1.0)  # deliveries went on to 10.6 s
    whole = whole_throughput(figures.values())
    assert whole["published"] == 8336 and whole["publish_s"] == pytest.approx(10.02)


def test_two_workers_share_out_the_active_span_once() -> None:
    """Worker 1 snapshots 0.3 s after worker 0: the phases' active times are the mean of the
    two workers' cover, and add up to the run's first-to-last send exactly."""
    rows = [row(w, at + 1 + 0.3 * w, 1.0, 100, 100) for w in (0, 1) for at in range(20)]
    split = phases(10.15)  # between worker 0's snapshot at 10.0 s and worker 1's at 10.3 s
    figures = phase_throughput(rows, START_US, split, spans(0.5, 19.8, 19.9))
    first, second = figures[0], figures[1]
    # seconds 0..9 in the first phase: worker 0 covers [0.5, 10], worker 1 [0.5, 10.3]
    assert first["publish_s"] == pytest.approx((9.5 + 9.8) / 2)
    # seconds 10..19 in the second: worker 0 (10, 19.8], worker 1 (10.3, 19.8]
    assert second["publish_s"] == pytest.approx((9.8 + 9.5) / 2)
    assert first["published"] == second["published"] == 2000
    assert first["publish_s"] + second["publish_s"] == pytest.approx(19.3)
    assert first["publish_rate_mean"] == pytest.approx(2000 / 9.65)


def test_the_publish_rate_of_the_seconds_not_paused() -> None:
    """What a target is compared with: messages over active time of the seconds in which
    publishing ran throughout."""
    rows = [row(0, at + 1, 1.0, 0 if at < 2 else 200, 200) for at in range(10)]
    figures = phase_throughput(
        rows, START_US, phases(end=10.0), spans(0.0, 10.0, 10.0), paused_seconds={0, 1}
    )[0]
    assert figures["publish_rate_mean"] == pytest.approx(160.0)  # paused seconds count, at 0
    assert figures["publish_rate_unpaused_mean"] == pytest.approx(200.0)


def test_without_recorded_times_the_runs_bounds_stand_in() -> None:
    split = phases(drain=10.0, end=14.0)
    begin, drain = split[0].begin_us, split[-1].begin_us
    kept = ActiveSpans.of_session({"safety": {}}, begin, drain, split[-1].finish_us)
    assert not kept.recorded
    assert (kept.publish.seconds, kept.confirm.seconds, kept.consume.seconds) == (10, 10, 14)
    recorded = ActiveSpans.of_session(
        {"active": {"first_publish": START + 0.2, "last_publish": START + 9.9,
                    "last_confirm": START + 9.95, "first_consume": None,
                    "last_consume": None}},
        begin, drain, split[-1].finish_us,
    )  # fmt: skip
    assert recorded.recorded and recorded.publish.seconds == pytest.approx(9.7)
    assert recorded.consume.seconds == 0  # nothing was consumed: no consume time
