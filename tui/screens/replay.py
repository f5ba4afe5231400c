"""Replaying a recorded session through the same dashboard panels as a live run."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.timer import Timer

from flowdeck.engine import SendBasis
from flowdeck.tui.keys import HELP_BINDING
from flowdeck.tui.layout import fit_layout, narrow_css, show_tab, toggle_side
from flowdeck.tui.model import RunHistory
from flowdeck.tui.navigation import Route, open_screen
from flowdeck.tui.replay import Replay, apply_frame
from flowdeck.tui.widgets.dashboard import Dashboard
from flowdeck.tui.widgets.event_log import EventLog
from flowdeck.tui.widgets.footer import FittingFooter
from flowdeck.tui.widgets.latency_chart import LatencyChart
from flowdeck.tui.widgets.run_header import RunHeader

SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0)


class ReplayScreen(Screen[None]):
    """Plays one recorded second per tick (faster with ``+``); seek with the arrows."""

    BINDINGS: ClassVar[list[BindingType]] = [
        HELP_BINDING,
        # Priority: the focused tabs and tables would take these keys for themselves.
        Binding("space", "play_pause", "play", key_display="space", priority=True),
        Binding("escape", "app.pop_screen", "back"),
        Binding("left", "seek(-10)", "-10 s", priority=True),
        Binding("right", "seek(10)", "+10 s", priority=True),
        Binding("home", "seek_to(0)", "start", show=False, priority=True),
        Binding("end", "seek_to(-1)", "end", show=False, priority=True),
        Binding("plus,equals_sign", "speed(1)", "faster", key_display="+"),
        Binding("minus", "speed(-1)", "slower", key_display="-", show=False),
        Binding("l", "toggle_basis", "latency", tooltip="latency from actual / intended send"),
        Binding("v", "toggle_view", "view", tooltip="charts / broker and events (narrow)"),
        Binding("e", "show_tab('events')", "events", show=False),
        Binding("q", "show_tab('queues')", "queues", show=False),
        Binding("t", "show_tab('verdicts')", "per setting", show=False),
        Binding(
            "T",
            "per_setting",
            "per setting, full screen",
            show=False,
            tooltip="the per-setting table full screen, with every verdict's reason and the "
            "recommendation's reasoning",
        ),
        Binding("h", "show_tab('hosts')", "hosts", show=False),
    ]
    DEFAULT_CSS = narrow_css("ReplayScreen")

    def __init__(self, replay: Replay, *, autoplay: bool = True) -> None:
        super().__init__()
        self.replay = replay
        self.position = -1
        self.history = RunHistory()
        self.playing = autoplay
        self.speed_index = 0
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Dashboard(f"replay of {self.replay.name}", id="dashboard")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.seek_to(0)
        self._timer = self.set_interval(1.0 / SPEEDS[self.speed_index], self.advance)

    def on_resize(self, event: Resize) -> None:
        fit_layout(self, event.size.width, self.history)

    def action_toggle_view(self) -> None:
        """On a narrow terminal: the charts, or the broker panel and event log."""
        if self.has_class("-narrow"):
            toggle_side(self, self.history)

    @property
    def last_position(self) -> int:
        return len(self.replay.frames) - 1

    def advance(self) -> None:
        if not self.playing or self.position >= self.last_position:
            if self.position >= self.last_position:
                self.playing = False
            self.show()
            return
        self.position += 1
        frame = self.replay.frames[self.position]
        apply_frame(self.history, frame)
        log = self.query_one(EventLog)
        for event in frame.events:
            log.add(event)
        self.show()

    def seek_to(self, position: int) -> None:
        if not self.replay.frames:
            self.position = -1
            self.show()
            return
        if position < 0:
            position = self.last_position
        self.position = min(max(position, 0), self.last_position)
        self.history = self.replay.history_at(self.position)
        self.query_one(EventLog).replace_all(self.history.events)
        self.show()

    def show(self) -> None:
        dashboard = self.query_one(Dashboard)
        state = "playing" if self.playing else "paused"
        speed = SPEEDS[self.speed_index]
        # One clock, the header's: where the replay is in the recording, of its length.
        self.query_one(RunHeader).replay_clock = (
            self.replay.elapsed_at(self.position),
            self.replay.length,
        )
        dashboard.note = f"REPLAY {state} x{speed:g}"
        tick = self.history.last_tick
        dashboard.show(self.history, tick.settings if tick else None, ())

    def action_play_pause(self) -> None:
        if not self.playing and self.position >= self.last_position:
            self.seek_to(0)
        self.playing = not self.playing
        self.show()

    def action_seek(self, seconds: int) -> None:
        self.seek_to(max(0, self.position + seconds))

    def action_seek_to(self, position: int) -> None:
        self.seek_to(position)

    def action_speed(self, step: int) -> None:
        self.speed_index = min(max(self.speed_index + step, 0), len(SPEEDS) - 1)
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(1.0 / SPEEDS[self.speed_index], self.advance)
        self.show()

    def action_toggle_basis(self) -> None:
        chart = self.query_one(LatencyChart)
        chart.basis = SendBasis.INTENDED if chart.basis is SendBasis.ACTUAL else SendBasis.ACTUAL

    def action_per_setting(self) -> None:
        open_screen(self, Route.PER_SETTING, lambda: self.history, f"replay of {self.replay.name}")

    def action_show_tab(self, tab: str) -> None:
        show_tab(self, self.history, tab)
