"""Latency chart: p50/p95/p99 end-to-end and confirm latency, log scale, per second."""

from __future__ import annotations

from textual.reactive import reactive

from flowdeck.engine import LatencyKind, SendBasis
from flowdeck.tui.model import RunHistory
from flowdeck.tui.palette import OKABE_ITO
from flowdeck.tui.plot import Marker, Series
from flowdeck.tui.widgets.chart import Chart

BASIS_WORDS = {
    SendBasis.ACTUAL: "from send",
    SendBasis.INTENDED: "from INTENDED send",
}


class LatencyChart(Chart):
    """Percentiles in ms on a log scale; ``basis`` switches actual / intended send time."""

    basis: reactive[SendBasis] = reactive(SendBasis.ACTUAL)

    SERIES: tuple[tuple[LatencyKind, str, str, Marker], ...] = (
        (LatencyKind.END_TO_END, "p50", "sky", "braille"),
        (LatencyKind.END_TO_END, "p95", "blue", "braille"),
        (LatencyKind.END_TO_END, "p99", "vermillion", "braille"),
        (LatencyKind.CONFIRM, "p50", "yellow", "dot"),
        (LatencyKind.CONFIRM, "p99", "orange", "dot"),
    )

    _history: RunHistory | None = None

    def watch_basis(self) -> None:
        if self._history is not None:
            self.show(self._history)

    def show(self, history: RunHistory) -> None:
        self._history = history
        lines = []
        for kind, percentile, colour, marker in self.SERIES:
            xs: list[float] = []
            ys: list[float] = []
            for point in history.latency:
                measured = point.percentiles.get((kind, self.basis))
                if measured is None or measured.count == 0:
                    continue
                value = getattr(measured, percentile)
                if value > 0:
                    xs.append(point.elapsed)
                    ys.append(value)
            if xs:
                label = percentile if kind is LatencyKind.END_TO_END else f"conf {percentile}"
                lines.append((label, colour, Series(xs, ys, OKABE_ITO[colour], marker)))
        self.set_legend(
            f"e2e ms (log) {BASIS_WORDS[self.basis]}", [(name, colour) for name, colour, _ in lines]
        )
        self.draw(
            [series for _, _, series in lines],
            log_y=True,
            phases=[mark.elapsed for mark in history.phases] if lines else [],
        )
