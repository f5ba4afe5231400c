"""The change ledger alone: no broker, no loop, no clock."""

from __future__ import annotations

from flowdeck.engine.change import Change, Setting, parse_change
from flowdeck.engine.ledger import ChangeLedger


def test_a_change_is_in_force_once_every_live_worker_applied_it() -> None:
    ledger = ChangeLedger()
    change_id = ledger.open(parse_change("inflight=200"), "operator", 10.0, {0, 1})
    assert change_id == 1
    ledger.worker_applied(change_id, 0, 10.2)
    assert ledger.complete(change_id, {0, 1}) is None
    assert [p.workers_done for p in ledger.view(2)] == [1]
    ledger.worker_applied(change_id, 1, 10.4)
    done = ledger.complete(change_id, {0, 1})
    assert done is not None and max(done.applied.values()) == 10.4
    assert ledger.view(2) == ()
    assert ledger.complete(change_id, {0, 1}) is None


def test_a_failed_worker_no_longer_holds_a_change_back() -> None:
    ledger = ChangeLedger()
    change_id = ledger.open(parse_change("prefetch=60"), "schedule", 1.0, {0, 1})
    ledger.worker_applied(change_id, 1, 1.5)
    assert ledger.complete(change_id, {0, 1}) is None
    assert ledger.complete(change_id, {1}) is not None


def test_ids_count_up_and_the_view_lists_the_oldest_first() -> None:
    ledger = ChangeLedger()
    first = ledger.open(parse_change("rate=30"), "operator", 1.0, set())
    second = ledger.open(parse_change("pause"), "api", 2.0, set())
    assert (first, second) == (1, 2)
    view = ledger.view(0)
    assert [p.change_id for p in view] == [1, 2]
    assert [p.source for p in view] == ["operator", "api"]
    assert all(p.workers_total == 1 for p in view)  # no worker known yet: one
    assert ledger.waiting_on(Setting.PAUSE) and not ledger.waiting_on(Setting.PREFETCH)


def test_phases_are_named_by_the_mark_or_the_change() -> None:
    ledger = ChangeLedger()
    assert (ledger.phase_index, ledger.phase) == (0, "start")
    assert ledger.next_phase(Change(Setting.MARK, label="warm")) == (1, "warm")
    inflight = parse_change("inflight=200")
    assert ledger.next_phase(inflight) == (2, inflight.describe())


def test_opened_clients_sum_what_each_worker_connected() -> None:
    ledger = ChangeLedger()
    change_id = ledger.open(parse_change("publishers=20"), "operator", 1.0, {0, 1})
    ledger.worker_applied(change_id, 0, 1.1, publishers=10, consumers=5)
    ledger.worker_applied(change_id, 1, 1.2, publishers=7, consumers=5)
    done = ledger.complete(change_id, {0, 1})
    assert done is not None and done.opened_clients() == 17


def test_opened_clients_is_unknown_when_a_worker_did_not_say() -> None:
    ledger = ChangeLedger()
    change_id = ledger.open(parse_change("consumers=4"), "operator", 1.0, {0, 1})
    ledger.worker_applied(change_id, 0, 1.1, consumers=2)
    ledger.worker_applied(change_id, 1, 1.2)
    done = ledger.complete(change_id, {0, 1})
    assert done is not None and done.opened_clients() is None
    rate = ledger.open(parse_change("rate=5"), "operator", 2.0, {0})
    ledger.worker_applied(rate, 0, 2.1, publishers=3)
    done_rate = ledger.complete(rate, {0})
    assert done_rate is not None and done_rate.opened_clients() is None
