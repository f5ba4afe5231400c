"""msg/s and e2e p99 against the swept setting: the report's sweep chart, in a terminal.

The report draws a swept setting's values on x against msg/s consumed (left) and e2e
latency (right, log). Here each phase of the sweep is a row, in the order of the
setting's value: a bar of its msg/s consumed (linear, from 0) and a bar of its e2e p99
(log scale), with the figures beside them. A phase that cannot say what its setting
carries (draining a backlog, catching up, overloaded, too short to judge: not a candidate
of the recommendation) is drawn in light shade with ``✗`` and its verdict; the
recommended one carries ``★``. So it reads without colour too. The candidates the latency
rule left out are named in the reasoning, which the chart stands beside.

The candidates set both axes: a drain's msg/s or a backlog's seconds of p99 would squeeze
them into a cell or two, so those bars are drawn clipped (``»``), their figures beside them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from flowdeck.figures import SweepPoint
from flowdeck.tui.model import SettingRow, SettingVerdicts, SweptSetting, human_count, phase_tag
from flowdeck.tui.widgets.latency_chart import milliseconds

#: Colours of the two bars (Okabe-Ito blue and vermillion: told apart with any colour
#: vision); a point that is not a candidate is drawn dim in light shade instead.
THROUGHPUT_COLOUR = "rgb(0,114,178)"
P99_COLOUR = "rgb(213,94,0)"
RECOMMENDED_MARK = "★"
EXCLUDED_MARK = "✗"
#: Eighths of a cell, for bars that end part-way through one.
_EIGHTHS = " ▏▎▍▌▋▊▉"
_FULL = "█"
_SHADE = "░"
#: The msg/s axis runs to this many times the highest candidate's msg/s.
AXIS_ROOM = 1.1
CLIPPED = "»"
#: The fewest cells a bar is drawn in (below it the chart is not drawn), and the most.
MIN_BAR = 6
MAX_BAR = 40


@dataclass(frozen=True, slots=True)
class ChartRow:
    """One phase of the sweep as the chart draws it."""

    value: int
    name: str
    consume: float
    p99: float | None
    candidate: bool
    recommended: bool
    verdict: str


def chart_rows(verdicts: SettingVerdicts, swept: SweptSetting) -> list[ChartRow]:
    """The sweep's points with their phases' figures, by value (then by phase)."""
    recommended = swept.recommendation.point
    values = [point.value for _, point in swept.points]
    rows: list[tuple[int, int, ChartRow]] = []
    for position, point in swept.points:
        row: SettingRow = verdicts.rows[position]
        name = str(point.value)
        if values.count(point.value) > 1:
            name += f" {phase_tag(row.label)}"
        rows.append(
            (
                point.value,
                row.index,
                ChartRow(
                    value=point.value,
                    name=name,
                    consume=row.consume,
                    p99=point.p99_ms,
                    candidate=point.candidate,
                    recommended=point is recommended,
                    verdict=_not_candidate(point),
                ),
            )
        )
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]


def _not_candidate(point: SweepPoint) -> str:
    if point.candidate:
        return ""
    if not point.verdict.judged_capacity:
        return point.verdict.value
    return "catching up on a backlog"


def bar(share: float, cells: int, *, shaded: bool = False) -> str:
    """A bar ``share`` (0..1) of ``cells`` long, ending in an eighth of a cell; at least a
    sliver for any share above 0 (a value is never drawn as nothing)."""
    share = min(max(share, 0.0), 1.0)
    eighths = round(share * cells * 8)
    if share > 0 and eighths == 0:
        eighths = 1
    whole, part = divmod(eighths, 8)
    if shaded:
        return (_SHADE * (whole + (1 if part else 0))).ljust(cells)
    return (_FULL * whole + (_EIGHTHS[part] if part else "")).ljust(cells)


def _fitting(cells: int, *headers: str) -> str:
    """The longest of ``headers`` (longest first) that fits ``cells``."""
    return next((h for h in headers if len(h) <= cells), headers[-1])


def clipped_bar(share: float, cells: int, *, shaded: bool = False) -> str:
    """:func:`bar`, ending in :data:`CLIPPED` when ``share`` runs past the axis."""
    if share <= 1.0:
        return bar(share, cells, shaded=shaded)
    return bar(1.0, cells, shaded=shaded)[:-1] + CLIPPED


def log_share(value: float, low: float, high: float) -> float:
    """Where ``value`` sits on a log axis from ``low`` to ``high`` (0..1)."""
    if value <= 0 or high <= low:
        return 1.0 if value > 0 else 0.0
    return (math.log10(value) - math.log10(low)) / (math.log10(high) - math.log10(low))


def p99_axis(p99s: Iterable[float]) -> tuple[float, float]:
    """The log axis of the p99 bars: from the decade below the lowest p99 to the highest
    (at least a decade), so the lowest still draws a bar."""
    found = [p for p in p99s if p > 0]
    if not found:
        return 1.0, 10.0
    low = 10 ** math.floor(math.log10(min(found)) - 1e-9)
    return low, max(max(found), low * 10)


def latency_text(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{milliseconds(value / 1000)} s" if value >= 1000 else f"{milliseconds(value)} ms"


def sweep_chart(verdicts: SettingVerdicts, swept: SweptSetting, width: int) -> Group:
    """The chart of one swept setting, ``width`` cells wide."""
    rows = chart_rows(verdicts, swept)
    setting = swept.setting.value
    title = Text.assemble(
        (f"msg/s consumed and e2e p99 against {setting}", "bold"),
        " (as the report's sweep chart)",
    )
    if not rows:
        return Group(title, Text("no phase of the sweep to draw yet", style="dim"))
    excluded = [row for row in rows if not row.candidate]
    names = max(len(setting), *(len(row.name) for row in rows))
    consumed = [human_count(round(row.consume)) for row in rows]
    latencies = [latency_text(row.p99) for row in rows]
    note = max((len(row.verdict) + 2 for row in excluded), default=0)
    fixed = names + 2 + max(len(c) for c in consumed) + max(len(t) for t in latencies) + note
    gaps = 2 * (6 if note else 5)
    bars = min(MAX_BAR, (width - fixed - gaps) // 2)
    if bars < MIN_BAR and note:
        note, gaps = 0, 10  # the verdicts go to the legend's line
        bars = min(MAX_BAR, (width - fixed + max(len(r.verdict) + 2 for r in excluded) - gaps) // 2)
    if bars < MIN_BAR:
        return Group(title, Text("too narrow for the chart: widen the terminal", style="dim"))
    # The candidates set the axes (the module's docstring says why).
    top = max((r.consume for r in rows if r.candidate), default=0.0) * AXIS_ROOM
    top = top or max(r.consume for r in rows) or 1.0
    judged = [r.p99 for r in rows if r.candidate and r.p99 is not None]
    low, high = p99_axis(judged or [r.p99 for r in rows if r.p99 is not None])
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False, expand=False)
    table.add_column(setting, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True, width=1)
    table.add_column(_fitting(bars, "msg/s consumed", "msg/s"), no_wrap=True, width=bars)
    table.add_column("", justify="right", no_wrap=True)
    table.add_column(_fitting(bars, "e2e p99 (log)", "p99 (log)", "p99"), no_wrap=True, width=bars)
    table.add_column("", justify="right", no_wrap=True)
    if note:
        table.add_column("", no_wrap=True, overflow="ellipsis", width=note)
    for row, rate, latency in zip(rows, consumed, latencies, strict=True):
        shaded = not row.candidate
        mark = RECOMMENDED_MARK if row.recommended else (EXCLUDED_MARK if shaded else "")
        throughput_style = "dim" if shaded else THROUGHPUT_COLOUR
        latency_style = "dim" if shaded else P99_COLOUR
        strong = "bold" if row.recommended else ""
        cells: list[Text] = [
            Text(row.name, style=strong),
            Text(mark, style=strong),
            Text(clipped_bar(row.consume / top, bars, shaded=shaded), style=throughput_style),
            Text(rate, style=strong or ("dim" if shaded else "")),
            Text(
                clipped_bar(
                    0.0 if row.p99 is None else log_share(row.p99, low, high), bars, shaded=shaded
                ),
                style=latency_style,
            ),
            Text(latency, style=strong or ("dim" if shaded else "")),
        ]
        if note:
            cells.append(Text(row.verdict, style="dim"))
        table.add_row(*cells)
    keys = [f"{_FULL} a candidate by its verdict"]
    if excluded:
        keys.append(f"{_SHADE}{EXCLUDED_MARK} not one (its verdict)")
    if any(row.recommended for row in rows):
        keys.append(f"{RECOMMENDED_MARK} recommended")
    if any(row.consume > top or (row.p99 or 0.0) > high for row in rows):
        keys.append(f"{CLIPPED} beyond the axis (the figure beside it)")
    legend = Text("  ".join(keys) + f"; p99 axis from {latency_text(low)}", style="dim")
    if excluded and not note:
        legend.append(
            "; " + ", ".join(f"{row.name}: {row.verdict}" for row in excluded), style="dim"
        )
    return Group(title, table, legend)


class SweepCharts:
    """Every swept setting's chart, fitted to whatever width it is drawn at."""

    def __init__(self, verdicts: SettingVerdicts) -> None:
        self.verdicts = verdicts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for swept in self.verdicts.sweeps:
            yield sweep_chart(self.verdicts, swept, options.max_width)
