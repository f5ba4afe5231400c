"""A new steerable setting is one registry row, end to end.

The row lives in this test (written to a module of its own, named by ``FLOWDECK_SETTINGS``
as any added setting is) and nowhere else: no other file of flowdeck names it. A run on the
shared broker starts it at 4 and changes it to 8 halfway; the session's Parquet schema has
its column, the manifest lists it, the replay's settings bar and per-setting table show it,
the /metrics gauge carries it, and the Spark report (which reads the session's own list of
settings, without the row) has its column in the per-phase table and its sweep.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flowdeck.engine.recording import format as fmt
from flowdeck.spark_reports.build import build_report
from tests.conftest import SHARED_URI

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

ROW = """
from flowdeck.engine.settings import Scope, Step, SteerableSetting, new_setting

SETTINGS = SteerableSetting(
    new_setting("knob"),
    "knob",
    int,
    0,
    1000,
    "a knob the consumers carry (the test's own row)",
    label="test knob",
    short="knob",
    key="",
    step=Step.HALVE_DOUBLE,
    applies_to=Scope.CONSUMER,
    default=4,
    title="Test knob",
    tag="kn",
    sweep=True,
    aliases=("dial",),
)
"""

#: Runs in a process that has the row: a run, then its replay in the cockpit and /metrics.
SCRIPT = """
import asyncio, json, sys
from pathlib import Path

from flowdeck.cli import main
from flowdeck.engine.recording.reader import list_sessions, open_session
from flowdeck.engine.metrics_endpoint import MetricsEndpoint
from prometheus_client import generate_latest
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.replay import load_replay
from flowdeck.tui.screens.replay import ReplayScreen
from flowdeck.tui.widgets.settings_bar import SettingsBar
from flowdeck.tui.widgets.setting_table import SettingTable, row_setting, varying_settings

code = main([
    "run", "--uri", sys.argv[1], "--name", "added-setting", "--duration", "8s",
    "--publishers", "1", "--consumers", "1", "--rate", "200", "--queues", "1",
    "--queue-pattern", "flowdeck-added-setting-%d", "--workers", "1",
    "--knob", "4", "--change", "4s:dial=8", "--skip-capacity-check", "--cleanup",
])
(info,) = list_sessions(Path(sys.argv[2]))
session = open_session(info.path)
replay = load_replay(session)
found = {"code": code, "session": str(info.path),
         "snapshots": sorted({s.settings.value("knob") for s in session.client_snapshots()})}

async def cockpit() -> None:
    app = FlowdeckApp()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = ReplayScreen(replay, autoplay=False)
        await app.push_screen(screen)
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        found["bar"] = str(screen.query_one(SettingsBar).render())
        await pilot.press("t")
        await pilot.pause()
        verdicts = screen.query_one(SettingTable).verdicts
        varying = varying_settings(verdicts.rows)
        found["rows"] = [row_setting(row, varying) for row in verdicts.rows]
        found["swept"] = [s.setting.value for s in verdicts.sweeps]

asyncio.run(cockpit())
endpoint = MetricsEndpoint()
endpoint.observe(replay.frames[-1].tick)
found["metrics"] = generate_latest(endpoint.registry).decode()
print(json.dumps(found))
"""


def test_a_setting_added_as_one_row_is_recorded_replayed_shown_and_reported(
    tmp_path: Path, spark: object
) -> None:
    (tmp_path / "knob_setting.py").write_text(textwrap.dedent(ROW), encoding="utf-8")
    sessions = tmp_path / "sessions"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "FLOWDECK_SETTINGS": "knob_setting:SETTINGS",
        "FLOWDECK_SESSIONS_DIR": str(sessions),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, SHARED_URI, str(sessions)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["code"] == 0, done.stderr[-3000:]
    session = Path(found["session"])

    # The session: the manifest lists the row, the client table has its column.
    manifest = json.loads((session / fmt.MANIFEST).read_text(encoding="utf-8"))
    listed = {s["name"]: s for s in manifest["settings"]}
    assert listed["knob"] == {"name": "knob", "kind": "int", "title": "Test knob", "tag": "kn",
                              "sweep": True}  # fmt: skip
    assert manifest["spec"]["knob"] == 4
    (part, *_) = sorted((session / fmt.CLIENT_DIR).glob("part-*.parquet"))
    schema = pq.read_schema(part)
    assert schema.field("knob").type == "int32"
    client = pq.read_table(session / fmt.CLIENT_DIR)
    assert set(client.column("knob").to_pylist()) == {4, 8}

    # The replay: the recorded snapshots carry it, the settings bar and the per-setting
    # table show it, and it is judged as a sweep of its own.
    assert found["snapshots"] == [4, 8]
    assert "knob 8" in found["bar"], found["bar"]
    assert any("kn=4" in row for row in found["rows"]), found["rows"]
    assert any("kn=8" in row for row in found["rows"]), found["rows"]
    assert "knob" in found["swept"]
    assert "flowdeck_knob 8.0" in found["metrics"], found["metrics"]

    # The report, in this process, which has no such row: it reads the session's own list.
    report = build_report(spark, [str(session)], tmp_path / "report")  # type: ignore[arg-type]
    throughput = next(report.out_dir.glob("*-throughput.csv"))
    rows = list(csv.DictReader(throughput.open(encoding="utf-8")))
    assert "knob" in rows[0], list(rows[0])
    assert {row["knob"] for row in rows if row["label"] != "drain"} == {"4", "8"}
    (figures,) = report.figures
    assert [s.setting for s in figures.sweeps] == ["knob"]
    titles = [t.title for t in report.tables]
    assert "added-setting: test knob sweep" in titles, titles
    assert any(chart.name.endswith("-knob.png") for chart in report.charts), report.charts
