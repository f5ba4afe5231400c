"""How long publishers and consumers stood still after a fault, from hand-made per-second
rows (pure Python, no Spark, no broker)."""

from __future__ import annotations

from flowdeck.spark_reports.faults import faults, interrupted_s, interruption_sentence

RUN_START = 1000.0


def rates(
    steady: float, stalled: range, *, seconds: int = 20, low: float = 0.0
) -> dict[int, float]:
    return {s: (low if s in stalled else steady) for s in range(seconds)}


def test_the_longest_stall_after_the_fault_in_whole_seconds() -> None:
    confirms = rates(200.0, range(8, 11))  # 3 s of no confirms from second 8
    deliveries = rates(200.0, range(8, 13))  # 5 s of no deliveries
    assert interrupted_s(7.6, None, confirms) == 3.0
    assert interrupted_s(7.6, None, deliveries) == 5.0
    assert interruption_sentence(3.0, 5.0) == (
        "publishers interrupted 3 s, consumers interrupted 5 s"
    )


def test_a_trickle_is_a_stall_a_dip_is_not() -> None:
    # a few messages a second (5 % of 200 = 10) still counts as standing still
    assert interrupted_s(7.0, None, rates(200.0, range(8, 10), low=6.0)) == 2.0
    # one client of three gone: the rate dips to two thirds, nobody stood still
    assert interrupted_s(7.0, None, rates(300.0, range(8, 12), low=200.0)) == 0.0


def test_a_missing_second_counts_as_stalled_and_no_rate_before_says_nothing() -> None:
    confirms = rates(100.0, range(0))
    del confirms[9], confirms[10]
    assert interrupted_s(8.5, None, confirms) == 2.0
    assert interrupted_s(8.5, None, rates(0.0, range(0))) is None
    assert interrupted_s(0.2, None, rates(100.0, range(1, 3))) is None  # no second before
    assert interruption_sentence(None, 0.0) == (
        "publishers interrupted ?, consumers interrupted 0 s"
    )


def test_a_stall_long_after_the_fault_is_not_its_interruption() -> None:
    # the fault ended at 9 s; a stall from second 16 (> 9 + 5) belongs to something else
    late = rates(100.0, range(16, 19))
    assert interrupted_s(8.0, 9.0, late) == 0.0
    # a stall that began within the window is counted to its end
    assert interrupted_s(8.0, 9.0, rates(100.0, range(12, 19))) == 7.0


def test_each_fault_row_carries_both_sides() -> None:
    events = [
        {
            "at": RUN_START + 7.5,
            "kind": "info",
            "message": "node killed",
            "detail": {
                "fault": "kill",
                "stage": "done",
                "changed": True,
                "nodename": "rabbit-2@host",
                "source": "schedule",
            },
        },
        {
            "at": RUN_START + 7.6,
            "kind": "outage_started",
            "message": "lost",
            "detail": {"worker": 0},
        },
        {
            "at": RUN_START + 10.2,
            "kind": "outage_ended",
            "message": "back",
            "detail": {"worker": 0, "recovered": True},
        },
    ]
    confirms = rates(200.0, range(8, 10))
    deliveries = rates(200.0, range(8, 12))
    rows = faults(events, RUN_START, deliveries, confirms)
    assert [(f.kind, f.publishers_interrupted_s, f.consumers_interrupted_s) for f in rows] == [
        ("node down", 2.0, 4.0),
        ("outage", 2.0, 4.0),
    ]
    # without the publishers' rates, their side is not said
    assert faults(events, RUN_START, deliveries)[0].publishers_interrupted_s is None


def test_a_stale_source_closes_when_it_answers_again() -> None:
    """The management API stale for 5 s, then answering: one row, closed at the recovery.
    Sessions recorded before the events named their source in the detail pair too."""
    steady = rates(100.0, range(0))
    named = [
        {"at": RUN_START + 4.0, "kind": "source_stale", "detail": {"source": "management"},
         "message": "management: GET /api/overview timed out after 2 s"},
        {"at": RUN_START + 6.0, "kind": "source_stale", "detail": {"source": "management"},
         "message": "management: connection refused"},
        {"at": RUN_START + 9.0, "kind": "source_recovered", "detail": {"source": "management"},
         "message": "management answers again"},
    ]  # fmt: skip
    older = [{**event, "detail": {}} for event in named]
    for events in (named, older):
        (row,) = faults(events, RUN_START, steady)
        assert (row.kind, row.subject, row.start_s, row.end_s) == (
            "source stale", "management", 4.0, 9.0,
        )  # fmt: skip
