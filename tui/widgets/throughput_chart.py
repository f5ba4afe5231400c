"""Throughput chart: target, published, confirmed and consumed msg/s with phase marks."""

from __future__ import annotations

from flowdeck.tui.model import RunHistory
from flowdeck.tui.palette import OKABE_ITO
from flowdeck.tui.plot import Marker, Series
from flowdeck.tui.widgets.chart import Chart


class ThroughputChart(Chart):
    """Rates per second over the scrolling window; phase boundaries as vertical lines."""

    SERIES: tuple[tuple[str, str, Marker], ...] = (
        ("target", "grey", "dot"),
        ("published", "blue", "braille"),
        ("confirmed", "orange", "braille"),
        ("consumed", "green", "braille"),
    )

    def show(self, history: RunHistory) -> None:
        points = list(history.throughput)
        if not points:
            self.border_title = "msg/s: waiting for the first second of the run"
            return
        xs = [p.elapsed for p in points]
        lines = []
        for name, colour, marker in self.SERIES:
            ys = [getattr(p, name) for p in points]
            if name == "target" and not any(ys):
                continue  # as fast as possible: no target line
            lines.append((name, colour, Series(xs, ys, OKABE_ITO[colour], marker)))
        self.set_legend("msg/s", [(name, colour) for name, colour, _ in lines])
        self.draw(
            [series for _, _, series in lines], phases=[mark.elapsed for mark in history.phases]
        )
