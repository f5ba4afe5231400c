"""Gauges: pending confirms, unacked, queue depth and trend, memory, disk, blocked.

Client-side figures come from the run's last Tick (every second); broker-side ones from
the freshest BrokerSample, each with its age. A stale source is titled STALE with its
reason and its figures dimmed, so a frozen number never passes for a live one.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from flowdeck.collectors import BrokerSample
from flowdeck.engine import Tick
from flowdeck.figures import Trend
from flowdeck.tui.model import (
    RunHistory,
    human_age,
    human_bytes,
    human_count,
    source_age,
    stale_reason,
    wrap_key,
)

BAR_WIDTH = 10


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * width)
    return "█" * filled + "░" * (width - filled)


class BrokerGauges(Static):
    """The figures that say whether the broker keeps up, client side beside broker side."""

    DEFAULT_CSS = """
    BrokerGauges {
        height: auto;
        padding: 0 1;
        border: round $primary;
        border-title-align: left;
    }
    BrokerGauges.-stale {
        border: round $warning;
        color: $text-muted;
    }
    """

    #: wrap_key of the lines last shown under the table (None: nothing shown yet).
    _shown_shape: tuple[tuple[int, ...], ...] | None = None

    def on_mount(self) -> None:
        self.border_title = "broker"

    def show(self, history: RunHistory) -> None:
        sample = history.sample
        tick = history.last_tick
        now = history.now()
        reason = stale_reason(sample, now) if sample is not None else "no broker figures yet"
        self.set_class(bool(reason), "-stale")
        if sample is None:
            self.border_title = "broker: waiting for the first poll"
        elif reason:
            self.border_title = f"STALE {sample.source}: {reason}"
        else:
            age = human_age(source_age(sample, now))
            interval = f"{sample.statistics_interval:g}s"
            self.border_title = f"broker ({sample.source}, age {age}, stats every {interval})"
        lines = self._broker_lines(history, sample, "dim" if reason else "") if sample else []
        figures = Group(self._client_and_broker(sample, tick, reason), *lines)
        # The table's rows never wrap; the lines below it rarely change their words' lengths.
        shape = wrap_key(*(line.plain for line in lines))
        self.update(figures, layout=shape != self._shown_shape)
        self._shown_shape = shape

    def _client_and_broker(
        self, sample: BrokerSample | None, client: Tick | None, reason: str
    ) -> Table:
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column("figure", style="bold", no_wrap=True)
        table.add_column("client", justify="right", no_wrap=True)
        table.add_column("broker", justify="right", no_wrap=True)
        dim = "dim" if reason else ""

        def broker_value(value: float | int | None) -> Text:
            return Text(human_count(value) if sample is not None else "?", style=dim)

        table.add_row("", Text("client", style="italic"), Text("broker", style="italic"))
        table.add_row(
            "pending confirms",
            human_count(client.pending_confirms) if client else "?",
            broker_value(sample.unconfirmed if sample else None),
        )
        table.add_row(
            "unacked",
            human_count(client.unacked) if client else "?",
            broker_value(sample.unacked if sample else None),
        )
        table.add_row(
            "blocked conns",
            human_count(client.blocked) if client else "?",
            broker_value(sample.connections_blocked if sample else None),
        )
        return table

    def _broker_lines(self, history: RunHistory, sample: BrokerSample, dim: str) -> list[Text]:
        lines = []
        trend, direction = history.depth_direction()
        if trend is None or direction is None:
            arrow = ""
        elif direction is Trend.FLAT:
            arrow = " → steady"
        else:
            arrow = f" {'↑' if direction is Trend.UP else '↓'} {trend:+,.0f}/s"
        depth = Text.assemble(
            ("queue depth ", "bold"),
            (f"{human_count(sample.queue_depth)} ({human_count(sample.queue_ready)} ready)", dim),
            (arrow, "bold " + ("yellow" if trend and trend > 0.5 else "")),
        )
        lines.append(depth)
        used = sum(n.mem_used or 0 for n in sample.nodes)
        limit = sum(n.mem_limit or 0 for n in sample.nodes)
        if sample.nodes and limit:
            fraction = used / limit
            style = "bold red" if sample.memory_alarm else ("yellow" if fraction > 0.8 else "")
            lines.append(
                Text.assemble(
                    ("memory ", "bold"),
                    (f"{bar(fraction)} ", style or dim),
                    (f"{human_bytes(used)} / {human_bytes(limit)}", dim),
                    (" ALARM" if sample.memory_alarm else "", "bold reverse red"),
                )
            )
        disks = [n for n in sample.nodes if n.disk_free is not None]
        if disks:
            node = min(disks, key=lambda n: n.disk_free or 0)
            lines.append(
                Text.assemble(
                    ("disk free ", "bold"),
                    (f"{human_bytes(node.disk_free)} ", dim),
                    (f"(limit {human_bytes(node.disk_free_limit)})", dim),
                    (" ALARM" if sample.disk_alarm else "", "bold reverse red"),
                )
            )
        return lines
