"""The per-host table: where each worker runs and what it does now.

One row per worker (``engine.HostRow``, the rows ``flowdeck run`` prints at its end): its
host (a Spark task's host, or this one for a local worker process), its publishers and
consumers, its publish and consume msg/s and its process's CPU over the last few seconds,
and a lost worker as lost, with the run time it was lost at. The live screen fills it
while the run goes (``model.HostTable``), the summary with the run's figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from flowdeck.tui.model import HOST_RATE_SNAPSHOTS, RunHistory, human_count
from flowdeck.tui.widgets.run_header import clock

if TYPE_CHECKING:
    from flowdeck.engine import HostRow

#: Below this width the table drops the pid; from the wider one it adds the counts.
NARROW = 60
WIDE = 100


def cpu_text(row: HostRow) -> str:
    """Its CPU in percent of one core, ``-`` when not reported."""
    return "-" if row.cpu_percent is None else f"{row.cpu_percent:.0f}%"


def state_text(row: HostRow, started_at: float | None) -> Text:
    """``ok``, or ``LOST`` with the run time it was lost at."""
    if not row.lost:
        return Text("ok", style="green")
    when = ""
    if row.lost_at is not None and started_at:
        when = f" {clock(row.lost_at - started_at)}"
    return Text(f"LOST{when}", style="bold red")


def host_table(
    rows: Sequence[HostRow], *, width: int, started_at: float | None = None, expand: bool = True
) -> Table:
    """The rows as a table for ``width`` cells (``started_at``: the run's start, for when
    a worker was lost; ``expand``: fill the width, or take what the rows need)."""
    longest = min(max((len(row.host) for row in rows), default=4), 24)
    # The pid only where the host names still fit beside it (the other columns and their
    # gaps take about 50 cells, the pid 6).
    narrow, wide = width < NARROW or width - 56 < longest, width >= WIDE
    table = Table(box=None, padding=(0, 1), pad_edge=False, expand=expand, show_edge=False)
    table.add_column("w", justify="right", no_wrap=True)
    table.add_column("host", no_wrap=True, overflow="ellipsis", ratio=1, min_width=min(longest, 24))
    if not narrow:
        table.add_column("pid", justify="right", no_wrap=True)
    table.add_column("pub/con", justify="right", no_wrap=True)
    if wide:
        table.add_column("published", justify="right", no_wrap=True)
        table.add_column("consumed", justify="right", no_wrap=True)
    table.add_column("pub/s", justify="right", no_wrap=True)
    table.add_column("cons/s", justify="right", no_wrap=True)
    table.add_column("CPU", justify="right", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for row in rows:
        cells: list[Text | str] = [str(row.worker), row.host]
        if not narrow:
            cells.append(str(row.pid) if row.pid else "-")
        cells.append(f"{row.publishers}/{row.consumers}")
        if wide:
            cells.append(f"{row.published:,}")
            cells.append(f"{row.consumed:,}")
        dead = row.lost
        cells.append("-" if dead else human_count(round(row.publish_rate)))
        cells.append("-" if dead else human_count(round(row.consume_rate)))
        cells.append("-" if dead else cpu_text(row))
        cells.append(state_text(row, started_at))
        table.add_row(*cells, style="dim" if dead else None)
    return table


class HostPanel(Static):
    """The hosts tab of the live screen: one row per worker, redrawn each second."""

    DEFAULT_CSS = """
    HostPanel {
        height: auto;
        padding: 0 1;
    }
    """

    #: What is on screen: the rows last drawn and their rendering.
    rows: tuple[HostRow, ...] = ()
    shown: RenderableType = ""

    def show(self, history: RunHistory) -> None:
        hosts = history.hosts
        self.rows = tuple(hosts.rows())
        if not self.rows:
            self.shown = Text("waiting for the workers' first figures", style="dim")
            self.update(self.shown)
            return
        places = len({row.host for row in self.rows})
        seconds = HOST_RATE_SNAPSHOTS - 1  # snapshots come once a second
        note = (
            f"{len(self.rows)} workers, {places} host{'s' if places != 1 else ''}; msg/s "
            f"and CPU (% of one core) over the last {seconds} s"
        )
        self.shown = Group(
            host_table(self.rows, width=self.size.width, started_at=history.started_at),
            Text(note, style="dim"),
        )
        self.update(self.shown)
