"""What every screen showing a running run shares: the plumbing from the run to the
screen, the run's end, and the steering every such screen offers.

The live dashboard (``screens/live.py``) and the demo's tour (``screens/demo.py``) are both
a :class:`RunScreen`: the same run plumbing, steering and summary, each with its own panels
and keys. This module is theirs, so neither screen imports the other.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.screen import Screen

from flowdeck.collectors import BrokerSample
from flowdeck.engine import (
    Change,
    EventKind,
    FlowdeckError,
    NullSink,
    RunEvent,
    RunSummary,
    SendBasis,
    SpecError,
    Tick,
)
from flowdeck.tui.keys import KeyRow, rows_for
from flowdeck.tui.long_lived import freeze_long_lived
from flowdeck.tui.messages import (
    BrokerSampleReceived,
    ChangeRequested,
    EventReceived,
    RunFailed,
    RunFinished,
    TickReceived,
)
from flowdeck.tui.model import RunHistory
from flowdeck.tui.navigation import Route, open_screen, switch_to
from flowdeck.tui.source import RunControl
from flowdeck.tui.widgets.dashboard import Dashboard
from flowdeck.tui.widgets.latency_chart import LatencyChart
from flowdeck.tui.widgets.node_strip import NodeStrip

#: The header's note while an operator's change holds the schedule.
SCHEDULE_HELD = "SCHEDULE PAUSED (S resumes)"


class RunScreen(Screen[None]):
    """A run as it goes, on a screen that composes a :class:`Dashboard`. Every steering key
    posts a ChangeRequested; the controller resolves it, the settings bar shows it pending
    until the workers report it in force. When the run ends the summary replaces it.
    """

    #: The keys its help lists (the screen's own key table).
    HELP_ROWS: ClassVar[tuple[KeyRow, ...]] = ()

    def __init__(self, control: RunControl, *, start: bool = True) -> None:
        super().__init__()
        self.control = control
        self.history = RunHistory()
        self.finished = False
        self._start = start
        self._redraw_due = False

    def on_mount(self) -> None:
        self.control.add_sink(_ScreenSink(self))
        self.dashboard.show_settings(self.control.settings, self.control.pending)
        if self._start:
            self.run_control()

    @property
    def dashboard(self) -> Dashboard:
        return self.query_one(Dashboard)

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
        self.show_summary(message.summary)

    def show_summary(self, summary: RunSummary) -> None:
        """The run has ended: its summary takes this screen's place."""
        self.history.run_ended(summary.ended, summary.to_json())
        hosts = self.history.hosts
        rows = hosts.run_rows() if hosts.shown else []
        # The summary takes this screen's place; a view opened over it (the per-setting
        # table full screen, help) goes first: the summary shows the same figures, final.
        while self.app.screen is not self and self in self.app.screen_stack:
            self.app.pop_screen()
        switch_to(self, Route.SUMMARY, summary, hosts=rows, history=self.history)

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

    def action_exact_change(self, initial: str = "") -> None:
        def chosen(change: Change | None) -> None:
            if change is not None:
                self.request(change)

        open_screen(
            self,
            Route.CHANGE_PROMPT,
            "Change (inflight=200, prefetch=60, publishers=+5, pause):",
            initial,
            history=getattr(self.app, "change_history", None),
            callback=chosen,
        )

    def action_stop_run(self) -> None:
        if self.finished:
            self.app.pop_screen()
            return

        def answered(stop: bool | None) -> None:
            if stop:
                self.dashboard.note = "stopping…"
                self.stop_control()

        open_screen(self, Route.CONFIRM_STOP, callback=answered)

    @work(exclusive=True, group="stop")
    async def stop_control(self) -> None:
        summary = await self.control.stop("stopped by operator")
        self.post_message(RunFinished(summary))

    def action_toggle_basis(self) -> None:
        chart = self.query_one(LatencyChart)
        chart.basis = SendBasis.INTENDED if chart.basis is SendBasis.ACTUAL else SendBasis.ACTUAL

    def action_help(self) -> None:
        open_screen(self, Route.HELP, rows_for(self))

    def action_leave(self) -> None:
        if self.finished:
            self.app.pop_screen()
        else:
            self.notify("the run is going; press s to stop it first", severity="warning")


class _ScreenSink(NullSink):
    """The cockpit as a sink of the run: each update becomes a message to the run's
    screen, handled on the app's loop (the controller calls a sink on its loop; it never
    blocks)."""

    def __init__(self, screen: RunScreen) -> None:
        self.screen = screen

    def on_tick(self, tick: Tick) -> None:
        self.screen.post_message(TickReceived(tick))

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self.screen.post_message(BrokerSampleReceived(sample))

    def on_event(self, event: RunEvent) -> None:
        self.screen.post_message(EventReceived(event))

    def on_finish(self, summary: RunSummary) -> None:
        self.screen.post_message(RunFinished(summary))
