"""Throughput chart: target, published, confirmed and consumed msg/s with phase marks."""

from __future__ import annotations

from flowdeck.tui.model import RunHistory, axis_top, human_count
from flowdeck.tui.palette import OKABE_ITO
from flowdeck.tui.plot import Marker, Series
from flowdeck.tui.widgets.chart import Chart


class ThroughputChart(Chart):
    """Rates per second over the scrolling window; phase boundaries as labelled lines.

    The y axis reaches the 95th percentile of the rates on screen plus a fifth, and at
    least the target: the burst after an alarm or a pause (publishers catching up on their
    schedule) is drawn clipped at the top instead of squashing a steady 3,000 msg/s flat.
    """

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
        measured: list[float] = []
        for name, colour, marker in self.SERIES:
            ys = [getattr(p, name) for p in points]
            if name == "target" and not any(ys):
                continue  # as fast as possible: no target line
            if name != "target":
                measured.extend(ys)
            last = human_count(round(ys[-1]))
            lines.append((name, colour, last, Series(xs, ys, OKABE_ITO[colour], marker)))
        self.set_legend("msg/s", [(name, colour, last) for name, colour, last, _ in lines])
        target = max((p.target for p in points), default=0.0)
        top = max(axis_top(measured), target * 1.05)
        self.draw([series for *_, series in lines], history=history, y_top=top or None)
