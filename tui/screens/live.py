"""The live dashboard: watches a run through its listener and steers it with keys."""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent

from flowdeck.collectors import BrokerSample
from flowdeck.engine import (
    Change,
    EventKind,
    FlowdeckError,
    RunEvent,
    RunSummary,
    SendBasis,
    Setting,
    SpecError,
    Tick,
)
from flowdeck.tui.app import freeze_long_lived
from flowdeck.tui.keys import LABELS, bindings, step_change
from flowdeck.tui.messages import (
    BrokerSampleReceived,
    ChangeRequested,
    EventReceived,
    RunFailed,
    RunFinished,
    TickReceived,
)
from flowdeck.tui.model import RunHistory
from flowdeck.tui.screens.help import HelpScreen
from flowdeck.tui.screens.prompt import ChangePrompt, ConfirmStop
from flowdeck.tui.source import RunControl, RunUpdate
from flowdeck.tui.widgets.dashboard import Dashboard
from flowdeck.tui.widgets.latency_chart import LatencyChart

#: Terminal width from which the dashboard spreads out.
WIDE_COLUMNS = 140


class LiveScreen(Screen[None]):
    """The run as it goes. Every steering key posts a ChangeRequested; the controller
    resolves it, the settings bar shows it pending until the workers report it in force.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings(),
        Binding("escape", "leave", "back", show=False),
    ]

    def __init__(self, control: RunControl, *, start: bool = True) -> None:
        super().__init__()
        self.control = control
        self.history = RunHistory()
        self.finished = False
        self._start = start
        self._redraw_due = False

    def compose(self) -> ComposeResult:
        yield Dashboard(self.control.spec.name, id="dashboard")
        yield Footer()

    def on_mount(self) -> None:
        self.control.add_listener(self.on_run_update)
        self.dashboard.show_settings(self.control.settings, self.control.pending)
        if self._start:
            self.run_control()

    @property
    def dashboard(self) -> Dashboard:
        return self.query_one(Dashboard)

    def on_resize(self, event: Resize) -> None:
        self.dashboard.set_class(event.size.width >= WIDE_COLUMNS, "-wide")

    # -- what the run says ---------------------------------------------------------------

    def on_run_update(self, update: RunUpdate) -> None:
        """The controller's listener: called on the app's loop, never blocks it."""
        if isinstance(update, Tick):
            self.post_message(TickReceived(update))
        elif isinstance(update, BrokerSample):
            self.post_message(BrokerSampleReceived(update))
        elif isinstance(update, RunEvent):
            self.post_message(EventReceived(update))
        elif isinstance(update, RunSummary):
            self.post_message(RunFinished(update))

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
        tick = self.history.last_tick
        if tick is not None:
            self.dashboard.show(self.history, tick.settings, tick.pending)

    @on(BrokerSampleReceived)
    def broker_sample_received(self, message: BrokerSampleReceived) -> None:
        self.history.add_broker(message.sample)
        self.dashboard.show_broker(self.history)

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

        self.app.switch_screen(SummaryScreen(message.summary))

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
            ChangePrompt("Change (inflight=200, prefetch=60, publishers=+5, pause):", initial),
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
        self.query_one(TabbedContent).active = tab

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_leave(self) -> None:
        if self.finished:
            self.app.pop_screen()
        else:
            self.notify("the run is going; press s to stop it first", severity="warning")
