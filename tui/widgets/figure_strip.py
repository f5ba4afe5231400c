"""The figure strip: the run's current numbers in bold, big enough to read across a room.

Charts show how figures move; an operator tuning a run, or an audience watching a demo,
needs the number itself: msg/s published, confirmed and consumed, e2e p50 and p99, pending
confirms, queue depth and blocked connections, and in a run to streams the consumers'
offset lag (the stream plugin's, with the management API's sample). Each figure carries
the age of its data:
engine figures come from the last tick (every second), queue depth from the broker's
latest sample (its own clock: 5 s on a broker with RabbitMQ's default statistics interval),
so a number that is a few seconds old says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from flowdeck.engine import LatencyKind, SendBasis
from flowdeck.figures import Trend
from flowdeck.tui.model import (
    RunHistory,
    human_age,
    human_count,
    source_age,
    stale_reason,
)
from flowdeck.tui.widgets.latency_chart import milliseconds

#: Width from which figures take their long names ("publish" rather than "pub").
WIDE = 120


@dataclass(frozen=True, slots=True)
class Figure:
    """One cell of the strip: a value as shown, what it is, how old, and how loud."""

    name: str
    short: str
    value: str
    #: Seconds since the figure was measured; None: nothing measured yet.
    age: float | None
    style: str = "bold"
    stale: bool = False
    #: Left out below WIDE columns, where eight cells fill the strip (a ninth ran its
    #: label into the next: ``depth 1slag 1s`` at 80 columns).
    wide_only: bool = False

    def age_text(self, wide: bool) -> str:
        if self.age is None:
            return "waiting"
        age = human_age(self.age) if wide else f"{self.age:.0f}s"
        return f"STALE {age}" if self.stale else age


def figures(history: RunHistory) -> list[Figure]:
    """The strip's cells from the history (pure, so tests read them without a screen)."""
    now = history.now()
    tick = history.last_tick
    if tick is None:
        return [Figure(n, s, "–", None, "dim") for n, s in _NAMES]
    tick_age = max(0.0, now - tick.at)
    e2e = tick.latency.get((LatencyKind.END_TO_END, SendBasis.ACTUAL))
    measured = e2e is not None and e2e.count > 0
    cells = [
        Figure("publish", "pub", _rate(tick.publish_rate), tick_age),
        Figure("confirm", "conf", _rate(tick.confirm_rate), tick_age),
        Figure("consume", "cons", _rate(tick.consume_rate), tick_age),
        Figure(
            "e2e p50",
            "p50",
            f"{milliseconds(e2e.p50)} ms" if e2e is not None and measured else "–",
            tick_age,
        ),
        Figure(
            "e2e p99",
            "p99",
            f"{milliseconds(e2e.p99)} ms" if e2e is not None and measured else "–",
            tick_age,
        ),
        Figure("pending", "pend", human_count(tick.pending_confirms), tick_age),
    ]
    sample = history.sample
    if sample is None or not sample.queues:
        cells.append(Figure("queue depth", "depth", "?", None, "dim"))
    else:
        reason = stale_reason(sample, now)
        _, direction = history.depth_direction()
        arrow = "" if direction is None else ARROWS[direction]
        cells.append(
            Figure(
                "queue depth",
                "depth",
                f"{human_count(sample.queue_depth)}{arrow}",
                source_age(sample, now),
                "dim" if reason else ("bold yellow" if direction is Trend.UP else "bold"),
                stale=bool(reason),
            )
        )
    lag = _offset_lag(history, now)
    if lag is not None:
        cells.append(lag)
    blocked_style = "bold reverse red" if tick.blocked else "bold"
    cells.append(
        Figure(
            "blocked",
            "blkd",
            f"{tick.blocked}/{tick.connections}",
            tick_age,
            blocked_style,
        )
    )
    return cells


def _offset_lag(history: RunHistory, now: float) -> Figure | None:
    """The stream consumers' offset lag, summed, from the management API's last sample;
    None (no cell) in a run without streams, whose samples carry no stream figures."""
    sample = history.broker.get("management")
    if sample is None or sample.stream_connections is None:
        return None
    reason = stale_reason(sample, now)
    lag = sample.stream_offset_lag
    return Figure(
        "offset lag",
        "lag",
        "–" if lag is None else human_count(lag),
        source_age(sample, now),
        "dim" if reason or lag is None else "bold",
        stale=bool(reason),
        wide_only=True,
    )


_NAMES = (
    ("publish", "pub"),
    ("confirm", "conf"),
    ("consume", "cons"),
    ("e2e p50", "p50"),
    ("e2e p99", "p99"),
    ("pending", "pend"),
    ("queue depth", "depth"),
    ("blocked", "blkd"),
)


def _rate(value: float) -> str:
    return f"{human_count(round(value))}/s"


#: The queue depth's recent trend as an arrow.
ARROWS = {Trend.UP: " ↑", Trend.DOWN: " ↓", Trend.FLAT: " →"}


class FigureStrip(Static):
    """Two rows across the screen: the figures in bold, and under each what it is and how
    old it is (``publish 0.4s``)."""

    DEFAULT_CSS = """
    FigureStrip {
        height: 2;
        padding: 0 1;
        background: $surface;
    }
    """

    def show(self, history: RunHistory) -> None:
        wide = self.size.width >= WIDE
        table = Table.grid(expand=True)
        cells = [cell for cell in figures(history) if wide or not cell.wide_only]
        for _ in cells:
            table.add_column(justify="left", no_wrap=True, overflow="ellipsis", ratio=1)
        table.add_row(*(Text(cell.value, style=cell.style) for cell in cells))
        table.add_row(
            *(
                Text(f"{cell.name if wide else cell.short} {cell.age_text(wide)}", style="dim")
                for cell in cells
            )
        )
        # Always two rows high: no layout of the screen when the figures change.
        self.update(table, layout=False)
