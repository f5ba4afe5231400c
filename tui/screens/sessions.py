"""Recorded sessions: list them, replay one, report on the marked ones and show the result."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from flowdeck.engine import (
    FlowdeckError,
    SessionInfo,
    default_sessions_root,
    list_sessions,
    open_session,
)
from flowdeck.tui.keys import HELP_BINDING
from flowdeck.tui.model import human_count
from flowdeck.tui.navigation import Route, open_screen
from flowdeck.tui.report_files import ReportUnreadable, latest_report, read_report
from flowdeck.tui.widgets.footer import FittingFooter
from flowdeck.tui.widgets.run_header import clock

if TYPE_CHECKING:
    from flowdeck.tui.replay import Replay

#: How the report job's stage lines begin (``report [2/5] per-phase figures with Spark``).
PROGRESS = "report ["
#: What Spark prints on every start, whatever happens next: never the error.
SPARK_CHATTER = (
    "WARNING: Using incubator modules",
    "Using Spark's default log4j profile",
    "Setting default log level",
    "To adjust logging level",
)


def stamp(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at else "?"


class SessionsScreen(Screen[None]):
    """Enter replays the highlighted session; space marks sessions; r reports on the
    marked ones (or the highlighted one) in the background, saying which stage the job is
    at, and shows the report's per-phase table when it is done; l shows the last report
    again. ``report_on`` starts the report on those session directories at once (the live
    screen's key for the session it recorded).
    """

    DEFAULT_CSS = """
    SessionsScreen #sessions {
        height: 1fr;
    }
    SessionsScreen #report-status {
        height: auto;
        max-height: 6;
        border: round $secondary;
        padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        HELP_BINDING,
        Binding("enter", "replay", "replay", tooltip="replay the highlighted session"),
        Binding("space", "mark", "mark", tooltip="mark the session for the report"),
        Binding("r", "report", "report", tooltip="report on the marked sessions"),
        Binding("l", "last_report", "last report", tooltip="show the last report's table"),
        Binding("f5", "reload", "reload", show=False, tooltip="read the sessions list again"),
        Binding("escape", "app.pop_screen", "back"),
    ]

    def __init__(self, root: Path | None = None, report_on: Sequence[Path] = ()) -> None:
        super().__init__()
        self.root = root
        self.infos: dict[str, SessionInfo] = {}
        self.marked: set[str] = set()
        self.report_on = tuple(report_on)
        #: While the report job runs: when it began and the last stage it printed.
        self.report_began: float | None = None
        self.report_stage = ""

    def compose(self) -> ComposeResult:
        yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Static("", id="report-status")
        yield FittingFooter()

    @property
    def sessions_root(self) -> Path:
        return self.root or getattr(self.app, "sessions_root", None) or default_sessions_root()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, header in (
            ("mark", "✓"),
            ("id", "session"),
            ("name", "run"),
            ("start", "started"),
            ("duration", "length"),
            ("outcome", "outcome"),
            ("phases", "phases"),
            ("peak", "peak pub/s"),
        ):
            table.add_column(header, key=key)
        self.status(f"sessions in {self.sessions_root}")
        self.action_reload()
        self.set_interval(1.0, self.show_report_progress)
        if self.report_on:
            self.start_report(list(self.report_on))

    def status(self, text: str | Text) -> None:
        self.query_one("#report-status", Static).update(text)

    @work(exclusive=True, thread=True, group="list")
    def action_reload(self) -> None:
        infos = list_sessions(self.sessions_root)
        self.app.call_from_thread(self.show_sessions, infos)

    def show_sessions(self, infos: list[SessionInfo]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        self.infos = {info.session_id: info for info in infos}
        for info in reversed(infos):  # newest first
            table.add_row(
                "✓" if info.session_id in self.marked else "",
                info.session_id,
                info.name or "?",
                stamp(info.start),
                clock(info.duration) if info.duration is not None else "?",
                (info.problem and f"unreadable: {info.problem}") or info.outcome,
                str(info.phases),
                human_count(info.peak_publish_rate),
                key=info.session_id,
            )
        if not infos:
            self.status(f"no sessions yet in {self.sessions_root}; every run records one")

    def highlighted(self) -> SessionInfo | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return self.infos.get(str(row_key.value))

    def action_mark(self) -> None:
        info = self.highlighted()
        if info is None:
            return
        if info.session_id in self.marked:
            self.marked.discard(info.session_id)
        else:
            self.marked.add(info.session_id)
        table = self.query_one(DataTable)
        table.update_cell(info.session_id, "mark", "✓" if info.session_id in self.marked else "")
        table.action_cursor_down()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter (or a click) on a row: the table takes the key and says which row."""
        event.stop()
        self.action_replay()

    def action_replay(self) -> None:
        info = self.highlighted()
        if info is None:
            return
        if info.problem:
            self.notify(f"cannot replay {info.session_id}: {info.problem}", severity="error")
            return
        self.status(f"loading {info.session_id}…")
        self.load_replay(info.path)

    @work(exclusive=True, thread=True, group="replay")
    def load_replay(self, path: Path) -> None:
        from flowdeck.tui.replay import load_replay

        try:
            replay = load_replay(open_session(path))
        except (FlowdeckError, OSError, ValueError) as exc:
            self.app.call_from_thread(self.notify, f"cannot replay {path}: {exc}", severity="error")
            return
        self.app.call_from_thread(self.status, f"replaying {path}")
        self.app.call_from_thread(self.show_replay, replay)

    def show_replay(self, replay: Replay) -> None:
        open_screen(self, Route.REPLAY, replay)

    @property
    def reports_root(self) -> Path:
        """Where the reports started here go: ``reports/<time>/`` beside the sessions."""
        return self.sessions_root.parent / "reports"

    def action_report(self) -> None:
        chosen = sorted(self.marked) or ([info.session_id] if (info := self.highlighted()) else [])
        if not chosen:
            self.notify("no session to report on; record a run first", severity="warning")
            return
        self.start_report([self.infos[sid].path for sid in chosen if sid in self.infos])

    def start_report(self, paths: list[Path]) -> None:
        if self.report_began is not None:
            self.notify(
                f"a report is already running ({time.monotonic() - self.report_began:.0f} s); "
                "wait for it to finish",
                severity="warning",
            )
            return
        out = self.reports_root / time.strftime("%Y%m%d-%H%M%S")
        self.report_began = time.monotonic()
        self.report_stage = f"starting the report job on {len(paths)} session(s)"
        self.show_report_progress()
        self.run_report(paths, out)

    def show_report_progress(self) -> None:
        """Once a second while the job runs: its seconds so far and its stage."""
        if self.report_began is None:
            return
        elapsed = time.monotonic() - self.report_began
        self.status(
            Text.assemble((f"report running {elapsed:.0f} s", "bold"), f" — {self.report_stage}")
        )

    def action_last_report(self) -> None:
        latest = latest_report(self.reports_root)
        if latest is None:
            self.notify(
                f"no report yet in {self.reports_root}; r reports on the marked sessions",
                severity="warning",
            )
            return
        self.show_report(latest)

    def show_report(self, out: Path) -> None:
        try:
            tables = read_report(out)
        except ReportUnreadable as exc:
            self.notify(str(exc), severity="error", timeout=15)
            return
        open_screen(self, Route.REPORT, tables)

    @work(exclusive=True, group="report")
    async def run_report(self, paths: list[Path], out: Path) -> None:
        """``flowdeck report`` in a subprocess: Spark must never share the UI's process.

        Its ``report [k/n] …`` lines are the stage shown; any other line it prints (Spark's
        start-up chatter aside) may be the error, shown with the exit code if it fails.
        Leaving the screen stops the job: no Spark is left behind with nobody to read it.
        """
        try:
            code, error = await self.report_process(paths, out)
        finally:
            self.report_began = None
        if code == 0:
            self.status(Text.assemble(("report written to ", "bold green"), str(out)))
            self.show_report(out)
        else:
            self.status(Text(f"report failed (exit {code}): {error}", style="bold red"))
            self.notify(f"report failed (exit {code}): {error}", severity="error", timeout=20)

    async def report_process(self, paths: list[Path], out: Path) -> tuple[int, str]:
        """Run the job; its exit code and the line that best says what went wrong."""
        command = [
            sys.executable,
            "-m",
            "flowdeck.cli",
            "report",
            *map(str, paths),
            "--out",
            str(out),
        ]
        try:
            process = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
        except OSError as exc:
            return -1, f"cannot start {sys.executable}: {exc}"
        assert process.stdout is not None
        said: list[str] = []
        try:
            while line := await process.stdout.readline():
                text = line.decode(errors="replace").strip()
                if text.startswith(PROGRESS):
                    self.report_stage = text.removeprefix("report ")
                    self.show_report_progress()
                elif text and not text.startswith(SPARK_CHATTER) and " WARN " not in text:
                    said.append(text)
            code = await process.wait()
        except asyncio.CancelledError:
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
        own = [line for line in said if line.startswith("flowdeck")]
        return code, (own or said or ["it printed nothing"])[-1]
