"""The charts' common base: a braille line chart painted from strips, legend in the title.

``draw`` takes the series as plain figures and renders them at once with
:func:`tui.plot.plot` (a millisecond or two), on the event loop: no threads, so nothing
competes with the loop for the GIL while it answers keys. The rows come as runs of one
colour, so a line of the chart is a handful of segments, cheap to paint.

The legend goes in the border title (each name in its series' colour), not in the plot,
so even the short charts of an 80x24 terminal keep all their rows for the lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.events import Resize
from textual.strip import Strip
from textual.widget import Widget

from flowdeck.tui.palette import OKABE_ITO, RGB
from flowdeck.tui.plot import Series, plot


class Chart(Widget):
    DEFAULT_CSS = """
    Chart {
        border: round $primary;
        border-title-align: left;
        height: 1fr;
        min-height: 7;
    }
    """

    #: Below this width, series names shorten to their first four letters.
    NARROW = 60

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._strips: list[Strip] = []
        self._figure: tuple[tuple[Series, ...], bool, tuple[float, ...]] | None = None

    def set_legend(self, title: str, series: list[tuple[str, str]]) -> None:
        """``series`` = (name, Okabe-Ito colour name) in drawing order."""
        parts = [title]
        narrow = self.size.width and self.size.width < self.NARROW
        for name, colour in series:
            if narrow and " " not in name:
                name = name[:4]
            r, g, b = OKABE_ITO[colour]
            parts.append(f"[rgb({r},{g},{b})]━{name}[/]")
        self.border_title = " ".join(parts)

    def draw(
        self, series: Sequence[Series], *, log_y: bool = False, phases: Sequence[float] = ()
    ) -> None:
        """Show these series (and phase marks at these x) from now on."""
        self._figure = (tuple(series), log_y, tuple(phases))
        self._paint()

    def on_resize(self, event: Resize) -> None:
        self._paint()

    def _paint(self) -> None:
        width, height = self.size
        if self._figure is None or not width or not height:
            return
        series, log_y, phases = self._figure
        rows = plot(
            series, width, height, log_y=log_y, vlines=phases, vline_colour=OKABE_ITO["purple"]
        )
        base = self.rich_style
        styles: dict[RGB, Style] = {}

        def style(colour: RGB | None) -> Style:
            if colour is None:
                return base
            if colour not in styles:
                styles[colour] = base + Style(color=f"rgb({colour[0]},{colour[1]},{colour[2]})")
            return styles[colour]

        self._strips = [
            Strip([Segment(run.text, style(run.colour)) for run in row], width) for row in rows
        ]
        self.refresh()

    def render_line(self, y: int) -> Strip:
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)
