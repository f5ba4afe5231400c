"""The per-setting table full screen: where the answer to "which setting is best" lives.

The dashboard's per-setting tab has a third of the screen; here the same table
(``SettingVerdicts``: the run's own figures, ``figures.run``) takes the whole width, with
p99.9 beside p50 and p99, every row's verdict *and the reason for it*, each swept setting's
chart of msg/s and p99 against its values, and the recommendation's whole reasoning (why
each value was a candidate or not, and the rule that chose), scrollable. Opened with ``T``
on the live and replay screens and ``t`` on the run summary; on a live run it follows the
run, once a second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from flowdeck.tui.keys import HELP_BINDING
from flowdeck.tui.model import RunHistory, SettingVerdicts, setting_verdicts
from flowdeck.tui.widgets.footer import FittingFooter
from flowdeck.tui.widgets.setting_table import (
    NARROW,
    basis_note,
    no_sweep_note,
    row_setting,
    varying_settings,
    verdict_cell,
    verdict_table,
)
from flowdeck.tui.widgets.sweep_chart import sweep_chart

#: How often the view follows a live run.
REFRESH_SECONDS = 1.0


def reasons_table(verdicts: SettingVerdicts) -> Table:
    """Each phase's verdict and the reason for it, in the rules' words (wrapped, whole)."""
    varying = varying_settings(verdicts.rows)
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(ratio=1)
    for position, row in enumerate(verdicts.rows):
        mark = "★ " if position == verdicts.best else "  "
        reason = Text.assemble(verdict_cell(row.verdict), ": ", row.reason)
        table.add_row(mark + row_setting(row, varying), reason)
    return table


def reasoning_lines(lines: tuple[str, ...]) -> Table:
    """A recommendation's reasoning, one bullet a line, the last (the answer) in bold."""
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(ratio=1)
    for n, line in enumerate(lines):
        table.add_row("•", Text(line, style="bold" if n == len(lines) - 1 else ""))
    return table


class PerSettingView:
    """Everything the view shows, fitted to the width it is drawn at."""

    def __init__(self, verdicts: SettingVerdicts, title: str) -> None:
        self.verdicts = verdicts
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        verdicts = self.verdicts
        yield Text.assemble(
            ("per setting", "bold reverse"),
            " ",
            (self.title, "bold"),
            f": {len(verdicts.rows)} phase{'s' if len(verdicts.rows) != 1 else ''}, judged by "
            "the report's rules",
        )
        if not verdicts.rows:
            yield Text("waiting for the first second of the run", style="dim")
            return
        yield Text("")
        table = verdict_table(verdicts, width, full=True)
        yield table
        settled = any(column.header == "settled" for column in table.columns)
        yield Text(basis_note(verdicts.rows, narrow=width < NARROW, wide=settled), style="dim")
        yield Text("")
        yield Text("why each verdict", style="bold underline")
        yield reasons_table(verdicts)
        if not verdicts.sweeps:
            yield Text("")
            yield no_sweep_note()
        for swept in verdicts.sweeps:
            yield Text("")
            yield sweep_chart(verdicts, swept, width)
            yield Text("")
            yield Text(f"the recommendation for {swept.setting.value}", style="bold underline")
            yield reasoning_lines(swept.recommendation.reasoning)


class PerSettingScreen(Screen[None]):
    """The per-setting table, full screen, over a run's history (live, replayed or ended)."""

    DEFAULT_CSS = """
    PerSettingScreen #per-setting {
        padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        HELP_BINDING,
        Binding("escape,T,t", "close", "back", key_display="esc"),
        Binding("home", "scroll_to(0)", "top", show=False),
        Binding("end", "scroll_to(-1)", "end", show=False),
    ]

    def __init__(
        self,
        history: RunHistory | Callable[[], RunHistory],
        title: str,
        *,
        follow: bool = True,
    ) -> None:
        super().__init__()
        #: The history shown, or where to get it (a replay's is replaced when it seeks).
        self.source = history
        self.title_text = title
        #: Follow the run (a live run or a replay); an ended run's figures are fixed.
        self.follow = follow
        self._shown_key: tuple[int, int, float | None] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="per-setting-scroll"):
            yield Static(id="per-setting")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.show()
        self.query_one(VerticalScroll).focus()
        if self.follow:
            self.set_interval(REFRESH_SECONDS, self.show)

    @property
    def history(self) -> RunHistory:
        return self.source if isinstance(self.source, RunHistory) else self.source()

    def view(self) -> RenderableType:
        return PerSettingView(setting_verdicts(self.history), self.title_text)

    def show(self) -> None:
        history = self.history
        tick = history.last_tick
        key = (id(history), history.snapshots, None if tick is None else tick.at)
        if key == self._shown_key:
            return
        self._shown_key = key
        self.query_one("#per-setting", Static).update(self.view())

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll_to(self, where: int) -> None:
        scroll = self.query_one(VerticalScroll)
        if where < 0:
            scroll.scroll_end(animate=False)
        else:
            scroll.scroll_home(animate=False)
