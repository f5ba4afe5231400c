"""The end of a run: outcome, rates, the per-phase table and the recommendation, latency,
the data-safety accounting, the session."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from flowdeck.engine import RunSummary
from flowdeck.tui.keys import HELP_BINDING
from flowdeck.tui.model import RunHistory, SettingVerdicts, human_count, setting_verdicts
from flowdeck.tui.navigation import Route, open_screen
from flowdeck.tui.widgets.footer import FittingFooter
from flowdeck.tui.widgets.host_table import host_table
from flowdeck.tui.widgets.run_header import clock
from flowdeck.tui.widgets.setting_table import FittedTable
from flowdeck.tui.widgets.sweep_chart import SweepCharts

if TYPE_CHECKING:
    from flowdeck.engine import HostRow

SAFETY_WORDS = (
    ("published", "published"),
    ("confirmed", "confirmed by the broker"),
    ("nacked", "nacked by the broker"),
    ("returned", "returned (unroutable)"),
    ("consumed", "consumed"),
    ("redelivered", "redelivered"),
    ("duplicates", "consumed twice"),
    ("unconfirmed", "never confirmed nor nacked"),
    ("rejected", "rejected by consumers"),
    ("requeued", "of them requeued"),
    ("dead_lettered", "dead-lettered"),
    ("dropped", "dropped (rejected for good)"),
    ("lost", "LOST: confirmed, never consumed"),
)

#: The rows shown only when the run's consumers rejected or the broker dead-lettered.
REJECTION_FIELDS = ("rejected", "requeued", "dead_lettered", "dropped")


def summary_renderable(
    summary: RunSummary, hosts: Sequence[HostRow] = (), verdicts: SettingVerdicts | None = None
) -> RenderableType:
    """The summary; ``hosts``: the per-host rows, shown when there is more than one;
    ``verdicts``: the run's phases judged and its recommendation (the live screen's
    per-setting table at the run's end), shown under the rates."""
    head = Text.assemble(
        (f"{summary.name}: {summary.outcome}", "bold"),
        f" after {clock(summary.duration)} ({summary.stop_reason or 'ran its duration'}), "
        f"{summary.phases} phase{'s' if summary.phases != 1 else ''}",
    )
    rates = Text(
        f"mean msg/s: published {summary.publish_rate:.1f}, confirmed "
        f"{summary.confirm_rate:.1f}, consumed {summary.consume_rate:.1f}"
    )
    safety = Table(title="data safety", expand=False)
    safety.add_column("messages")
    safety.add_column("count", justify="right")
    rejects = any(getattr(summary.safety, f) for f in REJECTION_FIELDS)
    for field, words in SAFETY_WORDS:
        value = getattr(summary.safety, field)
        if field in REJECTION_FIELDS and not rejects:
            continue  # a run whose consumers reject nothing: no rows of nothing
        bad = field in ("lost", "duplicates", "unconfirmed", "nacked") and value > 0
        safety.add_row(
            Text(words, style="bold red" if bad else ""),
            Text(f"{value:,}", style="bold red" if bad else ""),
        )
    latency = Table(title="latency ms over the run", expand=False)
    for header in ("kind", "basis", "p50", "p95", "p99", "max", "samples"):
        latency.add_column(header, justify="right" if header not in ("kind", "basis") else "left")
    for (kind, basis), p in sorted(summary.latency.items()):
        latency.add_row(
            kind.value,
            basis.value,
            f"{p.p50:.2f}",
            f"{p.p95:.2f}",
            f"{p.p99:.2f}",
            f"{p.max:.2f}",
            human_count(p.count),
        )
    no_confirms = Text(
        "confirms off: the broker confirmed nothing, so loss cannot be assessed",
        style="bold yellow",
    )
    where = Text.assemble(
        ("session recorded in ", "bold"),
        (summary.session_dir or "nowhere (recording off)", "underline"),
    )
    parts: list[RenderableType] = [head, rates]
    if verdicts is not None and verdicts.rows:
        parts.append(Text(""))
        parts.append(phases_renderable(verdicts))
    parts.append(safety)
    if not summary.safety.confirms:
        parts.append(no_confirms)
    parts.extend(Text(f"incomplete: {line}", style="yellow") for line in summary.incomplete)
    if summary.undelivered:
        parts.append(Text(f"undelivered: {summary.undelivered}", style="bold red"))
    parts.append(latency)
    if len(hosts) > 1:
        parts.append(hosts_renderable(hosts, summary.started))
    parts.append(where)
    if summary.recording_error:
        parts.append(Text(f"recording: {summary.recording_error}", style="bold red"))
    for error in summary.errors:
        parts.append(Text(f"error: {error}", style="red"))
    return Group(*parts)


def phases_renderable(verdicts: SettingVerdicts) -> RenderableType:
    """The run's phases as the per-setting table shows them, the recommendation under them
    and each swept setting's chart: the answer of a tuning run, where the run ends."""
    title = Text.assemble(
        ("per phase", "bold"),
        " — judged by the report's rules (t: every verdict's reason and the recommendation's "
        "whole reasoning)",
    )
    lines: list[RenderableType] = [Text(line, style="bold") for line in verdicts.lines]
    if not verdicts.lines:
        lines.append(Text("one value of each setting: no sweep, no recommendation", style="dim"))
    charts: list[RenderableType] = [Text(""), SweepCharts(verdicts)] if verdicts.sweeps else []
    return Group(title, FittedTable(verdicts), *lines, *charts, Text(""))


def hosts_renderable(hosts: Sequence[HostRow], started_at: float) -> RenderableType:
    """The per-host table as ``flowdeck run`` prints it under its summary: where each
    worker ran, its clients, counts, msg/s over its active time and CPU over the run."""
    places = len({row.host for row in hosts})
    title = Text(
        f"per host: {len(hosts)} workers on {places} host{'s' if places != 1 else ''} "
        "(msg/s: each worker's mean over the run; CPU in % of one core)",
        style="bold",
    )
    return Group(title, host_table(hosts, width=120, started_at=started_at, expand=False))


class SummaryScreen(Screen[None]):
    """Shown when a run ends; Escape goes back to launch another."""

    BINDINGS: ClassVar[list[BindingType]] = [
        HELP_BINDING,
        Binding("escape,enter", "back", "back to launch"),
        Binding(
            "t",
            "per_setting",
            "per setting",
            tooltip="the per-setting table full "
            "screen: every verdict's reason, the chart, the recommendation's reasoning",
        ),
        Binding("v", "sessions", "sessions"),
        Binding("g", "report", "report", tooltip="report on this run's session"),
    ]

    def __init__(
        self,
        summary: RunSummary,
        hosts: Sequence[HostRow] = (),
        history: RunHistory | None = None,
    ) -> None:
        super().__init__()
        self.summary = summary
        #: The run's per-host rows (shown when there is more than one).
        self.hosts = tuple(hosts)
        #: What the run's screen saw of it: its phases, judged (None: not known here).
        self.history = history
        self.verdicts = None if history is None else setting_verdicts(history)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(summary_renderable(self.summary, self.hosts, self.verdicts), id="summary")
        yield FittingFooter()

    def action_per_setting(self) -> None:
        if self.history is None:
            self.notify("this summary has no per-phase figures", severity="warning")
            return
        open_screen(self, Route.PER_SETTING, self.history, self.summary.name, follow=False)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_sessions(self) -> None:
        open_screen(self, Route.SESSIONS)

    def action_report(self) -> None:
        """The report on the session this run recorded, as ``g`` on the live screen does
        once a run has ended: the sessions list, with the job started on it."""
        session = self.summary.session_dir
        if not session:
            self.notify(
                "this run was not recorded (recording off): nothing to report on",
                severity="warning",
            )
            return
        session = Path(session)
        open_screen(self, Route.SESSIONS, session.parent, report_on=[session])
