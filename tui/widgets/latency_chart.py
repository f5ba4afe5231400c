"""Latency chart: p50/p95/p99 end-to-end and confirm latency, log scale, per second."""

from __future__ import annotations

from textual.reactive import reactive

from flowdeck.engine import LatencyKind, SendBasis
from flowdeck.tui.model import RunHistory, axis_top
from flowdeck.tui.palette import OKABE_ITO
from flowdeck.tui.plot import Marker, Series
from flowdeck.tui.widgets.chart import Chart

BASIS_WORDS = {
    SendBasis.ACTUAL: "from send",
    SendBasis.INTENDED: "from INTENDED send",
}
#: Headroom over the 95th percentile on a log axis: one step of the 1-2-5 ticks.
LOG_HEADROOM = 2.0


def milliseconds(value: float) -> str:
    """A latency as the legend shows it: ``0.42``, ``8.4``, ``120``, ``2.4k`` (ms)."""
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


class LatencyChart(Chart):
    """Percentiles in ms on a log scale; ``basis`` switches actual / intended send time.

    The axis tops out at twice the 95th percentile of the values on screen, so the
    seconds-long latency of a stall does not flatten the steady milliseconds around it.
    """

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
        values: list[float] = []
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
                values.extend(ys)
                series = Series(xs, ys, OKABE_ITO[colour], marker)
                lines.append((label, colour, milliseconds(ys[-1]), series))
        self.set_legend(
            f"e2e ms (log) {BASIS_WORDS[self.basis]}",
            [(name, colour, last) for name, colour, last, _ in lines],
        )
        top = axis_top(values, headroom=LOG_HEADROOM)
        self.draw([series for *_, series in lines], log_y=True, history=history, y_top=top or None)
