"""Recorded sessions: list them, replay one, start the report for the marked ones."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from flowdeck.engine import (
    FlowdeckError,
    SessionInfo,
    default_sessions_root,
    list_sessions,
    open_session,
)
from flowdeck.tui.keys import HELP_BINDING
from flowdeck.tui.model import human_count
from flowdeck.tui.widgets.run_header import clock


def stamp(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at else "?"


class SessionsScreen(Screen[None]):
    """Enter replays the highlighted session; space marks sessions; r reports on the
    marked ones (or the highlighted one) in the background.
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
        Binding("f5", "reload", "reload", tooltip="read the sessions list again"),
        Binding("escape", "app.pop_screen", "back"),
    ]

    def __init__(self, root: Path | None = None) -> None:
        super().__init__()
        self.root = root
        self.infos: dict[str, SessionInfo] = {}
        self.marked: set[str] = set()

    def compose(self) -> ComposeResult:
        yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Static("", id="report-status")
        yield Footer()

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
        from flowdeck.tui.screens.replay import ReplayScreen

        try:
            replay = load_replay(open_session(path))
        except (FlowdeckError, OSError, ValueError) as exc:
            self.app.call_from_thread(self.notify, f"cannot replay {path}: {exc}", severity="error")
            return
        self.app.call_from_thread(self.status, f"replaying {path}")
        self.app.call_from_thread(self.app.push_screen, ReplayScreen(replay))

    def action_report(self) -> None:
        chosen = sorted(self.marked) or ([info.session_id] if (info := self.highlighted()) else [])
        if not chosen:
            self.notify("no session to report on; record a run first", severity="warning")
            return
        paths = [self.infos[sid].path for sid in chosen if sid in self.infos]
        out = self.sessions_root.parent / "reports" / time.strftime("%Y%m%d-%H%M%S")
        self.run_report(paths, out)

    @work(exclusive=True, group="report")
    async def run_report(self, paths: list[Path], out: Path) -> None:
        """``flowdeck report`` in a subprocess: Spark must never share the UI's process."""
        command = [
            sys.executable,
            "-m",
            "flowdeck.tui.cli",
            "report",
            *map(str, paths),
            "--out",
            str(out),
        ]
        self.status(f"report on {len(paths)} session(s) starting (Spark takes a while)…")
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        assert process.stdout is not None
        began = time.monotonic()
        last = ""
        while line := await process.stdout.readline():
            text = line.decode(errors="replace").strip()
            if text and "WARN" not in text:
                last = text
                self.status(f"report running {time.monotonic() - began:.0f} s: {last}")
        code = await process.wait()
        if code == 0:
            self.status(Text.assemble(("report written to ", "bold green"), str(out)))
            self.notify(f"report written to {out}", timeout=10)
        else:
            self.status(Text(f"report failed (exit {code}): {last}", style="bold red"))
