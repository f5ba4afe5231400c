"""The live dashboard: watches a run through its listener and steers it with keys."""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import TabbedContent

from flowdeck.collectors import BrokerSample
from flowdeck.engine import (
    Autopilot,
    Change,
    EventKind,
    FlowdeckError,
    NodeFault,
    NullSink,
    RunEvent,
    RunSummary,
    SendBasis,
    Setting,
    SpecError,
    Tick,
)
from flowdeck.tui.app import freeze_long_lived
from flowdeck.tui.keys import KEY_TABLE, LABELS, KeyRow, bindings, step_change
from flowdeck.tui.messages import (
    BrokerSampleReceived,
    ChangeRequested,
    EventReceived,
    RunFailed,
    RunFinished,
    TickReceived,
)
from flowdeck.tui.model import RunHistory
from flowdeck.tui.screens.help import HelpScreen, rows_for
from flowdeck.tui.screens.node_fault import FaultControl, NodeFaultPrompt
from flowdeck.tui.screens.prompt import ChangePrompt, ConfirmStop
from flowdeck.tui.source import RunControl
from flowdeck.tui.widgets.dashboard import Dashboard
from flowdeck.tui.widgets.event_log import EventLog
from flowdeck.tui.widgets.footer import FittingFooter
from flowdeck.tui.widgets.latency_chart import LatencyChart
from flowdeck.tui.widgets.node_strip import NodeStrip, short_names

#: Terminal width from which the dashboard spreads out.
WIDE_COLUMNS = 140
#: Below this width the charts and the broker column take turns (``v``): side by side, the
#: charts' legends and the broker panel's title were cut (``━targ ━publ``, ``sta…``).
NARROW_COLUMNS = 100
#: The header's note while an operator's change holds the schedule.
SCHEDULE_HELD = "SCHEDULE PAUSED (S resumes)"


def narrow_css(screen: str) -> str:
    """The one-column layout of a narrow terminal for a screen showing a Dashboard (class
    ``-narrow`` set by the screen; ``-side`` shows the broker column instead of the
    charts). Rules start with the screen's type: a screen's CSS is scoped to it."""
    return f"""
    {screen}.-narrow Dashboard #side {{
        display: none;
    }}
    {screen}.-narrow.-side Dashboard #side {{
        display: block;
        width: 1fr;
    }}
    {screen}.-narrow.-side Dashboard #charts {{
        display: none;
    }}
    """


def fit_layout(screen: Screen[None], width: int, history: RunHistory) -> None:
    """Set the dashboard's layout classes for a terminal ``width`` columns wide."""
    screen.query_one(Dashboard).set_class(width >= WIDE_COLUMNS, "-wide")
    screen.set_class(width < NARROW_COLUMNS, "-narrow")
    rewrap_events(screen, history)


def toggle_side(screen: Screen[None], history: RunHistory) -> None:
    """On a narrow terminal: show the charts, or the broker panel and the event log."""
    screen.toggle_class("-side")
    rewrap_events(screen, history)


def rewrap_events(screen: Screen[None], history: RunHistory) -> None:
    """Write the event log again once its new width is laid out: lines keep the width
    they were written at (a log filled while hidden read one word a line), and the log
    ends on the newest entry."""
    log = screen.query_one(EventLog)
    screen.call_after_refresh(lambda: log.replace_all(history.events))


def show_tab(screen: Screen[None], history: RunHistory, tab: str) -> None:
    """Bring a tab of the dashboard's right column to the front; the hosts tab only once it
    has rows to tell apart (else a toast says why)."""
    hosts = history.hosts
    if tab == "hosts" and not hosts.shown:
        screen.notify(
            "no worker has reported yet: the hosts tab shows once they do"
            if not hosts.known()
            else "this run's load comes from one worker on this host: the header and "
            "figures are its figures (the hosts tab shows with several workers or Spark "
            "hosts)"
        )
        return
    screen.query_one(TabbedContent).active = tab


#: Not steering, so not in the dashboard's key table: the help lists it after it.
REPORT_KEY = KeyRow("g", "report_session", "report on this run's session (after the run)", "Run")


#: Breaks the broker rather than steering the load: listed with the run's keys.
NODE_KEY = KeyRow(
    "k",
    "node_fault",
    "kill, cut off (namespace cluster) or start again a node of the private cluster (asks)",
    "Run",
)


class LiveScreen(Screen[None]):
    """The run as it goes. Every steering key posts a ChangeRequested; the controller
    resolves it, the settings bar shows it pending until the workers report it in force.
    """

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

    def __init__(self, control: RunControl, *, start: bool = True) -> None:
        super().__init__()
        self.control = control
        self.history = RunHistory()
        self.finished = False
        self._start = start
        self._redraw_due = False

    def compose(self) -> ComposeResult:
        yield Dashboard(self.control.spec.name, id="dashboard")
        yield NodeStrip(id="node-strip")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.control.add_sink(_ScreenSink(self))
        self.dashboard.show_settings(self.control.settings, self.control.pending)
        if self._start:
            self.run_control()

    @property
    def dashboard(self) -> Dashboard:
        return self.query_one(Dashboard)

    def on_resize(self, event: Resize) -> None:
        fit_layout(self, event.size.width, self.history)

    def action_toggle_view(self) -> None:
        """On a narrow terminal: the charts, or the broker panel and event log."""
        if not self.has_class("-narrow"):
            self.notify("the charts and the broker panel are both shown at this width")
            return
        toggle_side(self, self.history)

    # -- what the run says ---------------------------------------------------------------

    @work(exclusive=True, group="run")
    async def run_control(self) -> None:
        try:
            await self.control.start()
            freeze_long_lived()  # the recorder, collectors and workers' plumbing
            summary = await self.control.wait()
        except FlowdeckError as exc:
            self.post_message(RunFailed(str(exc)))
            return
        except Exception as exc:  # the screen must say what broke, not vanish
            self.post_message(RunFailed(f"the run broke off: {exc!r}"))
            return
        self.post_message(RunFinished(summary))

    @on(TickReceived)
    def tick_received(self, message: TickReceived) -> None:
        self.history.add_tick(message.tick)
        if not self._redraw_due:
            # Ticks that queued up while the loop was busy make one redraw, not several.
            self._redraw_due = True
            self.call_later(self.redraw)

    def redraw(self) -> None:
        self._redraw_due = False
        self.show_schedule_state()
        tick = self.history.last_tick
        if tick is not None:
            self.dashboard.show(self.history, tick.settings, tick.pending)

    @on(BrokerSampleReceived)
    def broker_sample_received(self, message: BrokerSampleReceived) -> None:
        self.history.add_broker(message.sample)
        self.dashboard.show_broker(self.history)
        for strip in self.query(NodeStrip):  # the demo's screen has none
            strip.show(self.history)

    @on(EventReceived)
    def event_received(self, message: EventReceived) -> None:
        self.history.add_event(message.event)
        self.dashboard.add_event(self.history, message.event)
        if message.event.kind in (EventKind.CHANGE_REQUESTED, EventKind.CHANGE_APPLIED):
            # A schedule step or another front-end asked: show it pending at once.
            self.dashboard.show_settings(self.control.settings, self.control.pending)

    @on(RunFinished)
    def run_finished(self, message: RunFinished) -> None:
        if self.finished:
            return
        self.finished = True
        from flowdeck.tui.screens.summary import SummaryScreen

        self.history.run_ended(message.summary.ended, message.summary.to_json())
        hosts = self.history.hosts
        rows = hosts.run_rows() if hosts.shown else []
        self.app.switch_screen(SummaryScreen(message.summary, hosts=rows))

    @on(RunFailed)
    def run_failed(self, message: RunFailed) -> None:
        self.finished = True
        self.dashboard.note = "RUN FAILED"
        self.dashboard.show(self.history, self.control.settings, ())
        self.notify(f"{message.reason}. Press Escape to go back.", severity="error", timeout=30)

    # -- steering ------------------------------------------------------------------------

    @on(ChangeRequested)
    def change_requested(self, message: ChangeRequested) -> None:
        try:
            self.control.request(message.change, "operator")
        except SpecError as exc:
            self.notify(exc.message, severity="error", title="change refused")
            return
        except FlowdeckError as exc:
            self.notify(str(exc), severity="error", title="change refused")
            return
        self.dashboard.show_settings(self.control.settings, self.control.pending)
        self.show_schedule_state()

    def show_schedule_state(self) -> None:
        """The header says when an operator's change holds the schedule, and how to go on."""
        if self.finished:
            return
        if self.dashboard.note not in ("", SCHEDULE_HELD):
            return  # "stopping…" says more
        note = SCHEDULE_HELD if self.control.schedule_held else ""
        if note != self.dashboard.note:
            self.dashboard.note = note
            self.dashboard.show(self.history, self.control.settings, self.control.pending)
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``S`` is offered (and in the footer) only while the schedule is held."""
        if action == "resume_schedule":
            return not self.finished and self.control.schedule_held
        return True

    def action_resume_schedule(self) -> None:
        try:
            self.control.resume_schedule()
        except FlowdeckError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.show_schedule_state()

    def request(self, change: Change) -> None:
        if self.finished:
            self.notify("the run has ended; nothing to steer", severity="warning")
            return
        self.post_message(ChangeRequested(change))

    def action_step(self, setting: str, direction: int) -> None:
        chosen = Setting(setting)
        try:
            change = step_change(self.control.requested_settings, chosen, direction)
        except SpecError as exc:
            self.notify(exc.message, severity="warning", title=LABELS[chosen])
            return
        self.request(change)

    def action_exact_change(self, initial: str = "") -> None:
        def chosen(change: Change | None) -> None:
            if change is not None:
                self.request(change)

        self.app.push_screen(
            ChangePrompt(
                "Change (inflight=200, prefetch=60, publishers=+5, pause):",
                initial,
                history=getattr(self.app, "change_history", None),
            ),
            chosen,
        )

    def action_pause_resume(self) -> None:
        paused = self.control.settings.paused
        self.request(Change(Setting.RESUME if paused else Setting.PAUSE))

    def action_mark_phase(self) -> None:
        def chosen(change: Change | None) -> None:
            if change is not None:
                self.request(change)

        self.app.push_screen(ChangePrompt("Label of the new phase:", mark=True), chosen)

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
        try:
            if Autopilot.can_steer(self.control):
                self.autopilot = Autopilot(self.control, "inflight")
                self.autopilot.attach()
            else:
                raise FlowdeckError("the autopilot steers runs this cockpit started")
        except FlowdeckError as exc:
            self.notify(str(exc), severity="error", title="autopilot refused")
            return
        self.notify("autopilot: searching the in-flight limit (o stops it)")

    def action_stop_run(self) -> None:
        if self.finished:
            self.app.pop_screen()
            return

        def answered(stop: bool | None) -> None:
            if stop:
                self.dashboard.note = "stopping…"
                self.stop_control()

        self.app.push_screen(ConfirmStop(), answered)

    @work(exclusive=True, group="stop")
    async def stop_control(self) -> None:
        summary = await self.control.stop("stopped by operator")
        self.post_message(RunFinished(summary))

    def action_toggle_basis(self) -> None:
        chart = self.query_one(LatencyChart)
        chart.basis = SendBasis.INTENDED if chart.basis is SendBasis.ACTUAL else SendBasis.ACTUAL

    def action_show_tab(self, tab: str) -> None:
        show_tab(self, self.history, tab)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(rows_for(self)))

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
        from flowdeck.tui.screens.sessions import SessionsScreen

        self.app.push_screen(SessionsScreen(session.parent, report_on=[session]))

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

        prompt = NodeFaultPrompt(
            nodes, names, partitionable=local.can_partition, cut=local.cut_off()
        )
        self.app.push_screen(prompt, answered)

    def action_leave(self) -> None:
        if self.finished:
            self.app.pop_screen()
        else:
            self.notify("the run is going; press s to stop it first", severity="warning")


class _ScreenSink(NullSink):
    """The cockpit as a sink of the run: each update becomes a message to the live screen,
    handled on the app's loop (the controller calls a sink on its loop; it never blocks)."""

    def __init__(self, screen: LiveScreen) -> None:
        self.screen = screen

    def on_tick(self, tick: Tick) -> None:
        self.screen.post_message(TickReceived(tick))

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self.screen.post_message(BrokerSampleReceived(sample))

    def on_event(self, event: RunEvent) -> None:
        self.screen.post_message(EventReceived(event))

    def on_finish(self, summary: RunSummary) -> None:
        self.screen.post_message(RunFinished(summary))
