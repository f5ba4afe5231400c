"""The per-host table of a run whose workers ran on Spark hosts: two workers on two hosts,
the second lost 12 s into a 20 s run. Every figure is computed here from the rows written,
not through the report's code; a run of local workers gets no such table."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from flowdeck.spark_reports.build import Report, build_report
from tests.spark_reports import expected as exp
from tests.spark_reports.synthetic import PhasePlan, SyntheticSession, write_session

pytestmark = pytest.mark.spark

PLANS = [PhasePlan(seconds=10, inflight=10), PhasePlan(seconds=10, inflight=20, rate=150.0)]
HOSTS = {0: "load-a", 1: "load-b"}
LOST_AT = 12  # worker 1's last row is at second 12
PLACED = [
    {"at": 0.1 + w / 10, "kind": "info", "message": f"worker {w} connected from {h} (pid {9 + w})",
     "detail": {"worker": w, "host": h, "pid": 9 + w}}
    for w, h in HOSTS.items()
] + [
    {"at": LOST_AT + 0.4, "kind": "error",
     "message": "worker 1 on load-b (pid 10) lost: its link closed; the run goes on",
     "detail": {"worker_lost": 1, "host": "load-b", "pid": 10, "reason": "its link closed"}},
]  # fmt: skip


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticSession]:
    root = tmp_path_factory.mktemp("hosts")
    return {
        "spark": write_session(
            root, "two-hosts", PLANS, seed=5, exact_histograms=False, extra_events=PLACED,
            worker_ends={1: LOST_AT},
        ),
        "local": write_session(root, "local-workers", PLANS[:1], seed=6, exact_histograms=False),
    }  # fmt: skip


@pytest.fixture(scope="module")
def report(spark: Any, sessions: dict[str, SyntheticSession], tmp_path_factory: Any) -> Report:
    out = tmp_path_factory.mktemp("hosts-report")
    return build_report(spark, [str(s.path) for s in sessions.values()], out)


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _covered_s(rows: list[dict[str, Any]], session: SyntheticSession) -> float:
    """Seconds of the run (no summary: start to end) the rows' intervals cover."""
    return float(
        sum(
            max(
                0.0,
                min(exp.unix(r), session.end) - max(exp.unix(r) - r["interval_s"], session.start),
            )
            for r in rows
        )
    )


def test_per_host_rows_and_the_merged_row(
    report: Report, sessions: dict[str, SyntheticSession]
) -> None:
    session = sessions["spark"]
    rows = _read(report.out_dir / "two-hosts-hosts.csv")
    assert [r["host"] for r in rows] == ["load-a", "load-b", "all 2 host(s)"]
    assert [r["workers"] for r in rows] == ["0", "1", "0, 1"]
    assert [r["worker lost"] for r in rows] == ["", "1", "1"]
    covered = {}
    for worker, row in zip(HOSTS, rows, strict=False):
        mine = [r for r in session.client if r["worker"] == worker]
        covered[worker] = _covered_s(mine, session)
        for count, name in (("published", "publish"), ("confirmed", "confirm"),
                            ("consumed", "consume")):  # fmt: skip
            messages = sum(r[count] for r in mine)
            assert int(row[count]) == messages
            assert float(row[f"{name} msg/s"]) == pytest.approx(
                messages / covered[worker], abs=1e-3
            )
        latency = exp.hdr_merged(
            [r for r in session.latency if r["worker"] == worker], "e2e", "actual"
        )
        assert float(row["e2e p50 ms"]) == latency.get_value_at_percentile(50) / 1000
        assert float(row["e2e p99 ms"]) == latency.get_value_at_percentile(99) / 1000
    # the lost worker covered the run up to its last row only
    assert covered == {0: 20.0, 1: float(LOST_AT)}
    merged = rows[-1]
    for count, name in (("published", "publish"), ("confirmed", "confirm"),
                        ("consumed", "consume")):  # fmt: skip
        assert int(merged[count]) == int(rows[0][count]) + int(rows[1][count])
        total = sum(r[count] for r in session.client)
        assert int(merged[count]) == total
        # the run's active time is the workers' covered time averaged over the workers
        run_rate = total / ((covered[0] + covered[1]) / 2)
        assert float(merged[f"{name} msg/s"]) == pytest.approx(run_rate, abs=1e-3)
    everything = exp.hdr_merged(session.latency, "e2e", "actual")
    assert float(merged["e2e p99 ms"]) == everything.get_value_at_percentile(99) / 1000
    assert "## two-hosts: per host (Spark workers)" in (report.out_dir / "report.md").read_text()


def test_a_run_of_local_workers_has_no_host_table(report: Report) -> None:
    assert not (report.out_dir / "local-workers-hosts.csv").exists()
    assert [f.hosts for f in report.figures if f.session.title == "local-workers"] == [()]
