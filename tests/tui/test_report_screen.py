"""Reports from the cockpit: the report job started from the sessions screen (and the live
screen once the run has ended), its stage while it runs, its per-phase table when done.

One test runs the real job (a JVM, 30-60 s) over a synthetic session and checks the table
shown against the CSVs the job wrote. The others read ``report_fixture/`` (what that job
writes for the same session: the per-phase tables' .csv, their headings' .md and the sweep's
reasoning) or make the job fail before Spark starts.
"""

from __future__ import annotations

import csv
import shutil
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from flowdeck.spark_reports.tables import format_cell
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.report_files import HTML, latest_report, parse_cell, read_report
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.screens.report import ReportScreen
from flowdeck.tui.screens.sessions import SessionsScreen
from flowdeck.tui.widgets.setting_table import BEST_MARK
from tests.spark_reports.synthetic import PhasePlan, write_session
from tests.tui.fakes import FakeControl

FIXTURE = Path(__file__).parent / "report_fixture"
#: The fixture's session: a sweep of the in-flight limit, its knee at 20, and a drain.
SWEEP = [
    PhasePlan(seconds=20, inflight=10),
    PhasePlan(seconds=20, inflight=20, publish_share=0.8, blocked_seconds=3),
    PhasePlan(seconds=20, inflight=40, consume_share=0.9, depth_growth=25, mem_alarm_polls=4),
]
#: The job's whole run, JVM included, on a loaded two-core machine.
JOB_SECONDS = 180


def written_report(into: Path, name: str = "20240101-000000") -> Path:
    """The fixture as the job leaves it in ``reports/<time>/`` (its report.html stands
    for the job's: the screen only names and opens it)."""
    out = into / name
    shutil.copytree(FIXTURE, out)
    (out / HTML).write_text("<html><body>report</body></html>\n", encoding="utf-8")
    return out


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def shown(value: str) -> str:
    """A CSV cell as the report's Markdown (and the screen) prints it."""
    return str(format_cell(parse_cell(value)))


def table_rows(screen: ReportScreen) -> list[dict[str, str]]:
    table = screen.query_one(DataTable)
    keys = [column.key.value for column in table.ordered_columns]
    return [
        dict(zip(keys, (str(cell.plain).strip() for cell in table.get_row_at(i)), strict=True))
        for i in range(table.row_count)
    ]


def expected_rows(out: Path, key: str) -> list[dict[str, str]]:
    """The screen's columns, cell by cell from the CSVs the job wrote."""
    e2e = {
        r["phase"]: r for r in read_csv(out / f"{key}-latency.csv") if r["latency"] == "e2e actual"
    }
    flow = {r["phase"]: r for r in read_csv(out / f"{key}-flow.csv")}
    rows = []
    for r in read_csv(out / f"{key}-throughput.csv"):
        rows.append(
            {
                "phase": r["phase"],
                "label": r["label"],
                "inflight": shown(r["inflight"]),
                "publish": shown(r["publish mean"]),
                "consume": shown(r["consume mean"]),
                "p50": shown(e2e[r["phase"]]["p50"]),
                "p99": shown(e2e[r["phase"]]["p99"]),
                "verdict": flow[r["phase"]]["verdict"],
                "why": flow[r["phase"]]["why"],
            }
        )
    return rows


def status_of(screen: SessionsScreen) -> str:
    return str(screen.query_one("#report-status", Static).content)


@pytest.mark.slow
async def test_report_job_from_the_sessions_screen_shows_its_per_phase_csv(
    tmp_path: Path,
) -> None:
    """r on the highlighted session runs ``flowdeck report`` in a subprocess; the status says
    the stage the job is at; when done, the table shown is the job's CSV rows."""
    root = tmp_path / "sessions"
    write_session(root, "quorum-sweep", SWEEP, seed=7, exact_histograms=False, drain_seconds=4)
    app = FlowdeckApp(sessions_root=root, open_sessions=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        sessions = app.screen
        assert isinstance(sessions, SessionsScreen)
        for _ in range(50):
            if sessions.infos:
                break
            await pilot.pause(0.1)
        # Every stage the screen shows, as it shows it: looks every 50 ms missed a stage
        # that lasted less (the job's Spark stage, and once "[1/5] reading 1 session(s)").
        stages: list[str] = []
        show = sessions.show_report_progress

        def shown() -> None:
            stages.append(sessions.report_stage)
            show()

        sessions.show_report_progress = shown  # type: ignore[method-assign]
        await pilot.press("r")
        deadline = time.monotonic() + JOB_SECONDS
        while not isinstance(app.screen, ReportScreen) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert isinstance(app.screen, ReportScreen), status_of(sessions)
        await pilot.pause()  # its table filled on mount
        # The stages the job announces are shown in order from Spark's start.
        announced = [s for s in stages if s.startswith("[")]
        assert announced[:2] == ["[0/5] starting Spark", "[1/5] reading 1 session(s)"], stages
        assert [s[:5] for s in announced] == [f"[{i}/5]" for i in range(6)], stages

        out = app.screen.report.out_dir
        assert out.parent == tmp_path / "reports"
        assert table_rows(app.screen) == [
            {**row, "phase": f"{BEST_MARK} 0" if row["phase"] == "0" else row["phase"]}
            for row in expected_rows(out, "quorum-sweep")
        ]
        notes = str(app.screen.query_one("#report-lines", Static).content)
        sweep = (out / "quorum-sweep-sweep-inflight.md").read_text(encoding="utf-8")
        recommended = sweep.rstrip().splitlines()[-1].removeprefix("- ")
        assert recommended.startswith("recommended inflight=10:")
        assert recommended in notes
        assert str(out / HTML) in notes and (out / HTML).is_file()

        # Escape, and the last report is one key away.
        await pilot.press("escape")
        assert "report written to" in status_of(sessions)
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, ReportScreen) and app.screen.report.out_dir == out


def test_the_fixture_reads_as_the_job_wrote_it(tmp_path: Path) -> None:
    out = written_report(tmp_path)
    report = read_report(out)
    [session] = report.sessions
    assert session.title == "quorum-sweep"
    assert [p.label for p in session.phases] == [
        "inflight=10",
        "inflight=20",
        "inflight=40",
        "drain",
    ]
    assert session.varying == ("inflight",)
    assert session.best == 0
    assert session.recommendations[0].startswith("recommended inflight=10:")
    assert report.html_path == out / HTML


def test_the_highlighted_row_is_the_one_the_report_marked_recommended(tmp_path: Path) -> None:
    """The screen re-derives nothing: the report's throughput table marks the phase its
    recommendation stands on (the ``recommended`` column), and without a mark (no sweep, or
    no value recommended) no row is highlighted."""
    out = written_report(tmp_path)
    throughput = out / "quorum-sweep-throughput.csv"
    [session] = read_report(out).sessions
    assert session.best == 0
    rows = read_csv(throughput)
    for row in rows:
        row["recommended"] = ""
    with throughput.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    [unmarked] = read_report(out).sessions
    assert unmarked.best is None


def test_last_report_is_the_newest_finished_one(tmp_path: Path) -> None:
    older = written_report(tmp_path, "20240101-000000")
    newer = written_report(tmp_path, "20240102-000000")
    (tmp_path / "20240103-000000").mkdir()  # a job that never finished
    assert latest_report(tmp_path) == newer
    (older / HTML).touch()
    assert latest_report(tmp_path) == older
    assert latest_report(tmp_path / "none") is None


def test_two_sessions_get_a_session_column_and_a_best_row_each(tmp_path: Path) -> None:
    out = written_report(tmp_path)
    for source in list(out.glob("quorum-sweep-*")):
        text = source.read_text(encoding="utf-8").replace("quorum-sweep", "classic-sweep")
        (out / source.name.replace("quorum-sweep", "classic-sweep")).write_text(text)
    report = read_report(out)
    assert [s.title for s in report.sessions] == ["classic-sweep", "quorum-sweep"]
    screen = ReportScreen(report)
    assert [key for key, _ in screen.columns()][:3] == ["session", "phase", "label"]


async def test_l_without_a_report_says_where_it_looked(tmp_path: Path) -> None:
    app = FlowdeckApp(sessions_root=tmp_path / "sessions", open_sessions=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)
        said = [n.message for n in app._notifications]
        assert any(f"no report yet in {tmp_path / 'reports'}" in m for m in said), said


@pytest.mark.slow
async def test_g_on_the_live_screen_waits_for_the_run_then_reports_and_shows_a_failure(
    tmp_path: Path,
) -> None:
    """While the run records, g says why the report comes after it; once it has ended, g
    starts the job on its session. This session does not read: the job stops before Spark
    starts and the sessions screen shows its exit code and its error line, no traceback."""
    broken = tmp_path / "sessions" / "20240101-000000-broken"
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{", encoding="utf-8")
    fake = FakeControl()
    fake.session_dir = broken
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        live = app.screen
        assert isinstance(live, LiveScreen)
        await pilot.press("g")
        await pilot.pause()
        assert app.screen is live
        said = [n.message for n in app._notifications]
        assert any(m.startswith("the run is still recording") for m in said), said

        live.finished = True
        await pilot.press("g")
        await pilot.pause()
        sessions = app.screen
        assert isinstance(sessions, SessionsScreen)
        assert sessions.report_on == (broken,)
        deadline = time.monotonic() + 60
        while "report failed" not in status_of(sessions) and time.monotonic() < deadline:
            await pilot.pause(0.1)
        status = status_of(sessions)
        assert status.startswith("report failed (exit 2): flowdeck report: session "), status
        assert "unreadable manifest" in status and "Traceback" not in status
        assert sessions.report_began is None


def report_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FlowdeckApp:
    """The cockpit on the report screen for the fixture, at a path that reads the same on
    every machine, without a display (the line under the table says so)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    written_report(Path("reports"))
    return FlowdeckApp(sessions_root=tmp_path / "sessions", open_sessions=True)


async def show_report(pilot: object) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    app.push_screen(ReportScreen(read_report(Path("reports/20240101-000000"))))
    await pilot.pause()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_report_screen_160x48(
    snap_compare: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = report_app(tmp_path, monkeypatch)
    assert snap_compare(app, terminal_size=(160, 48), run_before=show_report)  # type: ignore[operator]


@pytest.mark.slow
def test_report_screen_80x24(
    snap_compare: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = report_app(tmp_path, monkeypatch)
    assert snap_compare(app, terminal_size=(80, 24), run_before=show_report)  # type: ignore[operator]


@pytest.mark.slow
async def test_g_on_the_summary_reports_on_the_session_the_run_recorded(tmp_path: Path) -> None:
    """A run that ends normally leaves the live screen for its summary: g there starts the
    job on the run's session, as g does on the live screen after a failed run."""
    from flowdeck.tui.screens.summary import SummaryScreen
    from tests.tui.fakes import make_summary

    broken = tmp_path / "sessions" / "20240101-000000-broken"
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{", encoding="utf-8")
    app = FlowdeckApp(sessions_root=tmp_path / "sessions", open_sessions=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await app.push_screen(SummaryScreen(make_summary("duration reached", str(broken))))
        await pilot.press("g")
        await pilot.pause()
        sessions = app.screen
        assert isinstance(sessions, SessionsScreen)
        assert sessions.report_on == (broken,)
        deadline = time.monotonic() + 60
        while "report failed" not in status_of(sessions) and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert status_of(sessions).startswith("report failed (exit 2): flowdeck report: session ")

        await app.push_screen(SummaryScreen(make_summary("duration reached", "")))
        await pilot.press("g")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert any(m.startswith("this run was not recorded") for m in said), said
