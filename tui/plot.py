"""Line charts drawn with braille characters: pure functions, numpy, no Textual.

The dashboard redraws two charts every second on the event loop that also answers keys.
A general plotting library (plotext) took 25-55 ms of pure Python per chart, plus as much
again turning its ANSI output into styled text; under the GIL, even built in a thread it
stretched every paint and key of the cockpit. This draws what the cockpit needs in a
millisecond or two: series as braille lines (2x4 dots per cell) or as ``•`` per point,
vertical phase marks with their labels, shaded periods (alarms, pauses, outages) behind
the lines, a log or linear y axis with round ticks (its top optionally set by the caller,
so a spike is drawn clipped instead of flattening everything else), elapsed time on x.

:func:`plot` returns the rows as runs of cells sharing one colour, ready for the widget to
turn into a few segments per line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

RGB = tuple[int, int, int]
Marker = Literal["braille", "dot"]

#: Braille dot bits by (row within the cell, column within the cell).
_BRAILLE_BITS = np.array([[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]], dtype=np.uint8)
_DOT = "•"
#: Seconds between x ticks, smallest first; the first that leaves room for the labels wins.
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
#: Smallest plot area worth drawing (cells inside the axes).
MIN_PLOT_WIDTH = 8
MIN_PLOT_HEIGHT = 2


@dataclass(frozen=True, slots=True)
class Series:
    """One line of the chart: points in data units, a colour and how points are marked."""

    xs: Sequence[float]
    ys: Sequence[float]
    colour: RGB
    marker: Marker = "braille"


@dataclass(frozen=True, slots=True)
class Band:
    """A stretch of x shaded behind the lines (``shade`` is the background), its name in
    ``colour`` on the plot's bottom row."""

    start: float
    end: float
    shade: RGB
    colour: RGB
    label: str = ""


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive cells of one row in one colour (None: the widget's own, for axes) on one
    background (None: the widget's own)."""

    text: str
    colour: RGB | None = None
    shade: RGB | None = None


Row = list[Run]


def plot(
    series: Sequence[Series],
    width: int,
    height: int,
    *,
    log_y: bool = False,
    vlines: Sequence[float] = (),
    vline_colour: RGB | None = None,
    vline_labels: Sequence[str] = (),
    bands: Sequence[Band] = (),
    y_top: float | None = None,
) -> list[Row]:
    """``height`` rows of exactly ``width`` cells: axes, ticks, labels and the series.

    Points that cannot be drawn (NaN, infinite, or not positive on a log axis) are left
    out. The y axis spans the data rounded out to its ticks, up to ``y_top`` (data units)
    when given and lower than the data: points above it are drawn on the top row. x spans
    the data. ``vline_labels`` (one per vline, "" for none) go on the plot's top row right
    of their line, as far as the next line leaves room.
    """
    if width <= 0 or height <= 0:
        return []
    xs_all, ys_all = _finite_points(series, log_y)
    if height - 3 < MIN_PLOT_HEIGHT or width < MIN_PLOT_WIDTH + 8:
        note = f"(chart needs more room than {width}x{height})"
        return [[Run(note[:width].ljust(width))]] + [[Run(" " * width)] for _ in range(height - 1)]
    plot_height = height - 3
    if ys_all.size and y_top is not None and y_top > 0:
        top = math.log10(y_top) if log_y else y_top
        if top > float(ys_all.min()):
            ys_all = np.minimum(ys_all, top)
    if ys_all.size:
        y_ticks, y_low, y_high = _y_ticks(ys_all, max(2, plot_height // 3 + 1), log_y)
    else:
        y_ticks, y_low, y_high = [], 0.0, 1.0
    labels = [(value, _compact(10**value if log_y else value)) for value in y_ticks]
    label_width = max((len(text) for _, text in labels), default=0)
    plot_width = width - label_width - 2
    if plot_width < MIN_PLOT_WIDTH:
        labels, label_width, plot_width = [], 0, width - 2
    x_low, x_high = (float(xs_all.min()), float(xs_all.max())) if xs_all.size else (0.0, 1.0)
    if x_high <= x_low:
        x_low, x_high = x_low - 0.5, x_high + 0.5

    canvas = _Canvas(plot_width, plot_height, (x_low, x_high), (y_low, y_high))
    for band in bands:
        canvas.band(band)
    shown = [x for x in vlines if x_low <= x <= x_high]
    if vline_colour is not None:
        for x in shown:
            canvas.vline(x, vline_colour)
    for one in series:
        xs, ys = _finite(one, log_y)
        if xs.size:
            canvas.draw(xs, ys, one.colour, one.marker)
    if vline_colour is not None and vline_labels:
        labelled = [(x, t) for x, t in zip(vlines, vline_labels, strict=False) if t]
        canvas.labels([(x, t) for x, t in labelled if x_low <= x <= x_high], 0, vline_colour, shown)
    for band in bands:
        if band.label:
            canvas.labels(
                [(max(band.start, x_low), band.label)], plot_height - 1, band.colour, whole=True
            )

    tick_rows = {canvas.row_of(value): text for value, text in labels}
    rows: list[Row] = [[Run(" " * label_width + "┌" + "─" * plot_width + "┐")]]
    for row in range(plot_height):
        text = tick_rows.get(row)
        axis = Run((text or "").rjust(label_width) + ("┤" if text is not None else "│"))
        rows.append([axis, *canvas.runs(row), Run("│")])
    x_ticks = _x_ticks(x_low, x_high, plot_width) if xs_all.size else []
    bottom = ["─"] * plot_width
    label_line = [" "] * width
    free_from = 0
    for x in x_ticks:
        column = canvas.column_of(x)
        bottom[column] = "┬"
        text = _clock(x)
        start = label_width + 1 + column - len(text) // 2
        start = max(start, free_from, 0)
        if start + len(text) > width:
            continue
        label_line[start : start + len(text)] = text
        free_from = start + len(text) + 1
    rows.append([Run(" " * label_width + "└" + "".join(bottom) + "┘")])
    rows.append([Run("".join(label_line))])
    return rows


class _Canvas:
    """The plot area: braille dot bits, point marks and a colour per cell."""

    def __init__(
        self, width: int, height: int, x_range: tuple[float, float], y_range: tuple[float, float]
    ) -> None:
        self.width = width
        self.height = height
        self.x_range = x_range
        self.y_range = y_range
        self.bits = np.zeros((height, width), dtype=np.uint8)
        self.dots = np.zeros((height, width), dtype=bool)
        self.colour = np.full((height, width), -1, dtype=np.int16)
        self.shade = np.full((height, width), -1, dtype=np.int16)
        self.colours: list[RGB] = []
        #: Text written over the plot (labels), by (row, column).
        self.text: dict[tuple[int, int], str] = {}

    def _pixels(
        self, xs: npt.NDArray[np.float64], ys: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Dot columns from the left and dot rows from the top."""
        (x0, x1), (y0, y1) = self.x_range, self.y_range
        columns = np.rint((xs - x0) / (x1 - x0) * (self.width * 2 - 1)).astype(np.int64)
        rows = np.rint((y1 - ys) / (y1 - y0) * (self.height * 4 - 1)).astype(np.int64)
        return (
            np.clip(columns, 0, self.width * 2 - 1),
            np.clip(rows, 0, self.height * 4 - 1),
        )

    def row_of(self, y: float) -> int:
        _, rows = self._pixels(np.array([0.0]), np.array([y]))
        return int(rows[0]) // 4

    def column_of(self, x: float) -> int:
        columns, _ = self._pixels(np.array([x]), np.array([self.y_range[0]]))
        return int(columns[0]) // 2

    def _colour_index(self, colour: RGB) -> int:
        if colour not in self.colours:
            self.colours.append(colour)
        return self.colours.index(colour)

    def draw(
        self,
        xs: npt.NDArray[np.float64],
        ys: npt.NDArray[np.float64],
        colour: RGB,
        marker: Marker,
    ) -> None:
        columns, rows = self._pixels(xs, ys)
        index = self._colour_index(colour)
        if marker == "dot":
            cells = (rows // 4, columns // 2)
            self.dots[cells] = True
            self.colour[cells] = index
            return
        columns, rows = _joined(columns, rows)
        cells = (rows // 4, columns // 2)
        np.bitwise_or.at(self.bits, cells, _BRAILLE_BITS[rows % 4, columns % 2])
        self.dots[cells] = False
        self.colour[cells] = index

    def vline(self, x: float, colour: RGB) -> None:
        columns, _ = self._pixels(np.array([x]), np.array([self.y_range[0]]))
        rows = np.arange(self.height * 4)
        columns = np.full_like(rows, columns[0])
        cells = (rows // 4, columns // 2)
        np.bitwise_or.at(self.bits, cells, _BRAILLE_BITS[rows % 4, columns % 2])
        self.colour[cells] = self._colour_index(colour)

    def band(self, band: Band) -> None:
        """Shade the columns from ``band.start`` to ``band.end`` (at least one)."""
        (x0, x1) = self.x_range
        if band.end < x0 or band.start > x1:
            return
        first = self.column_of(max(band.start, x0))
        last = self.column_of(min(band.end, x1))
        self.shade[:, first : last + 1] = self._colour_index(band.shade)

    def labels(
        self,
        placed: Sequence[tuple[float, str]],
        row: int,
        colour: RGB,
        stops: Sequence[float] = (),
        *,
        whole: bool = False,
    ) -> None:
        """Write each text on ``row`` from the column right of its x, cut before the next
        of ``stops`` (the other phase lines) or a label already there; one that would keep
        fewer than two cells (or, ``whole``, that does not fit whole) is left out."""
        index = self._colour_index(colour)
        stop_columns = sorted({self.column_of(x) for x in stops})
        for x, text in sorted(placed):
            start = min(self.column_of(x) + 1, self.width - 1)
            end = next((c for c in stop_columns if c >= start), self.width)
            taken = next((c for c in range(start, end) if (row, c) in self.text), None)
            end = taken if taken is not None else end
            room = end - start
            if room < 2 or (whole and room < len(text)):
                continue
            shown = text if len(text) <= room else text[: room - 1] + "…"
            for offset, character in enumerate(shown):
                self.text[(row, start + offset)] = character
                self.colour[row, start + offset] = index

    def runs(self, row: int) -> list[Run]:
        """The row's cells, grouped into runs of one colour on one background."""
        bits = self.bits[row]
        characters = [
            _DOT if dot else (chr(0x2800 + int(b)) if b else " ")
            for b, dot in zip(bits, self.dots[row], strict=True)
        ]
        for (text_row, column), character in self.text.items():
            if text_row == row:
                characters[column] = character
        colours = self.colour[row].tolist()
        shades = self.shade[row].tolist()
        runs: list[Run] = []
        start = 0
        for column in range(1, self.width + 1):
            if (
                column == self.width
                or colours[column] != colours[start]
                or shades[column] != shades[start]
            ):
                index, shade = colours[start], shades[start]
                runs.append(
                    Run(
                        "".join(characters[start:column]),
                        self.colours[index] if index >= 0 else None,
                        self.colours[shade] if shade >= 0 else None,
                    )
                )
                start = column
        return runs


def _joined(
    columns: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every dot on the straight segments between consecutive points (vectorised)."""
    if columns.size < 2:
        return columns, rows
    dx = np.diff(columns)
    dy = np.diff(rows)
    steps = np.maximum(np.abs(dx), np.abs(dy)) + 1
    segment = np.repeat(np.arange(steps.size), steps)
    offset = np.arange(segment.size) - np.repeat(np.cumsum(steps) - steps, steps)
    fraction = offset / np.maximum(steps[segment] - 1, 1)
    return (
        np.rint(columns[segment] + fraction * dx[segment]).astype(np.int64),
        np.rint(rows[segment] + fraction * dy[segment]).astype(np.int64),
    )


def _finite(one: Series, log_y: bool) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    xs = np.asarray(one.xs, dtype=np.float64)
    ys = np.asarray(one.ys, dtype=np.float64)
    keep = np.isfinite(xs) & np.isfinite(ys)
    if log_y:
        keep &= ys > 0
        return xs[keep], np.log10(ys[keep])
    return xs[keep], ys[keep]


def _finite_points(
    series: Sequence[Series], log_y: bool
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    pairs = [_finite(one, log_y) for one in series]
    if not pairs:
        return np.empty(0), np.empty(0)
    return np.concatenate([xs for xs, _ in pairs]), np.concatenate([ys for _, ys in pairs])


def _nice_step(span: float, most: int) -> float:
    """The smallest 1, 2 or 5 x 10^k step that cuts ``span`` into at most ``most`` parts."""
    raw = span / max(1, most)
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5):
        if factor * power >= raw * (1 - 1e-9):
            return float(factor * power)
    return float(10 * power)


def _y_ticks(
    values: npt.NDArray[np.float64], most: int, log_y: bool
) -> tuple[list[float], float, float]:
    """At most ``most`` round ticks and the axis range, rounded out to the outer ticks; all
    in axis units (log10 of the value on a log axis)."""
    low, high = float(values.min()), float(values.max())
    if log_y:
        return _log_ticks(low, high, most)
    if high - low < 1e-12:
        pad = abs(high) * 0.1 or 1.0
        low, high = (low - pad if low - pad >= 0 or low < 0 else 0.0), high + pad
    step = _nice_step(high - low, most - 1)
    while True:
        first = math.floor(low / step + 1e-9) * step
        last = math.ceil(high / step - 1e-9) * step
        count = round((last - first) / step) + 1
        if count <= most:
            return [first + i * step for i in range(count)], first, last
        step = _nice_step(step * 1.5, 1)


def _log_ticks(low: float, high: float, most: int) -> tuple[list[float], float, float]:
    """Ticks at 1-2-5 x 10^k when they fit, else at powers of ten (every k-th decade)."""
    if high - low < 1e-9:
        low, high = low - 0.3, high + 0.3
    decades = range(math.floor(low) - 1, math.ceil(high) + 2)
    candidate_sets = [[math.log10(m) + d for d in decades for m in (1, 2, 5)]]
    candidate_sets += [[float(d) for d in decades if d % k == 0] for k in (1, 2, 3, 5, 10)]
    for candidates in candidate_sets:
        first = max((c for c in candidates if c <= low + 1e-9), default=candidates[0])
        last = min((c for c in candidates if c >= high - 1e-9), default=candidates[-1])
        ticks = [c for c in candidates if first - 1e-9 <= c <= last + 1e-9]
        if len(ticks) <= most:
            return ticks, first, last
    return [math.floor(low), math.ceil(high)], math.floor(low), math.ceil(high)


def _x_ticks(low: float, high: float, plot_width: int) -> list[float]:
    """Round elapsed times (1, 2, 5, 10, 15, 30 s, 1 min, ...) with room for their labels."""
    room = max(1, plot_width // 7)
    span = high - low
    step = next((s for s in _TIME_STEPS if span / s <= room), _TIME_STEPS[-1])
    first = math.ceil(low / step - 1e-9) * step
    return [float(t) for t in np.arange(first, high + 1e-9, step)]


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    sign = "-" if seconds < 0 else ""
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours}:{minutes:02d}:{secs:02d}" if hours else f"{sign}{minutes}:{secs:02d}"


def _compact(value: float) -> str:
    """A tick label: ``0.05``, ``2.5``, ``300``, ``2400``, ``12k``, ``1.5M``."""
    value = round(value, 9)
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:g}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:g}k"
    return f"{value:g}"
