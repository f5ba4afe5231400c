"""A real recorded run, reported: the report's msg/s are the run summary's, whole run and
phase by phase (issue 17: one run used to read 1000.0 / 991 / 980.3 in the summary,
`sessions show` and the report).

One short run on the shared broker, two worker processes and a change half-way, recorded
by `flowdeck run --json` as a user runs it; then the report job on the shared Spark
session.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from flowdeck.spark_reports.build import Report, build_report
from tests.conftest import SHARED_URI

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROOT = Path(__file__).resolve().parents[2]
RATES = ("publish", "confirm", "consume")
COUNTS = {"publish": "published", "confirm": "confirmed", "consume": "consumed"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The JSON summary of a 5 s run (2 workers × 1 publisher at 300 msg/s, the in-flight
    limit changed at 2.5 s), recorded under a private sessions directory."""
    sessions = tmp_path_factory.mktemp("real-sessions")
    queue = f"flowdeck-test-report-rates-{uuid.uuid4().hex[:8]}"
    result = subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", "run", "--uri", SHARED_URI,
         "--queue-pattern", f"{queue}-%d", "--duration", "5", "--rate", "300",
         "--publishers", "2", "--consumers", "2", "--workers", "2", "--drain", "2",
         "--change", "2.5s:inflight=20", "--sessions-dir", str(sessions), "--cleanup",
         "--json"],
        capture_output=True, text=True, timeout=90, cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary: dict[str, Any] = json.loads(result.stdout)
    assert summary["session_dir"], summary
    return summary


@pytest.fixture(scope="module")
def report(spark: Any, recorded: dict[str, Any], tmp_path_factory: Any) -> Report:
    return build_report(spark, [recorded["session_dir"]], tmp_path_factory.mktemp("real-report"))


def throughput(report: Report) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    (table,) = (t for t in report.tables if t.name.endswith("-throughput"))
    with (report.out_dir / f"{table.name}.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle)), table.reasoning


def test_the_reports_whole_run_msg_s_are_the_summarys(
    report: Report, recorded: dict[str, Any]
) -> None:
    _, reasoning = throughput(report)
    safety = recorded["safety"]
    parts = [
        f"{rate} {recorded[f'{rate}_rate']:,.1f} msg/s ({safety[COUNTS[rate]]:,} over "
        f"{recorded[f'{rate}_seconds']:.2f} s)"
        for rate in RATES
    ]
    assert reasoning == (
        f"whole run: {', '.join(parts)}; active time from the run's own first and last "
        "send, confirm and delivery",
    )


def test_each_phases_msg_s_is_the_json_phase_tables_and_they_add_up(
    report: Report, recorded: dict[str, Any]
) -> None:
    rows, _ = throughput(report)
    phases = recorded["phase_table"]
    assert (
        [r["label"] for r in rows]
        == [p["label"] for p in phases]
        == [
            "start",
            "inflight=20",
            "drain",
        ]
    )
    for row, phase in zip(rows, phases, strict=True):
        for rate in RATES:
            assert float(row[f"{rate} mean"]) == round(phase[f"{rate}_rate_mean"], 3)
            assert float(row[f"{rate} active s"]) == round(phase[f"{rate}_s"], 3)
            assert int(row[f"{rate} messages"]) == phase[COUNTS[rate]]
    for rate in RATES:
        # every message in exactly one phase; the phases share out the run's active time
        assert sum(p[COUNTS[rate]] for p in phases) == recorded["safety"][COUNTS[rate]]
        assert sum(p[f"{rate}_s"] for p in phases) == pytest.approx(
            recorded[f"{rate}_seconds"], abs=1e-4
        )
