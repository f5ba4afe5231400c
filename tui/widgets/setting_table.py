"""The per-setting table: every phase of the run so far, side by side, judged as it goes.

An operator tuning a run asks "which in-flight limit (prefetch, ack interval...) is
best?". The report answers after the run; this table answers while it goes, with the same
rules: each phase's msg/s as the report and ``flowdeck run --json`` give it
(``figures.run``: messages over the clients' active time in the phase), the
median consume rate once the phase settled beside it, the report's verdict
(``figures.verdict.judge``) and, once a setting has run at two values, the line
the report would print ("recommended inflight=…"), its phase highlighted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, JustifyMethod, RenderResult
from rich.table import Table
from rich.text import Text
from textual import events
from textual.widgets import Static

from flowdeck.engine import STEERABLE, Setting
from flowdeck.figures import Trend, Verdict, trend_of
from flowdeck.tui.model import (
    BASIS_TICKS,
    SETTING_TAGS,
    SETTLE_SECONDS,
    SWEEP_SETTINGS,
    RunHistory,
    SettingRow,
    SettingVerdicts,
    format_tag,
    human_count,
    phase_tag,
    setting_verdicts,
)
from flowdeck.tui.widgets.latency_chart import milliseconds

VERDICT_STYLES: dict[Verdict, str] = {
    Verdict.SUSTAINABLE: "green",
    Verdict.BACK_PRESSURED: "yellow",
    Verdict.THROTTLED: "yellow",
    Verdict.OVERLOADED: "bold red",
    Verdict.DRAINING: "magenta",
    Verdict.CATCHING_UP: "magenta",
    Verdict.TOO_SHORT: "dim",
    Verdict.DRAIN: "dim",
    Verdict.PAUSED: "dim",
}
#: The fewest cells the setting and the verdict columns shrink to, with an ellipsis (the
#: figures beside them are never cut); the verdict keeps VERDICT_KEEPS cells ("back-pressured"
#: whole) before the setting gives up any.
SETTING_MIN = 8
VERDICT_MIN = 9
VERDICT_KEEPS = 14
#: Below this width the note under the table is its short form.
NARROW = 60
#: Under the table: where the rest of the answer is.
FULL_VIEW_HINT = "T: full screen, with every verdict's reason, the chart and the whole reasoning"
BEST_STYLE = "bold black on rgb(0,158,115)"
BEST_MARK = "★"


#: The verdict column of a phase that has no client figures yet (the run's first moments).
NOT_JUDGED = "not judged yet"


def verdict_cell(verdict: Verdict | None) -> tuple[str, str]:
    """The verdict as the table writes it and its style: its name, or :data:`NOT_JUDGED`
    unstyled."""
    if verdict is None:
        return NOT_JUDGED, ""
    return verdict.value, VERDICT_STYLES.get(verdict, "")


def row_setting(row: SettingRow, varying: tuple[Setting, ...]) -> str:
    """What sets the phase apart: the settings that differ between phases (``if=40
    pf=500``), then what started the phase when it is not one of those (a mark's ``⚑ label``,
    ``pause``, ``resume``, ``drain``); with nothing varied yet, the phase's own label."""
    parts = [format_tag(s, row.settings.value(s)) for s in varying]
    tag = "drain" if row.drain else phase_tag(row.label)
    if not parts or (tag not in parts and tag != "start"):
        parts.append(tag)
    return " ".join(parts)


def varying_settings(rows: tuple[SettingRow, ...]) -> tuple[Setting, ...]:
    """The steerable settings that took more than one value over the non-drain phases."""
    load = [r for r in rows if not r.drain]
    return tuple(
        row.setting
        for row in STEERABLE
        if row.setting in SETTING_TAGS and len({r.settings.value(row.field) for r in load}) > 1
    )


def trend(slope: float | None, through: float = 0.0) -> str:
    """The queue's recent trend (``figures.trend_of``): ``↓ -1,200/s`` while it drains."""
    found = trend_of(slope, through)
    if found is None or slope is None:
        return "?"
    if found is Trend.FLAT:
        return "→ flat"
    return f"{'↑' if found is Trend.UP else '↓'} {slope:+,.0f}/s"


@dataclass(frozen=True, slots=True)
class TableColumn:
    """A column of the table: its header, its cells and how it aligns."""

    header: str
    cells: tuple[Text, ...]
    justify: JustifyMethod = "right"

    @property
    def natural(self) -> int:
        """The cells it takes to show every cell whole."""
        return max(cell_len(self.header), *(cell.cell_len for cell in self.cells))


def fit_columns(
    width: int,
    setting: TableColumn,
    figures: Sequence[TableColumn],
    optional: Sequence[TableColumn],
    verdict: TableColumn,
) -> tuple[list[TableColumn], int, int]:
    """Which columns fit ``width`` cells, and the widths of the setting and verdict columns.

    The figures (msg/s, p50, p99) are always shown whole; each optional column (in order)
    only when the setting and the verdict still show whole beside it. The setting and the
    verdict share what is left: the verdict gives up cells first (down to
    :data:`VERDICT_KEEPS`, which keeps "back-pressured" whole), then the setting (down to
    :data:`SETTING_MIN`), then the verdict again (down to :data:`VERDICT_MIN`), each cut
    with an ellipsis: a narrow column cuts words, never a figure."""

    def used(columns: Sequence[TableColumn]) -> int:
        return sum(column.natural for column in columns) + 2 * (len(columns) - 1)

    chosen = list(figures)
    for column in optional:
        if used([setting, *chosen, column, verdict]) <= width:
            chosen.append(column)
    spare = width - used(chosen) - 4  # the gaps either side of the setting and the verdict
    verdict_width = verdict.natural
    setting_width = setting.natural
    for column, floor in (("verdict", VERDICT_KEEPS), ("setting", SETTING_MIN),
                          ("verdict", VERDICT_MIN)):  # fmt: skip
        short = setting_width + verdict_width - spare
        if short <= 0:
            break
        if column == "verdict":
            verdict_width -= min(short, max(0, verdict_width - floor))
        else:
            setting_width -= min(short, max(0, setting_width - floor))
    return chosen, setting_width, verdict_width


def verdict_columns(
    verdicts: SettingVerdicts, *, full: bool = False
) -> tuple[TableColumn, list[TableColumn], list[TableColumn], TableColumn]:
    """The table's columns: the setting, the figures always shown (cons/s, p50, p99), the
    optional ones in the order they are added as the width allows, and the verdict.
    ``full``: the full-screen view's, which adds p99.9."""
    rows = verdicts.rows
    varying = varying_settings(rows)
    best = verdicts.best

    def text(value: str, position: int, style: str = "") -> Text:
        return Text(value, style="" if position == best else style)

    def ms(value: float | None) -> str:
        return "–" if value is None else milliseconds(value)

    numbered = list(enumerate(rows))
    setting = TableColumn(
        "  setting",
        tuple(
            text((f"{BEST_MARK} " if n == best else "  ") + row_setting(row, varying), n)
            for n, row in numbered
        ),
        "left",
    )
    figures = [
        TableColumn("cons/s", tuple(text(human_count(round(r.consume)), n) for n, r in numbered)),
        TableColumn("p50", tuple(text(ms(r.p50), n) for n, r in numbered)),
        TableColumn("p99", tuple(text(ms(r.p99), n) for n, r in numbered)),
    ]
    if full:
        figures.append(TableColumn("p99.9", tuple(text(ms(r.p999), n) for n, r in numbered)))
    optional = [
        TableColumn("pub/s", tuple(text(human_count(round(r.publish)), n) for n, r in numbered)),
        TableColumn("queue", tuple(text(trend(r.depth_slope, r.consume), n) for n, r in numbered)),
        TableColumn(
            "c/conf",
            tuple(
                text("–" if r.consume_ratio is None else f"{r.consume_ratio:.0%}", n)
                for n, r in numbered
            ),
        ),
        TableColumn(
            "settled", tuple(text(human_count(round(r.steady_consume)), n) for n, r in numbered)
        ),
    ]
    verdict = TableColumn(
        "verdict",
        tuple(
            text(word, n, style)
            for n, (word, style) in enumerate(map(verdict_cell, (r.verdict for r in rows)))
        ),
        "left",
    )
    return setting, figures, optional, verdict


#: The columns' order on screen, by header (those left out keep the order of the rest).
COLUMN_ORDER = ("  setting", "pub/s", "cons/s", "settled", "p50", "p99", "p99.9", "c/conf",
                "queue", "verdict")  # fmt: skip


def verdict_table(verdicts: SettingVerdicts, width: int, *, full: bool = False) -> Table:
    """The rows as a table ``width`` cells wide, p50 and p99 never cut (:func:`fit_columns`)."""
    setting, figures, optional, verdict = verdict_columns(verdicts, full=full)
    chosen, setting_width, verdict_width = fit_columns(width, setting, figures, optional, verdict)
    shown = sorted([setting, *chosen, verdict], key=lambda c: COLUMN_ORDER.index(c.header))
    table = Table(box=None, padding=(0, 1), pad_edge=False, expand=False, show_edge=False)
    for column in shown:
        fixed = {setting.header: setting_width, verdict.header: verdict_width}.get(column.header)
        table.add_column(
            column.header,
            justify=column.justify,
            no_wrap=True,
            overflow="ellipsis",
            width=fixed,
            min_width=column.natural if fixed is None else None,
        )
    for n in range(len(verdicts.rows)):
        table.add_row(
            *(column.cells[n] for column in shown),
            style=BEST_STYLE if n == verdicts.best else None,
        )
    return table


class FittedTable:
    """The table fitted to whatever width it is drawn at (the run summary's, the full-screen
    view's), p50 and p99 whole."""

    def __init__(self, verdicts: SettingVerdicts, *, full: bool = False) -> None:
        self.verdicts = verdicts
        self.full = full

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield verdict_table(self.verdicts, options.max_width, full=self.full)


class SettingTable(Static):
    """One row per phase: sustained msg/s, e2e p50/p99, consume vs confirm, queue trend and
    verdict; the recommended (or best) row highlighted, the recommendation line under it."""

    DEFAULT_CSS = """
    SettingTable {
        height: auto;
        padding: 0 1;
    }
    """

    #: What is on screen: the figures and their rendering.
    verdicts: SettingVerdicts | None = None
    shown: Group | None = None
    _laid_out_at = -1  # the width the verdicts were last laid out for

    def show(self, history: RunHistory) -> None:
        self.verdicts = setting_verdicts(history)
        self._lay_out(self.size.width)

    def on_resize(self, event: events.Resize) -> None:
        """Lay the columns out again for a new width at once, not at the next second's
        figures: a tab just opened or a terminal widened showed its verdicts cut
        ('sustaina…') until then."""
        if self.verdicts is not None and event.size.width != self._laid_out_at:
            self._lay_out(event.size.width)

    def _lay_out(self, width: int) -> None:
        assert self.verdicts is not None
        self._laid_out_at = width
        self.shown = self.render_verdicts(self.verdicts, width=width)
        self.update(self.shown)

    @staticmethod
    def render_verdicts(verdicts: SettingVerdicts, *, width: int) -> Group:
        if not verdicts.rows:
            return Group(Text("waiting for the first second of the run", style="dim"))
        table = verdict_table(verdicts, width)
        lines: list[Text] = [Text(line, style="bold") for line in verdicts.lines]
        if not verdicts.lines:
            lines.append(no_sweep_note())
        shown = {column.header for column in table.columns}
        lines.append(
            Text(basis_note(verdicts.rows, narrow=width < NARROW, wide="settled" in shown),
                 style="dim")
        )  # fmt: skip
        lines.append(Text(FULL_VIEW_HINT, style="dim italic"))
        return Group(table, *lines)


def no_sweep_note() -> Text:
    swept = ", ".join(s.value for s in SWEEP_SETTINGS)
    return Text(
        f"no sweep yet: run a second value of {swept} to get the report's recommendation",
        style="italic",
    )


def basis_note(rows: tuple[SettingRow, ...], *, narrow: bool, wide: bool = False) -> str:
    """What the figures are: msg/s and ms as the report prints them (or, on an attached run
    whose ticks carry no client snapshots, medians of the per-second figures), settled."""
    settled = f"after its first {SETTLE_SECONDS} s"
    if rows and all(row.basis == BASIS_TICKS for row in rows):
        return (
            f"msg/s and ms: medians of each phase's seconds {settled} (this view gets no "
            "client snapshots; the report's msg/s may differ); verdicts by the report's rules"
        )
    early = (
        "; a phase the run has not yet reported: medians of its seconds"
        if any(row.basis == BASIS_TICKS for row in rows)
        else ""
    )
    if narrow:
        return f"msg/s and ms as the report{early}"
    steady = f"settled: median cons/s {settled}; " if wide else ""
    return (
        "msg/s as the report and run --json: a phase's messages over the clients' active "
        f"time in it; {steady}ms: its e2e histograms merged, as the report{early}"
    )
