"""The help screen, generated from the bindings that drive the keys: the dashboard's key
table, or the bindings of whichever screen ``?`` was pressed on."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from flowdeck.tui.keys import KEY_TABLE, KeyRow, key_label


def help_table(rows: tuple[KeyRow, ...] = KEY_TABLE) -> Table:
    table = Table(title="flowdeck keys", expand=True, show_lines=False)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("what it does")
    table.add_column("group", style="dim", no_wrap=True)
    for row in rows:
        table.add_row(key_label(row.key), row.description, row.group)
    return table


class HelpScreen(ModalScreen[None]):
    """Every key of the screen it was opened on (the dashboard's from
    ``tui.keys.KEY_TABLE``), and those of every screen."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 80;
        max-width: 100%;
        height: 90%;
        border: thick $primary;
        background: $surface;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,f1,q", "dismiss", "close", key_display="esc")
    ]

    def __init__(self, rows: tuple[KeyRow, ...] = KEY_TABLE) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(help_table(self.rows), id="help-table")
            yield Static(
                "On the dashboard, steps double or halve limits and rates, add or remove "
                "one client; a change shows as pending until every worker has it in force. "
                "In a text field ? types itself: F1 opens this help there. "
                "Escape closes this help."
            )
