"""Exact in every column with several workers: client counts, phase boundaries that fall
between two workers' snapshots, a catch-up phase at a swept value, a pause and a resume.

One report over two sessions serves every test here (the Spark session is shared): the
same recorded run twice, its changes once on a whole second and once 0.15 s later —
between worker 0's snapshot and worker 1's, which come 0.3 s apart.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from flowdeck.spark_reports.build import Report, build_report
from tests.spark_reports import expected as exp
from tests.spark_reports.synthetic import START, PhasePlan, SyntheticSession, write_session

pytestmark = pytest.mark.spark

#: An in-flight sweep whose value 20 ran steady, then with consumers stopped, then catching
#: up on the backlog (slow: the backlog's wait), then paused and resumed.
PLANS = [
    PhasePlan(seconds=10, inflight=10, publish_share=0.8),
    PhasePlan(seconds=10, inflight=20, publish_share=0.99),
    PhasePlan(seconds=6, inflight=20, consume_share=0.0, depth_growth=200, label="consumers=0"),
    PhasePlan(
        seconds=6,
        inflight=20,
        consume_share=1.5,
        depth_growth=-200,
        latency_us=300_000,
        label="consumers=1",
    ),
    PhasePlan(seconds=5, inflight=20, paused_seconds=5, label="pause"),
    PhasePlan(seconds=12, inflight=20, label="resume"),
]
WORKER_OFFSET_S = 0.3
#: Worker 1 loses its connection as the consumers stop (at 20 s); a memory alarm that
#: both broker sources report, overlapping.
FAULTS = [
    {
        "at": 20.2,
        "kind": "outage_started",
        "message": "worker 1 lost its connection",
        "detail": {"worker": 1, "reason": "connection reset"},
    },
    {
        "at": 22.7,
        "kind": "outage_ended",
        "message": "worker 1 reconnected",
        "detail": {
            "worker": 1,
            "seconds": 2.5,
            "recovered": True,
            "unconfirmed_at_drop": 7,
            "unacked_at_drop": 3,
        },
    },
    {
        "at": 40.0,
        "kind": "alarm_raised",
        "message": "memory alarm raised (from management)",
        "detail": {"alarm": "memory", "source": "management"},
    },
    {
        "at": 40.5,
        "kind": "alarm_raised",
        "message": "memory alarm raised (from prometheus)",
        "detail": {"alarm": "memory", "source": "prometheus"},
    },
    {
        "at": 42.0,
        "kind": "alarm_cleared",
        "message": "memory alarm cleared (from management)",
        "detail": {"alarm": "memory", "source": "management"},
    },
    {
        "at": 43.0,
        "kind": "alarm_cleared",
        "message": "memory alarm cleared (from prometheus)",
        "detail": {"alarm": "memory", "source": "prometheus"},
    },
]
#: When the clients were active (seconds after the start), as a run's summary records it:
#: not on a whole second, and inside what both workers' rows cover (worker 0 [0, 49] s,
#: worker 1 [0.3, 49.3] s), as a real worker snapshots from before its first send to after
#: its last delivery.
ACTIVE = {"first_publish": 0.34, "last_publish": 48.93, "last_confirm": 48.96,
          "first_consume": 0.37, "last_consume": 48.98}  # fmt: skip
SUMMARY = {"safety": {"published": 9000, "confirmed": 8990, "nacked": 0, "returned": 0,
                      "consumed": 8993, "redelivered": 5, "duplicates": 3, "unconfirmed": 10,
                      "lost": 0, "confirms": True},
           "active": {name: START + at for name, at in ACTIVE.items()}}  # fmt: skip
SPANS = {
    "publish": (START + ACTIVE["first_publish"], START + ACTIVE["last_publish"]),
    "confirm": (START + ACTIVE["first_publish"], START + ACTIVE["last_confirm"]),
    "consume": (START + ACTIVE["first_consume"], START + ACTIVE["last_consume"]),
}
LABELS = ["inflight=10", "inflight=20", "consumers=0", "consumers=1", "pause", "resume"]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticSession]:
    root = tmp_path_factory.mktemp("exact")
    common: dict[str, Any] = {"seed": 11, "exact_histograms": False,
                              "worker_offset_s": WORKER_OFFSET_S, "extra_events": FAULTS,
                              "summary": SUMMARY}  # fmt: skip
    return {
        "whole": write_session(root, "on-the-second", PLANS, **common),
        "between": write_session(
            root, "between-snapshots", PLANS, boundary_offset_s=0.15, **common
        ),
    }


@pytest.fixture(scope="module")
def report(spark: Any, sessions: dict[str, SyntheticSession], tmp_path_factory: Any) -> Report:
    out = tmp_path_factory.mktemp("exact-report")
    return build_report(spark, [str(s.path) for s in sessions.values()], out)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_two_workers_figures_match_an_independent_recomputation(
    report: Report, sessions: dict[str, SyntheticSession]
) -> None:
    session = sessions["between"]
    want = exp.recompute_from_parquet(session.path, session.start, session.boundaries)
    active, _ = exp.active_rates(session.path, session.start, session.boundaries, SPANS)
    rows = read_csv(report.out_dir / "between-snapshots-throughput.csv")
    assert [r["label"] for r in rows] == LABELS
    latency = read_csv(report.out_dir / "between-snapshots-latency.csv")
    for row, figures, rates in zip(rows, want, active, strict=True):
        # each worker records the run's 2 publishers and 2 consumers: 2, not 4
        assert (int(row["publishers"]), int(row["consumers"])) == (2, 2)
        assert (figures["publishers"], figures["consumers"]) == (2, 2)
        for rate in ("publish", "confirm", "consume"):
            for stat in ("per-second sd", "per-second min"):
                column = f"{rate} {stat}"
                assert float(row[column]) == round(figures[column], 3), (row["label"], column)
            for column in (f"{rate} mean", f"{rate} active s"):
                assert float(row[column]) == round(rates[column], 3), (row["label"], column)
            column = f"{rate} messages"
            assert int(row[column]) == rates[column], (row["label"], column)
        for kind in ("e2e actual", "e2e intended", "confirm actual"):
            (lat,) = (r for r in latency if r["label"] == row["label"] and r["latency"] == kind)
            assert float(lat["p99"]) == figures[f"{kind} p99"] / 1000, (row["label"], kind)
            assert int(lat["count"]) == figures[f"{kind} count"]


def test_a_boundary_between_two_workers_snapshots_splits_no_second(report: Report) -> None:
    out = report.out_dir
    for table in ("throughput", "latency", "flow", "sweep-inflight"):
        whole = read_csv(out / f"on-the-second-{table}.csv")
        between = read_csv(out / f"between-snapshots-{table}.csv")
        for row in [*whole, *between]:
            # the phases' own times differ by the 0.15 s the changes moved; nothing else
            row.pop("start s", None)
            row.pop("duration s", None)
        assert whole == between, table
    throughput = read_csv(out / "between-snapshots-throughput.csv")
    # 10 whole seconds at 2 × 99 msg/s: no second split into two partial ones
    steady = throughput[1]
    assert float(steady["publish per-second min"]) > 180


def test_the_recommendation_quotes_the_steady_phase_not_the_catch_up(report: Report) -> None:
    table = next(t for t in report.tables if t.name == "between-snapshots-sweep-inflight")
    latency = read_csv(report.out_dir / "between-snapshots-latency.csv")

    def p99(label: str) -> float:
        (row,) = (r for r in latency if r["label"] == label and r["latency"] == "e2e actual")
        return float(row["p99"])

    assert p99("consumers=1") > 100 * p99("inflight=20")  # the backlog's wait
    reasoning = "\n".join(table.reasoning)
    # the phase that took the backlog is judged draining it: never a candidate
    assert "inflight=20 (consumers=1): excluded (draining a backlog)" in reasoning
    assert table.reasoning[0].startswith("best throughput ") and (
        "at inflight=20;" in table.reasoning[0]
    )
    last = table.reasoning[-1]
    assert last.startswith("recommended inflight=20: the smallest candidate")
    assert f"p99 {p99('inflight=20'):.2f} ms" in last
    assert f"{p99('consumers=1'):.2f}" not in last


def test_a_paused_phase_and_the_resume_get_true_reasons(report: Report) -> None:
    flow = {r["label"]: r for r in read_csv(report.out_dir / "between-snapshots-flow.csv")}
    assert flow["pause"]["verdict"] == "paused"
    assert flow["pause"]["why"].startswith("publishers paused throughout: no load to judge")
    assert "no target rate" not in flow["pause"]["why"]
    # The resume's first second began paused (half its rate): left out of the target
    # comparison, not read as publishers held back.
    assert flow["resume"]["verdict"] == "sustainable", flow["resume"]["why"]
    assert "1 s paused (for all or part of the second)" in flow["resume"]["why"]
    sweep = next(t for t in report.tables if t.name == "between-snapshots-sweep-inflight")
    assert "pause" not in [row[-1] for row in sweep.rows]


def test_each_run_has_its_faults_and_what_it_lost(report: Report) -> None:
    faults = read_csv(report.out_dir / "between-snapshots-faults.csv")
    assert [(f["fault"], f["what"]) for f in faults] == [
        ("outage", "worker 1"),
        ("alarm", "memory alarm"),
    ]
    outage, alarm = faults
    assert (float(outage["start s"]), float(outage["duration s"])) == (20.2, 2.5)
    # consumers took nothing from 20 s (consumers=0) and were back at their rate in the
    # catch-up phase's first second, 26 s: 5.8 s after the outage began
    assert float(outage["consumers back after s"]) == 5.8
    # the consumers=0 phase's six seconds (20-25) took nothing; publishers went on
    assert (float(outage["publishers stalled s"]), float(outage["consumers stalled s"])) == (0, 6)
    # the synthetic alarm blocks nobody: neither side stood still
    assert (float(faults[1]["publishers stalled s"]), float(faults[1]["consumers stalled s"])) == (
        0,
        0,
    )
    assert "7 unconfirmed and 3 unacked at the drop" in outage["detail"]
    # both sources' reports make one alarm, from the first raise to the last clear
    assert (float(alarm["start s"]), float(alarm["end s"])) == (40.0, 43.0)
    table = next(t for t in report.tables if t.name == "between-snapshots-faults")
    assert table.reasoning == (
        "data safety: published 9,000, consumed 8,993; lost 0 (confirmed, never consumed), "
        "duplicated 3, unconfirmed at the end 10, nacked 0, returned 0, redelivered 5",
    )


def test_the_phases_add_up_to_the_whole_run_on_the_summarys_basis(
    report: Report, sessions: dict[str, SyntheticSession]
) -> None:
    """msg/s = messages / the clients' active time, phase by phase and for the whole run:
    the phases' messages and active seconds add up to the run's, which are every recorded
    message over the summary's first-to-last spans."""
    session = sessions["between"]
    _, whole = exp.active_rates(session.path, session.start, session.boundaries, SPANS)
    rows = read_csv(report.out_dir / "between-snapshots-throughput.csv")
    for rate, column, span in (("publish", "published", SPANS["publish"]),
                               ("confirm", "confirmed", SPANS["confirm"]),
                               ("consume", "consumed", SPANS["consume"])):  # fmt: skip
        recorded = sum(r[column] for r in session.client)
        assert whole[f"{rate} messages"] == recorded
        assert sum(int(r[f"{rate} messages"]) for r in rows) == recorded
        # every worker's rows cover the span once: the phases share it out exactly
        assert round(whole[f"{rate} active s"], 6) == round(span[1] - span[0], 6)
        assert sum(float(r[f"{rate} active s"]) for r in rows) == pytest.approx(
            span[1] - span[0], abs=0.0005 * len(rows)
        )
    table = next(t for t in report.tables if t.name == "between-snapshots-throughput")
    (line,) = table.reasoning
    assert line == (
        f"whole run: publish {whole['publish mean']:,.1f} msg/s "
        f"({whole['publish messages']:,} over {whole['publish active s']:.2f} s), "
        f"confirm {whole['confirm mean']:,.1f} msg/s "
        f"({whole['confirm messages']:,} over {whole['confirm active s']:.2f} s), "
        f"consume {whole['consume mean']:,.1f} msg/s "
        f"({whole['consume messages']:,} over {whole['consume active s']:.2f} s); "
        "active time from the run's own first and last send, confirm and delivery"
    )
