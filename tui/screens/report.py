"""A written report's per-phase table in the cockpit.

``tui.report_files`` reads a report directory's per-phase tables back into one row per
phase — the settings that differ between phases, msg/s, e2e p50/p99 and the verdict — and
its recommendation lines; this screen shows them, highlights the recommended phase as the
live per-setting table does, and names ``report.html``, which ``o`` opens in a browser when
there is a display to show one.

Every figure is the CSV's, formatted by the report's own :func:`format_cell`, so the
screen and the report's Markdown read the same.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from flowdeck.spark_reports.tables import Cell, format_cell
from flowdeck.tui.keys import HELP_BINDING
from flowdeck.tui.report_files import SETTING_COLUMNS, ReportTables
from flowdeck.tui.widgets.footer import FittingFooter
from flowdeck.tui.widgets.setting_table import BEST_MARK, BEST_STYLE, VERDICT_STYLES


def can_show_browser() -> bool:
    """A browser would open on a screen the user sees: a graphical session on Linux and
    the BSDs, always on macOS and Windows. Without one, Python's ``webbrowser`` would
    start a text browser inside this very terminal."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def table_cell(value: Cell, best: bool, style: str = "") -> Text:
    return Text(format_cell(value), style="" if best else style)


class ReportScreen(Screen[None]):
    """One row per phase of each reported session, the recommended one highlighted; the
    recommendation lines and the path of ``report.html`` under the table."""

    DEFAULT_CSS = """
    ReportScreen #report-title {
        height: auto;
        padding: 0 1;
        text-style: bold;
    }
    ReportScreen #report-phases {
        height: 1fr;
        min-height: 5;
    }
    ReportScreen #report-notes {
        height: auto;
        max-height: 50%;
        border: round $secondary;
        padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        HELP_BINDING,
        Binding("o", "open_html", "open HTML", tooltip="open report.html in a browser"),
        Binding("escape", "app.pop_screen", "back"),
    ]

    def __init__(self, report: ReportTables) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        yield Static(self.heading(), id="report-title")
        yield DataTable(id="report-phases", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="report-notes"):
            yield Static("", id="report-why")
            yield Static(self.notes(), id="report-lines")
        yield FittingFooter()

    def heading(self) -> str:
        sessions = self.report.sessions
        name = sessions[0].title if len(sessions) == 1 else f"{len(sessions)} sessions"
        return f"report: {name} — per phase"

    @property
    def several(self) -> bool:
        return len(self.report.sessions) > 1

    def columns(self) -> list[tuple[str, str]]:
        """(key, header): the settings any session varies, then the figures."""
        varying: list[str] = []
        for session in self.report.sessions:
            varying += [c for c in session.varying if c not in varying]
        self.varying = [c for c in SETTING_COLUMNS if c in varying]
        head = [("session", "session")] if self.several else []
        return [
            *head,
            ("phase", "phase"),
            ("label", "label"),
            *((c, c) for c in self.varying),
            ("consume", "msg/s"),
            ("p50", "p50 ms"),
            ("p99", "p99 ms"),
            ("verdict", "verdict"),
            # What fits 80 columns comes first; these are a scroll to the right away (and
            # the highlighted phase's reason is written out under the table).
            ("publish", "pub msg/s"),
            ("why", "why"),
        ]

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, header in self.columns():
            table.add_column(header, key=key)
        for session in self.report.sessions:
            for position, phase in enumerate(session.phases):
                best = position == session.best
                cells = [
                    *([Text(session.title)] if self.several else []),
                    Text(f"{BEST_MARK if best else ' '} {phase.index}"),
                    Text(phase.label),
                    *(table_cell(phase.settings.get(c), best) for c in self.varying),
                    table_cell(phase.consume, best),
                    table_cell(phase.p50, best),
                    table_cell(phase.p99, best),
                    table_cell(phase.verdict or None, best, self.verdict_style(phase.verdict)),
                    table_cell(phase.publish, best),
                    Text(phase.why),
                ]
                if best:
                    for cell in cells:
                        cell.stylize(BEST_STYLE)
                table.add_row(*cells, key=f"{session.key}:{phase.index}")
        chosen = self.report.sessions[0].best if not self.several else None
        if chosen is not None:
            table.move_cursor(row=chosen)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The highlighted phase's verdict and its reason in full (the column is cut)."""
        session_key, _, index = str(event.row_key.value).rpartition(":")
        for session in self.report.sessions:
            for phase in session.phases:
                if session.key == session_key and str(phase.index) == index:
                    name = f"{session.title} " if self.several else ""
                    self.query_one("#report-why", Static).update(
                        Text.assemble(
                            (f"{name}phase {phase.index} {phase.label}: ", "bold"),
                            (phase.verdict or "not judged", self.verdict_style(phase.verdict)),
                            f" — {phase.why}" if phase.why else "",
                        )
                    )

    @staticmethod
    def verdict_style(verdict: str) -> str:
        known: dict[str, str] = {str(v): style for v, style in VERDICT_STYLES.items()}
        return known.get(verdict, "")

    def notes(self) -> Text:
        lines: list[Text] = []
        for session in self.report.sessions:
            prefix = f"{session.title}: " if self.several else ""
            for line in session.recommendations:
                lines.append(Text(prefix + line, style="bold"))
            if not session.recommendations:
                lines.append(
                    Text(
                        f"{prefix}no sweep: every phase ran at the same in-flight limit, "
                        "prefetch and ack interval, so the report recommends none",
                        style="italic",
                    )
                )
        how = "o opens it in a browser" if can_show_browser() else "no display here to open it"
        lines.append(
            Text.assemble("HTML: ", (str(self.report.html_path), "underline"), f"  ({how})")
        )
        lines.append(
            Text(
                f"{BEST_MARK} the recommended phase (the report's recommended column); "
                "figures from the report's CSV",
                style="dim",
            )
        )
        return Text("\n").join(lines)

    def action_open_html(self) -> None:
        path = self.report.html_path
        if not path.is_file():
            self.notify(f"{path} is gone; run the report again", severity="error")
            return
        if not can_show_browser():
            self.notify(
                f"no display to open a browser on (DISPLAY is not set): open {path} "
                "on a machine with one",
                severity="warning",
                timeout=10,
            )
            return
        self.open_browser(path)

    @work(thread=True, exclusive=True, group="browser")
    def open_browser(self, path: Path) -> None:
        """``webbrowser`` can wait on the browser it starts: off the UI's thread."""
        import webbrowser

        if webbrowser.open(path.resolve().as_uri()):
            self.app.call_from_thread(self.notify, f"opened {path} in the browser")
        else:
            self.app.call_from_thread(
                self.notify, f"no browser found to open {path}", severity="warning"
            )
