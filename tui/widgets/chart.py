"""The charts' common base: a braille line chart painted from strips, legend in the title.

``draw`` takes the series as plain figures and renders them at once with
:func:`tui.plot.plot` (a millisecond or two), on the event loop: no threads, so nothing
competes with the loop for the GIL while it answers keys. The rows come as runs of one
colour, so a line of the chart is a handful of segments, cheap to paint.

The legend goes in the border title (each name in its series' colour, with the series'
last value beside it), not in the plot, so even the short charts of an 80x24 terminal keep
all their rows for the lines. Phase lines carry their labels (``if=40``, ``⚑ warm-up``) on
the plot's top row; alarm, pause and outage periods are shaded behind the lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.events import Resize
from textual.strip import Strip
from textual.widget import Widget

from flowdeck.tui.model import RunHistory
from flowdeck.tui.palette import OKABE_ITO, RGB
from flowdeck.tui.plot import Band, Series, plot

#: How each shaded period looks: the colour of its name, mixed into the background.
SHADE_COLOURS: dict[str, str] = {"alarm": "vermillion", "paused": "yellow", "outage": "purple"}
#: How much of a period's colour is mixed into the chart's background.
SHADE_STRENGTH = 0.22


def blend(colour: RGB, background: RGB, strength: float = SHADE_STRENGTH) -> RGB:
    r, g, b = (
        round(c * strength + k * (1 - strength)) for c, k in zip(colour, background, strict=True)
    )
    return (r, g, b)


@dataclass(frozen=True, slots=True)
class _Figure:
    """What the chart shows until the next ``draw``: the widget repaints it on resize."""

    series: tuple[Series, ...]
    log_y: bool
    phases: tuple[tuple[float, str], ...]  # (elapsed, label)
    shades: tuple[tuple[float, float, str], ...]  # (start, end, kind)
    y_top: float | None


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
        self._figure: _Figure | None = None

    def set_legend(self, title: str, series: Sequence[tuple[str, str, str]]) -> None:
        """``series`` = (name, Okabe-Ito colour name, last value as shown) in drawing order."""
        parts = [title]
        narrow = self.size.width and self.size.width < self.NARROW
        for name, colour, value in series:
            if narrow and " " not in name:
                name = name[:4]
            r, g, b = OKABE_ITO[colour]
            shown = f" [b]{value}[/b]" if value else ""
            parts.append(f"[rgb({r},{g},{b})]━{name}{shown}[/]")
        self.border_title = " ".join(parts)

    def draw(
        self,
        series: Sequence[Series],
        *,
        log_y: bool = False,
        history: RunHistory | None = None,
        y_top: float | None = None,
    ) -> None:
        """Show these series from now on, with the history's phase lines and shaded
        periods, the y axis up to ``y_top`` when given (see :func:`model.axis_top`)."""
        phases: tuple[tuple[float, str], ...] = ()
        shades: tuple[tuple[float, float, str], ...] = ()
        if history is not None and series:
            phases = tuple((mark.elapsed, mark.tag) for mark in history.phases)
            shades = tuple((s.start, s.end, s.kind) for s in history.shades)
        self._figure = _Figure(tuple(series), log_y, phases, shades, y_top)
        self._paint()

    def on_resize(self, event: Resize) -> None:
        self._paint()

    def _paint(self) -> None:
        width, height = self.size
        if self._figure is None or not width or not height:
            return
        figure = self._figure
        base = self.rich_style
        background: RGB = (0, 0, 0)
        if base.bgcolor is not None:
            background = base.bgcolor.get_truecolor()[:3]
        bands = [
            Band(
                start,
                end,
                blend(OKABE_ITO[SHADE_COLOURS[kind]], background),
                OKABE_ITO[SHADE_COLOURS[kind]],
                kind,
            )
            for start, end, kind in figure.shades
        ]
        rows = plot(
            figure.series,
            width,
            height,
            log_y=figure.log_y,
            vlines=[x for x, _ in figure.phases],
            vline_labels=[tag for _, tag in figure.phases],
            vline_colour=OKABE_ITO["purple"],
            bands=bands,
            y_top=figure.y_top,
        )
        styles: dict[tuple[RGB | None, RGB | None], Style] = {}

        def style(colour: RGB | None, shade: RGB | None) -> Style:
            if colour is None and shade is None:
                return base
            key = (colour, shade)
            if key not in styles:
                styles[key] = base + Style(
                    color=None if colour is None else f"rgb({colour[0]},{colour[1]},{colour[2]})",
                    bgcolor=None if shade is None else f"rgb({shade[0]},{shade[1]},{shade[2]})",
                )
            return styles[key]

        self._strips = [
            Strip([Segment(run.text, style(run.colour, run.shade)) for run in row], width)
            for row in rows
        ]
        self.refresh()

    def render_line(self, y: int) -> Strip:
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)
