"""The queue table: sortable, and drawing only the rows on screen, so a thousand queues
cost what forty do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rich.segment import Segment
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from flowdeck.collectors import QueueSample
from flowdeck.tui.model import human_count
from flowdeck.tui.widgets.latency_chart import milliseconds

#: (column key = QueueSample attribute, header)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "queue"),
    ("type", "type"),
    ("ready", "ready"),
    ("unacked", "unacked"),
    ("consumers", "cons"),
    ("publish_rate", "in/s"),
    ("deliver_rate", "out/s"),
    ("p99", "p99 ms"),
)
TEXT_COLUMNS = ("name", "type")
#: Columns that are not the broker's figures: the run's own, by queue name.
RUN_COLUMNS = ("p99",)
#: Longer queue names are cut (the end replaced by "…") to keep the figures in view.
NAME_WIDTH_MAX = 40


def display_name(queue: QueueSample) -> str:
    """The queue's name, with its vhost when that is not the default one (keeps rows unique)."""
    return queue.name if queue.vhost == "/" else f"{queue.vhost}/{queue.name}"


def _sort_value(queue: QueueSample, column: str, p99: float | None = None) -> Any:
    value = p99 if column == "p99" else getattr(queue, column)
    if column in TEXT_COLUMNS:
        return str(value)
    return -1.0 if value is None else float(value)


def _cells(queue: QueueSample, p99: float | None = None) -> list[str]:
    cells = []
    for key, _ in COLUMNS:
        if key == "name":
            cells.append(display_name(queue))
        elif key == "type":
            cells.append(str(queue.type))
        elif key == "p99":
            cells.append("–" if p99 is None else milliseconds(p99))
        else:
            value = getattr(queue, key)
            cells.append(human_count(value) if value is not None else "?")
    return cells


class QueueTable(ScrollView, can_focus=True):
    """One row per queue, the whole set re-sorted at each sample; the cursor stays on its
    queue. Only the rows on screen are drawn, one segment each: updating and painting cost
    the same for forty queues and for a thousand (a DataTable re-rendered every visible
    cell after each sample, ~40 ms on the event loop, and refreshed once per changed cell).

    ``o`` sorts by the next column, ``O`` reverses the order; clicking a header sorts by it
    (again: reverses). The sorted column's header carries ▼ (descending) or ▲.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "queue-table--header",
        "queue-table--cursor",
        "queue-table--even-row",
    }

    DEFAULT_CSS = """
    QueueTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
    }
    QueueTable:focus {
        background-tint: $foreground 5%;
    }
    QueueTable > .queue-table--header {
        text-style: bold;
        background: $panel;
        color: $foreground;
    }
    QueueTable > .queue-table--even-row {
        background: $surface-lighten-1 50%;
    }
    QueueTable:dark > .queue-table--even-row {
        background: $surface-darken-1 40%;
    }
    QueueTable > .queue-table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
        text-style: $block-cursor-blurred-text-style;
    }
    QueueTable:focus > .queue-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "sort_next", "sort by next column"),
        Binding("O", "sort_reverse", "reverse the order"),
        Binding("up", "cursor(-1)", "cursor to the queue above", show=False),
        Binding("down", "cursor(1)", "cursor to the queue below", show=False),
        Binding("pageup", "page(-1)", "a page up", show=False),
        Binding("pagedown", "page(1)", "a page down", show=False),
        Binding("home", "cursor(-1_000_000_000)", "first queue", show=False),
        Binding("end", "cursor(1_000_000_000)", "last queue", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sort_column = "ready"
        self.sort_reverse = True
        self.cursor_row = 0
        self._queues: dict[str, QueueSample] = {}
        self._cells: dict[str, list[str]] = {}
        self._order: list[str] = []
        self._widths = [len(header) + 1 for _, header in COLUMNS]
        self._p99: dict[str, float] = {}
        #: The operator chose a sort (a key or a header): the table keeps it.
        self._operator_sorted = False

    @property
    def queue_names(self) -> list[str]:
        """The queues' display names in the order shown."""
        return list(self._order)

    def show(self, queues: Sequence[QueueSample], p99: Mapping[str, float] | None = None) -> None:
        """The latest figures of every queue (gone queues disappear), and each queue's e2e
        p99 in ms over the run's current phase (``p99``, by queue name). Until the operator
        picks a sort, the queues with the highest p99 come first once there are any: the
        few that fill up and push the run's latency up."""
        self._p99 = dict(p99 or {})
        self._queues = {display_name(queue): queue for queue in queues}
        self._cells = {
            name: _cells(queue, self._p99.get(queue.name)) for name, queue in self._queues.items()
        }
        if not self._operator_sorted and self._p99:
            self.sort_column, self.sort_reverse = "p99", True
        self._arrange()

    # -- order and geometry --------------------------------------------------------------

    def _arrange(self, *, follow: bool = False) -> None:
        """Sort and measure the rows; ``follow`` scrolls to the cursor's queue (after the
        operator re-sorted; not at each sample, which would undo their scrolling)."""
        at_cursor = self._order[self.cursor_row] if self.cursor_row < len(self._order) else None
        queues, column, p99 = self._queues, self.sort_column, self._p99
        self._order = sorted(
            queues,
            key=lambda name: (_sort_value(queues[name], column, p99.get(queues[name].name)), name),
            reverse=self.sort_reverse,
        )
        if at_cursor in queues:
            self.cursor_row = self._order.index(at_cursor)
        self.cursor_row = min(self.cursor_row, max(0, len(self._order) - 1))
        widths = [len(header) + 1 for _, header in COLUMNS]  # + 1: room for the sort mark
        for cells in self._cells.values():
            widths = [max(w, len(text)) for w, text in zip(widths, cells, strict=True)]
        widths[0] = min(widths[0], NAME_WIDTH_MAX)
        self._widths = widths
        self.virtual_size = Size(sum(widths) + 2 * len(widths), len(self._order) + 1)
        if follow:
            self._move_cursor(self.cursor_row)
        self.refresh()

    def _line(self, cells: list[str]) -> str:
        parts = []
        for (key, _), width, text in zip(COLUMNS, self._widths, cells, strict=True):
            if len(text) > width:
                text = text[: width - 1] + "…"
            parts.append(text.ljust(width) if key in TEXT_COLUMNS else text.rjust(width))
        return " " + "  ".join(parts) + " "

    def _header_text(self) -> str:
        mark = "▼" if self.sort_reverse else "▲"
        return self._line(
            [header + (mark if key == self.sort_column else "") for key, header in COLUMNS]
        )

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        base = self.rich_style
        if y == 0:
            text = self._header_text()
            style = base + self.get_component_rich_style("queue-table--header")
        else:
            index = scroll_y + y - 1
            if index >= len(self._order):
                return Strip.blank(width, base)
            text = self._line(self._cells[self._order[index]])
            if index == self.cursor_row:
                style = base + self.get_component_rich_style("queue-table--cursor")
            elif index % 2 == 0:
                style = base + self.get_component_rich_style("queue-table--even-row")
            else:
                style = base
        return Strip([Segment(text, style)]).crop_extend(scroll_x, scroll_x + width, style)

    # -- keys and mouse ------------------------------------------------------------------

    def _visible_rows(self) -> int:
        return max(1, self.size.height - 1)

    def _move_cursor(self, row: int) -> None:
        self.cursor_row = max(0, min(row, len(self._order) - 1))
        top = self.scroll_offset.y
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + self._visible_rows():
            self.scroll_to(y=self.cursor_row - self._visible_rows() + 1, animate=False)
        self.refresh()

    def action_cursor(self, rows: int) -> None:
        self._move_cursor(self.cursor_row + rows)

    def action_page(self, pages: int) -> None:
        self._move_cursor(self.cursor_row + pages * self._visible_rows())

    def action_sort_next(self) -> None:
        self._operator_sorted = True
        keys = [c for c, _ in COLUMNS]
        self.sort_column = keys[(keys.index(self.sort_column) + 1) % len(keys)]
        self._arrange(follow=True)
        self.notify(f"queues sorted by {self.sort_column}", timeout=2)

    def action_sort_reverse(self) -> None:
        self._operator_sorted = True
        self.sort_reverse = not self.sort_reverse
        self._arrange(follow=True)

    def sort_by(self, column: str) -> None:
        """Sort by ``column``; by the column already sorted on: reverse the order."""
        self._operator_sorted = True
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column = column
        self._arrange(follow=True)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = offset.x + self.scroll_offset.x
            start = 1
            for (key, _), width in zip(COLUMNS, self._widths, strict=True):
                if start - 1 <= x < start + width + 1:
                    self.sort_by(key)
                    return
                start += width + 2
        else:
            index = self.scroll_offset.y + offset.y - 1
            if index < len(self._order):
                self._move_cursor(index)
