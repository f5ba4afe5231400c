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

from rich.console import Group
from rich.table import Table
from rich.text import Text
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
#: Below this width the table keeps only the setting, consume rate, p99 and verdict.
NARROW = 60
#: From this width the table adds the settled consume rate (the median once settled).
WIDE = 90
BEST_STYLE = "bold black on rgb(0,158,115)"
BEST_MARK = "★"


def row_setting(row: SettingRow, varying: tuple[Setting, ...]) -> str:
    """What sets the phase apart: the settings that differ between phases (``if=40
    pf=500``), then what started the phase when it is not one of those (a mark's ``⚑ label``,
    ``pause``, ``resume``, ``drain``); with nothing varied yet, the phase's own label."""
    parts = [format_tag(s, getattr(row.settings, s.value)) for s in varying]
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
        if row.setting in SETTING_TAGS and len({getattr(r.settings, row.field) for r in load}) > 1
    )


def trend(slope: float | None, through: float = 0.0) -> str:
    """The queue's recent trend (``figures.trend_of``): ``↓ -1,200/s`` while it drains."""
    found = trend_of(slope, through)
    if found is None or slope is None:
        return "?"
    if found is Trend.FLAT:
        return "→ flat"
    return f"{'↑' if found is Trend.UP else '↓'} {slope:+,.0f}/s"


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

    def show(self, history: RunHistory) -> None:
        verdicts = setting_verdicts(history)
        self.verdicts = verdicts
        width = self.size.width
        self.shown = self.render_verdicts(verdicts, narrow=width < NARROW, wide=width >= WIDE)
        self.update(self.shown)

    @staticmethod
    def render_verdicts(verdicts: SettingVerdicts, *, narrow: bool, wide: bool = False) -> Group:
        if not verdicts.rows:
            return Group(Text("waiting for the first second of the run", style="dim"))
        varying = varying_settings(verdicts.rows)
        names = [row_setting(row, varying) for row in verdicts.rows]
        table = Table(box=None, padding=(0, 1), pad_edge=False, expand=True, show_edge=False)
        table.add_column(
            "  setting",
            no_wrap=True,
            overflow="ellipsis",
            min_width=min(12 if narrow else 24, 2 + max(len(name) for name in names)),
        )
        if not narrow:
            table.add_column("pub/s", justify="right", no_wrap=True)
        table.add_column("cons/s", justify="right", no_wrap=True)
        if wide:
            table.add_column("settled", justify="right", no_wrap=True)
        if not narrow:
            table.add_column("p50", justify="right", no_wrap=True)
        table.add_column("p99", justify="right", no_wrap=True)
        if not narrow:
            table.add_column("c/conf", justify="right", no_wrap=True)
            table.add_column("queue", justify="right", no_wrap=True)
        table.add_column("verdict", no_wrap=True, overflow="ellipsis", min_width=8)
        for position, row in enumerate(verdicts.rows):
            best = position == verdicts.best
            ratio = row.consume_ratio
            cells: list[Text | str] = [(f"{BEST_MARK} " if best else "  ") + names[position]]
            if not narrow:
                cells.append(human_count(round(row.publish)))
            cells.append(human_count(round(row.consume)))
            if wide:
                cells.append(human_count(round(row.steady_consume)))
            if not narrow:
                cells.append("–" if row.p50 is None else milliseconds(row.p50))
            cells.append("–" if row.p99 is None else milliseconds(row.p99))
            if not narrow:
                cells.append("–" if ratio is None else f"{ratio:.0%}")
                cells.append(trend(row.depth_slope, row.consume))
            verdict = "–" if row.verdict is None else row.verdict.value
            style = "" if best or row.verdict is None else VERDICT_STYLES.get(row.verdict, "")
            cells.append(Text(verdict, style=style))
            table.add_row(*cells, style=BEST_STYLE if best else None)
        lines: list[Text] = [Text(line, style="bold") for line in verdicts.lines]
        if not verdicts.lines:
            swept = ", ".join(s.value for s in SWEEP_SETTINGS)
            lines.append(
                Text(
                    f"no sweep yet: run a second value of {swept} to get the report's "
                    "recommendation",
                    style="italic",
                )
            )
        lines.append(Text(basis_note(verdicts.rows, narrow=narrow, wide=wide), style="dim"))
        return Group(table, *lines)


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
