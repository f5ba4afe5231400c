"""The live dashboard: watches a run through its listener and steers it with keys."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize

from flowdeck.engine import (
    Autopilot,
    Change,
    FlowdeckError,
    NodeFault,
    Setting,
    SpecError,
)
from flowdeck.tui.keys import KEY_TABLE, LABELS, KeyRow, bindings, step_change
from flowdeck.tui.layout import fit_layout, narrow_css, show_tab, toggle_side
from flowdeck.tui.navigation import Route, open_screen
from flowdeck.tui.run_screen import SCHEDULE_HELD, RunScreen
from flowdeck.tui.source import FaultControl
from flowdeck.tui.widgets.dashboard import Dashboard
from flowdeck.tui.widgets.footer import FittingFooter
from flowdeck.tui.widgets.node_strip import NodeStrip, short_names

__all__ = ["NODE_KEY", "REPORT_KEY", "SCHEDULE_HELD", "LiveScreen"]

#: Not steering, so not in the dashboard's key table: the help lists it after it.
REPORT_KEY = KeyRow("g", "report_session", "report on this run's session (after the run)", "Run")


#: Breaks the broker rather than steering the load: listed with the run's keys.
NODE_KEY = KeyRow(
    "k",
    "node_fault",
    "kill, cut off (namespace cluster) or start again a node of the private cluster (asks)",
    "Run",
)


class LiveScreen(RunScreen):
    """The run as it goes: the dashboard, the node strip, and every steering key."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings(),
        *bindings((REPORT_KEY,)),
        *bindings((NODE_KEY,)),
        Binding("escape", "leave", "back", show=False),
    ]
    #: The autopilot started with ``o`` (while it searches, and after).
    autopilot: Autopilot | None = None
    DEFAULT_CSS = narrow_css("LiveScreen")
    HELP_ROWS = (*KEY_TABLE, REPORT_KEY, NODE_KEY)

    def compose(self) -> ComposeResult:
        yield Dashboard(self.control.spec.name, id="dashboard")
        yield NodeStrip(id="node-strip")
        yield FittingFooter()

    def on_resize(self, event: Resize) -> None:
        fit_layout(self, event.size.width, self.history)

    def action_toggle_view(self) -> None:
        """On a narrow terminal: the charts, or the broker panel and event log."""
        if not self.has_class("-narrow"):
            self.notify("the charts and the broker panel are both shown at this width")
            return
        toggle_side(self, self.history)

    # -- steering ------------------------------------------------------------------------

    def action_step(self, setting: str, direction: int) -> None:
        chosen = Setting(setting)
        try:
            change = step_change(self.control.requested_settings, chosen, direction)
        except SpecError as exc:
            self.notify(exc.message, severity="warning", title=LABELS[chosen])
            return
        self.request(change)

    def action_pause_resume(self) -> None:
        paused = self.control.settings.paused
        self.request(Change(Setting.RESUME if paused else Setting.PAUSE))

    def action_mark_phase(self) -> None:
        def chosen(change: Change | None) -> None:
            if change is not None:
                self.request(change)

        open_screen(
            self, Route.CHANGE_PROMPT, "Label of the new phase:", mark=True, callback=chosen
        )

    def action_skip_step(self) -> None:
        if self.finished:
            return
        try:
            self.control.skip_step()
        except FlowdeckError as exc:
            self.notify(str(exc), severity="warning")
        self.show_schedule_state()

    def action_autotune(self) -> None:
        """Start the autopilot on the in-flight limit, or stop it (docs/engine.md): it
        steps the limit, holds each step until msg/s is steady and leaves the run at the
        value the report would recommend; its steps and choice show in the event log."""
        if self.finished:
            return
        if self.autopilot is not None and self.autopilot.active:
            self.autopilot.stop()
            return
        remote = getattr(self.control, "toggle_autotune", None)
        try:
            if Autopilot.can_steer(self.control):
                self.autopilot = Autopilot(self.control, "inflight")
                self.autopilot.attach()
            elif remote is not None:
                # A run this cockpit attached to: its own process runs the autopilot (the
                # control endpoint's /autotune), which o toggles; its steps come back as
                # the run's events.
                remote("inflight")
                self.notify(
                    "autopilot: asked the run to search the in-flight limit, or to "
                    "stop searching (o again toggles); its steps show in the events"
                )
                return
            else:
                raise FlowdeckError("this run cannot be steered by the autopilot")
        except FlowdeckError as exc:
            self.notify(str(exc), severity="error", title="autopilot refused")
            return
        self.notify("autopilot: searching the in-flight limit (o stops it)")

    def action_per_setting(self) -> None:
        open_screen(self, Route.PER_SETTING, self.history, self.control.spec.name)

    def action_show_tab(self, tab: str) -> None:
        show_tab(self, self.history, tab)

    def action_report_session(self) -> None:
        """The report on the session this run recorded, once the run has ended: the job's
        Spark would take the CPU the load needs (and skew the figures being recorded), and
        the phase still running would be judged on its first seconds. While the run goes,
        the per-setting table (``t``) judges the phases by the report's rules."""
        if not self.finished:
            self.notify(
                "the run is still recording: a report now would take the CPU the load needs "
                "and judge the running phase on its first seconds. Press t for the phases "
                "judged by the report's rules now; the report comes after the run (g on its "
                "summary)",
                title="report after the run",
                severity="warning",
                timeout=12,
            )
            return
        session = self.control.session_dir
        if session is None:
            self.notify("this run has no recorded session to report on", severity="error")
            return
        open_screen(self, Route.SESSIONS, session.parent, report_on=[session])

    def action_node_fault(self) -> None:
        """Kill a node of the cluster flowdeck runs, or start a dead one again, through
        the same code as a schedule's ``fault`` step (asks which, then confirms)."""
        if self.finished:
            self.notify("the run has ended; no node to kill", severity="warning")
            return
        control = self.control
        local = control.local_nodes if isinstance(control, FaultControl) else None
        if local is None or not isinstance(control, FaultControl):
            self.notify(
                "the run's broker is not a node or cluster flowdeck runs, so no node of it is "
                "killed from here; for node-loss drills start one (flowdeck broker start "
                "--nodes 3) and run on it",
                title="no node to kill",
                severity="warning",
                timeout=10,
            )
            return
        nodes = [(n, node.nodename, node.running) for n, node in enumerate(local.nodes, 1)]
        names = short_names([name for _, name, _ in nodes])

        def answered(fault: NodeFault | None) -> None:
            if fault is None:
                return
            try:
                control.fault(fault, "operator")
            except FlowdeckError as exc:
                self.notify(str(exc), severity="error", title="fault refused")
                return
            self.show_schedule_state()

        open_screen(
            self,
            Route.NODE_FAULT,
            nodes,
            names,
            partitionable=local.can_partition,
            cut=local.cut_off(),
            callback=answered,
        )
