"""`flowdeck run` for CI: thresholds decide the exit code, JUnit names them, the JSON
summary carries what a script needs, and a bad threshold stops everything before it starts.
Real broker, short runs, in a subprocess as CI runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def flowdeck(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": ""},
    )


def short_run(uri: str, queue: str, *extra: str) -> list[str]:
    return [
        "run",
        "--uri",
        uri,
        "--queue-pattern",
        f"{queue}-%d",
        "--duration",
        "3",
        "--rate",
        "200",
        "--workers",
        "0",
        "--drain",
        "2",
        "--cleanup",
        *extra,
    ]


def test_a_bad_threshold_is_one_line_and_exit_2_before_anything_starts() -> None:
    started = time.monotonic()
    # No broker at this address: the threshold is refused before any connection is tried.
    result = flowdeck(
        "run", "--uri", "amqp://guest:guest@127.0.0.1:1/%2F", "--threshold", "e2e_p99 < 50"
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "flowdeck: threshold 'e2e_p99 < 50': e2e_p99 is a time: give the number a unit "
        "(ms, s or us), e.g. e2e_p99 < 50ms"
    )
    assert result.stdout == ""
    assert time.monotonic() - started < 30


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_a_failing_threshold_exits_99_and_junit_names_it(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    junit = tmp_path / "reports" / "flowdeck.xml"
    result = flowdeck(
        *short_run(shared_uri, unique_name, "--no-record"),
        "--threshold",
        "lost == 0",
        "--threshold",
        "e2e_p99 < 1us",
        "--junit",
        str(junit),
    )
    assert result.returncode == 99, result.stderr
    assert "thresholds: 1 passed, 1 failed" in result.stdout
    assert "  FAIL  e2e_p99 < 1us: e2e_p99 = " in result.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["e2e_p99 < 1us"]
    passed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is None]
    assert passed == ["lost == 0"]


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_passing_thresholds_exit_0_with_a_json_summary_a_script_can_trust(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    spec = tmp_path / "ci.toml"
    spec.write_text('thresholds = ["lost == 0"]\n', encoding="utf-8")
    result = flowdeck(
        *short_run(shared_uri, unique_name, "--sessions-dir", str(tmp_path / "sessions")),
        "--spec",
        str(spec),
        "--change",
        "2s:inflight=200",
        "--threshold",
        "phase:* e2e_p99 < 10s",
        "--threshold",
        "publish_rate <= 1.1 * target",
        "--json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    assert summary["target_rate"] == 200.0
    assert summary["spec"]["thresholds"] == [
        "lost == 0",
        "phase:* e2e_p99 < 10s",
        "publish_rate <= 1.1 * target",
    ]
    assert "guest:guest" not in json.dumps(summary["spec"])  # the password is masked
    # msg/s = published over the workers' own first-to-last send, not the planned 3 s
    published = summary["safety"]["published"]
    assert summary["publish_rate"] == pytest.approx(published / summary["publish_seconds"])
    assert 0 < summary["publish_seconds"] < 3.5
    assert "first to last send" in summary["rate_meaning"]
    phases = summary["phase_table"]
    assert [(p["index"], p["label"], p["drain"]) for p in phases] == [
        (0, "start", False),
        (1, "inflight=200", False),
        (2, "drain", True),
    ]
    assert phases[1]["target_rate"] == 200.0 and phases[1]["publish_rate_mean"] > 0
    assert phases[1]["latency_ms"]["e2e_actual"]["p99"] > 0
    results = summary["thresholds"]
    assert [(r["threshold"], r["scope"]) for r in results] == [
        ("lost == 0", "run"),
        ("phase:* e2e_p99 < 10s", "phase 0 (start)"),
        ("phase:* e2e_p99 < 10s", "phase 1 (inflight=200)"),
        ("publish_rate <= 1.1 * target", "run"),
    ]
    assert all(r["passed"] for r in results) and summary["thresholds_passed"] is True
    assert results[0]["value"] == 0 and results[3]["bound"] == pytest.approx(220.0)

    # sessions show gives the summary's own mean rate and says what it divides by
    shown = flowdeck(
        "sessions",
        "show",
        "--sessions-dir",
        str(tmp_path / "sessions"),
        Path(summary["session_dir"]).name,
    )
    assert shown.returncode == 0, shown.stderr
    publish = next(line for line in shown.stdout.splitlines() if line.startswith("publish"))
    assert f"mean {summary['publish_rate']:,.1f} msg/s ({published:,} over " in publish
    assert "first to last send" in publish
