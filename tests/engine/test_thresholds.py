"""Thresholds: the grammar, its one-line errors, evaluation over a summary and its phases,
the JUnit file, and the per-phase table they read (pure, no broker)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flowdeck.cli.summary import summary_document
from flowdeck.engine.errors import SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis, encode, new_histogram
from flowdeck.engine.phase_figures import PhaseTable
from flowdeck.engine.progress import DataSafety, RunSummary
from flowdeck.engine.sinks import RunStarted
from flowdeck.engine.snapshot import ActiveTimes, ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec, spec_from_mapping
from flowdeck.engine.thresholds import (
    METRICS,
    evaluate_thresholds,
    parse_threshold,
    write_junit,
)
from flowdeck.figures import Percentiles
from tests.figures.factories import phase, run

E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)


def _summary(**changes: object) -> RunSummary:
    values: dict[str, object] = {
        "name": "ci",
        "started": 1000.0,
        "ended": 1012.0,
        "outcome": "completed",
        "stop_reason": "duration reached",
        "safety": DataSafety(10_000, 10_000, 0, 0, 9_990, 0, 0, 0, 10),
        "publish_rate": 1000.0,
        "confirm_rate": 1000.0,
        "consume_rate": 985.0,
        "latency": {E2E: Percentiles(10_000, 2.0, 3.0, 8.0, 12.5, 20.0, 40.0)},
        "active": ActiveTimes(1000.2, 1010.2, 1010.3, 1000.21, 1010.4),
    }
    values.update(changes)
    return RunSummary(**values)  # type: ignore[arg-type]


PHASES = [
    phase(0, "start", p99=4.0, consume=1000.0),
    phase(1, "inflight=200", p99=150.0, consume=990.0),
    phase(2, "drain", p99=1.0, consume=10.0, drain=True),
]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("e2e_p99 < 50", "e2e_p99 is a time: give the number a unit (ms, s or us)"),
        ("e2e_p98 < 50ms", "unknown run metric 'e2e_p98'; run metrics: target, publish_rate"),
        ("lost = 0", "unexpected '=' at column 6"),
        ("lost == 0ms", "compares a time with a number"),
        ("lost < 1 < 2", "one comparison per threshold"),
        ("e2e_p99 < 50xs", "'50xs' at column 11 is not a number with a unit"),
        ("2 < 3", "compares no metric"),
        ("lost", "expected a comparison (<, <=, >, >=, ==, !=) at column 5, found the end"),
        ("(lost < 1", "missing ')'"),
        ("phase:inflight=200", "a comparison must follow phase:inflight=200"),
        ("phase:* lost == 0", "unknown phase metric 'lost' (run only: drop phase:)"),
        ("publish_rate_min > 5", "(per phase: add phase:*)"),
        ("e2e_p99 * consume_rate < 5ms", "multiply a time only by a plain number"),
        ("__import__ == 0", "unknown run metric '__import__'"),
        ("open('x') == 0", 'unexpected "\'" at column 6'),
        ("", "empty threshold"),
    ],
)
def test_a_bad_threshold_is_one_line_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_threshold(text)
    message = caught.value.message
    assert problem in message and "\n" not in message
    assert caught.value.field == "thresholds"


def test_units_and_percent_read_as_the_same_quantity() -> None:
    summary = _summary()
    for text in ("e2e_p99 < 13ms", "e2e_p99 < 0.013s", "e2e_p99 < 13000us", "e2e_p99 < 13 ms"):
        [result] = evaluate_thresholds([parse_threshold(text)], summary, [], target_rate=1000)
        assert result.passed, (text, result.reason)
    [ratio] = evaluate_thresholds(
        [parse_threshold("lost_ratio <= 0.1%")], summary, [], target_rate=1000
    )
    assert ratio.passed and ratio.value == pytest.approx(0.001)


def test_run_thresholds_give_value_bound_and_verdict() -> None:
    thresholds = [
        parse_threshold(t)
        for t in (
            "e2e_p99 < 50ms",
            "lost == 0",
            "consume_rate >= 0.98 * target",
            "(e2e_p99 - e2e_p50) / e2e_p50 < 10",
            "publish_time >= 10s",
        )
    ]
    results = evaluate_thresholds(thresholds, _summary(), PHASES, target_rate=1000)
    assert [r.passed for r in results] == [True, False, True, True, True]
    lost = results[1]
    assert (lost.value, lost.bound, lost.scope) == (10, 0, "run")
    assert lost.reason == "lost = 10, not == 0"
    assert results[2].bound == pytest.approx(980.0) and results[2].unit == "msg/s"
    assert results[0].reason == "e2e_p99 = 12.5 ms, < 50 ms"


def test_phase_thresholds_read_each_chosen_phase_and_fail_on_a_missing_one() -> None:
    thresholds = [
        parse_threshold("phase:inflight=200 e2e_p99 < 100ms"),
        parse_threshold("phase:* consume_rate >= 98% * target"),
        parse_threshold("phase:1 e2e_p99 < 1s"),
        parse_threshold('phase:"warm up" e2e_p99 < 1s'),
    ]
    results = evaluate_thresholds(thresholds, _summary(), PHASES, target_rate=1000)
    assert [(r.scope, r.passed) for r in results] == [
        ("phase 1 (inflight=200)", False),
        ("phase 0 (start)", True),  # phase:* leaves the drain out
        ("phase 1 (inflight=200)", True),
        ("phase 1 (inflight=200)", True),
        ("phase warm up", False),
    ]
    assert "the run had no phase 'warm up'" in results[-1].reason


def test_a_metric_never_measured_fails_rather_than_passes() -> None:
    summary = _summary(latency={})
    results = evaluate_thresholds(
        [parse_threshold("e2e_p99 < 50ms"), parse_threshold("consume_rate >= 0.9 * target")],
        summary,
        [],
        target_rate=0,  # no rate limit: no target
    )
    assert [r.passed for r in results] == [False, False]
    assert results[0].reason == "e2e_p99 was not measured in this run"
    assert results[1].value is None


def test_every_metric_has_a_value_in_its_scope() -> None:
    from flowdeck.engine.thresholds import phase_values, run_values

    run = run_values(_summary(), 1000)
    phase = phase_values(PHASES[0])
    for name, metric in METRICS.items():
        assert (name in run) == metric.run, name
        assert (name in phase) == metric.phase, name


def test_junit_names_each_threshold_and_its_failure(tmp_path: Path) -> None:
    results = evaluate_thresholds(
        [parse_threshold("lost == 0"), parse_threshold("e2e_p99 < 50ms")],
        _summary(),
        PHASES,
        target_rate=1000,
    )
    path = tmp_path / "ci" / "junit.xml"
    write_junit(path, results, run_name="ci", duration=12.0)
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["lost == 0", "e2e_p99 < 50ms"]
    failure = cases[0].find("failure")
    assert failure is not None and "lost = 10, not == 0" in (failure.get("message") or "")
    assert cases[1].find("failure") is None


def test_spec_files_carry_thresholds_and_refuse_bad_ones() -> None:
    spec = spec_from_mapping({"thresholds": ["lost == 0", " e2e_p99 < 5ms "]})
    assert spec.thresholds == ("lost == 0", "e2e_p99 < 5ms")
    assert spec.to_mapping()["thresholds"] == ["lost == 0", "e2e_p99 < 5ms"]
    with pytest.raises(SpecError, match="thresholds must be a list of text"):
        spec_from_mapping({"thresholds": "lost == 0"})
    with pytest.raises(SpecError, match="threshold 'lost <> 0'"):
        RunSpec(thresholds=("lost <> 0",))


def test_the_json_document_carries_spec_phases_and_results() -> None:
    spec = RunSpec(uri="amqp://guest:secret@localhost:5672/%2F", rate=500, publishers=2)
    results = evaluate_thresholds(
        [parse_threshold("lost == 0")], _summary(target_rate=1000.0), PHASES, target_rate=1000
    )
    document = summary_document(
        _summary(target_rate=1000.0), spec.redacted(), run(*PHASES), results
    )
    assert document["target_rate"] == 1000.0
    assert "secret" not in str(document) and document["spec"]["rate"] == 500
    assert document["publish_seconds"] == pytest.approx(10.0)
    assert [p["label"] for p in document["phase_table"]] == ["start", "inflight=200", "drain"]
    assert document["phase_table"][1]["latency_ms"]["e2e_actual"]["p99"] == 150.0
    assert document["thresholds"][0]["passed"] is False
    assert document["thresholds_passed"] is False


# -- the per-phase table, by the report's rules -------------------------------------------------


def _snap(
    worker: int,
    at: float,
    published: int,
    *,
    interval: float = 1.0,
    latency_ms: float | None = None,
    target: float = 100.0,
) -> ClientSnapshot:
    blobs = {}
    if latency_ms is not None:
        histogram = new_histogram()
        histogram.record_value(int(latency_ms * 1000))
        blobs[E2E] = encode(histogram)
    return ClientSnapshot(
        worker=worker,
        at=at,
        interval=interval,
        counters=Counters(published=published, confirmed=published, consumed=published),
        pending_confirms=2,
        unacked=0,
        connections=2,
        blocked=0,
        settings=Settings.of(
            inflight=1000, prefetch=1000, ack_every=1, rate=100.0, publishers=1, consumers=1
        ),
        target_rate=target,
        latency=blobs,
    )


def test_phase_table_splits_at_phase_and_drain_events_like_the_report() -> None:
    table = PhaseTable()
    spec = RunSpec()
    table.on_start(RunStarted(spec, 100.0, 1))
    table.add_event(
        RunEvent(100.0, EventKind.PHASE, "phase 0: start", detail={"index": 0, "label": "start"})
    )
    for second in range(1, 4):  # worker 0: 100 msg/s, 2 ms
        table.add_snapshot(_snap(0, 100.0 + second, 100 * second, latency_ms=2.0))
    table.add_event(
        RunEvent(
            103.5, EventKind.PHASE, "phase 1: rate=200", detail={"index": 1, "label": "rate=200"}
        )
    )
    for second in range(4, 6):  # 200 msg/s, 20 ms
        table.add_snapshot(
            _snap(0, 100.0 + second, 300 + 200 * (second - 3), latency_ms=20.0, target=200)
        )
    table.add_event(RunEvent(105.5, EventKind.DRAIN, "publishing stopped"))
    table.add_snapshot(_snap(0, 105.8, 700, interval=0.3, latency_ms=1.0, target=0))  # cut short
    found = table.figures(ended=106.0)
    assert found is not None
    start, changed, drain = found.phases
    assert (start.label, changed.label, drain.label) == ("start", "rate=200", "drain")
    assert start.seconds == 3 and start.figure("publish_rate_mean") == pytest.approx(100.0)
    start_e2e = start.percentiles(E2E)
    assert start.target_rate == pytest.approx(100.0) and start_e2e is not None
    assert start_e2e.p99 == pytest.approx(2.0, rel=0.01)
    changed_e2e = changed.percentiles(E2E)
    assert changed.figure("publish_rate_mean") == pytest.approx(200.0)
    # its first second (103-104 s) straddles the change at 103.5 s: half at the old target
    assert changed.target_rate == pytest.approx((0.5 * 100 + 0.5 * 200 + 200) / 2)
    assert changed_e2e is not None and changed_e2e.count == 2
    assert (changed.start_s, changed.end_s) == (3.5, 5.5)
    # the drain's only interval is shorter than half a second: no rate, but its latency counts
    drain_e2e = drain.percentiles(E2E)
    assert drain.is_drain and drain.seconds == 0 and drain.target_rate is None
    assert drain_e2e is not None and drain_e2e.count == 1
