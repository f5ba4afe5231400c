"""Demo mode: the guided tour played on a live run, with figures big enough to project.

The tour's steps are data (``tui.tour``); this module puts them on screen. The intro screen
tells the audience what will run while the broker comes up (a private node takes 5-10 s;
its progress shows), and the demo screen is a run's dashboard (a ``RunScreen``, as the live
screen is: the same run plumbing, steering and summary) with the panels an audience cannot
read at a distance replaced by five big figures, the step's caption and what to look at.
The presenter moves on with space (or → / PageDown, what a presentation clicker sends) and
back with p.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Digits, Label, ProgressBar, Static

from flowdeck.collectors import redact
from flowdeck.engine import FlowdeckError
from flowdeck.tui.keys import KeyRow, bindings
from flowdeck.tui.messages import ChangeRequested
from flowdeck.tui.model import RunHistory
from flowdeck.tui.run_screen import RunScreen
from flowdeck.tui.source import RunControl
from flowdeck.tui.spec_text import what_it_runs
from flowdeck.tui.tour import CONSUME, DEPTH, P99, PENDING, PUBLISH, Tour, changes_to
from flowdeck.tui.widgets.dashboard import Dashboard
from flowdeck.tui.widgets.figure_strip import Figure, figures
from flowdeck.tui.widgets.footer import FittingFooter

#: The big figures, left to right.
BIG_FIGURES = (PUBLISH, CONSUME, P99, PENDING, DEPTH)
#: Below this height only the throughput chart is shown under the caption.
TALL_ROWS = 40
#: Width from which the big figures take their long names.
WIDE_COLUMNS = 120

#: The demo screen's keys: one table drives the bindings, the footer and the help.
DEMO_KEYS: tuple[KeyRow, ...] = (
    KeyRow(
        "space,n,right,pagedown",
        "next_step",
        "next step of the tour (→ and PageDown too: what a presenter's clicker sends)",
        "Tour",
        1,
        "next",
    ),
    KeyRow(
        "p,left,pageup,backspace",
        "previous_step",
        "previous step, its settings back in force (← and PageUp too)",
        "Tour",
        2,
        "back",
    ),
    KeyRow("question_mark", "help", "this help (F1 too)", "View", 3, "help"),
    KeyRow("s", "stop_run", "stop the run (asks first)", "Run", 4, "stop"),
    KeyRow("l", "toggle_basis", "latency from actual / intended send time", "View", 5, "latency"),
    KeyRow("equals_sign", "exact_change", "type an exact change (inflight=200)", "Steer"),
    KeyRow("escape", "leave", "back to the cockpit once the run has ended", "Run"),
)

#: How the presenter's keys read in the footer.
KEY_DISPLAY = {"next_step": "space", "previous_step": "p"}


#: The intro's keys: start the tour (the presenter's "next"), or go to the cockpit.
INTRO_KEYS: tuple[KeyRow, ...] = (
    KeyRow("space,n,right,pagedown", "next_step", "start the tour", "Tour", 1, "start"),
    KeyRow("escape", "leave", "to the cockpit's launch screen", "Tour", 2, "cockpit"),
)


def _demo_bindings(rows: tuple[KeyRow, ...]) -> list[BindingType]:
    shown: list[BindingType] = []
    for binding in bindings(rows):
        display = KEY_DISPLAY.get(binding.action)
        shown.append(binding if display is None else replace(binding, key_display=display))
    return shown


def big_value(figure: Figure) -> tuple[str, str]:
    """A figure as the big digits show it and the unit its label carries: ``4012/s`` is
    ``4012`` msg/s, ``2.4k ms`` is ``2.4`` s. Digits draws only digits and a few signs
    large (a letter sits small on the bottom row), so units go to the label."""
    value = figure.value.replace("–", "-")
    unit = ""
    if value.endswith("/s"):
        value, unit = value.removesuffix("/s"), "msg/s"
    elif value.endswith(" ms"):
        value, unit = value.removesuffix(" ms"), "ms"
        if value.endswith("k"):
            value, unit = value.removesuffix("k"), "s"
    return value.replace(" ", ""), unit


def figure_label(figure: Figure, unit: str, watched: bool, wide: bool) -> Table:
    """The line over a big figure: what it is and its unit, and at the right how old it is;
    ``▶`` when the step points at it, so it reads without colour."""
    name = figure.name if wide else figure.short
    marker = "▶ " if watched else ""
    table = Table.grid(expand=True)
    table.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    table.add_column(justify="right", no_wrap=True)
    table.add_row(f"{marker}{name} {unit}".rstrip(), Text(figure.age_text(wide), style="dim"))
    return table


def step_header(tour: Tour, index: int, elapsed: float | None, in_step: float | None) -> Table:
    """The top line: which step of how many, its title, the run's and the step's clocks."""
    table = Table.grid(expand=True)
    table.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    table.add_column(justify="right", no_wrap=True)
    left = Text()
    left.append(f" STEP {index + 1}/{len(tour.steps)} ", style="bold reverse")
    left.append(f" {tour.step(index).title}", style="bold")
    if elapsed is None:
        right = "starting the run…"
    else:
        right = f"run {_clock(elapsed)}"
        if in_step is not None:
            right += f" · step {_clock(in_step)}"
    table.add_row(left, right)
    return table


def caption_text(tour: Tour, index: int) -> Text:
    step = tour.step(index)
    text = Text(step.caption)
    text.append("\n")
    text.append("▶ look at: ", style="bold")
    text.append(step.look_at, style="bold")
    return text


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


class BigFigure(Vertical):
    """One figure, three rows high, with its name, unit and age above it."""

    DEFAULT_CSS = """
    BigFigure {
        width: 1fr;
        height: 4;
        padding: 0 1 0 0;
    }
    BigFigure > Label {
        width: 1fr;
        height: 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        color: $text-muted;
    }
    BigFigure.-watch > Label {
        color: $accent;
        text-style: bold;
    }
    BigFigure.-watch > Digits {
        color: $accent;
    }
    """

    def compose(self) -> ComposeResult:
        yield Label("")
        yield Digits("-")

    def show(self, figure: Figure, *, watched: bool, wide: bool) -> None:
        value, unit = big_value(figure)
        self.query_one(Label).update(figure_label(figure, unit, watched, wide))
        self.query_one(Digits).update(value)
        self.set_class(watched, "-watch")


class BigFigures(Horizontal):
    """The figures an audience reads from the back of the room, from the same numbers as
    the dashboard's figure strip."""

    DEFAULT_CSS = """
    BigFigures {
        height: 4;
        padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        for name in BIG_FIGURES:
            yield BigFigure(id=f"big-{name.replace(' ', '-')}")

    def show(self, history: RunHistory, watch: tuple[str, ...]) -> None:
        by_name = {figure.name: figure for figure in figures(history)}
        wide = self.size.width >= WIDE_COLUMNS
        for name, widget in zip(BIG_FIGURES, self.query(BigFigure), strict=True):
            widget.show(by_name[name], watched=name in watch, wide=wide)


class DemoScreen(RunScreen, inherit_bindings=False):
    """The live run, told as the tour's steps: big figures, caption, throughput (and on a
    tall screen latency) chart, the settings in force. Each step's changes go to the run
    as the operator's, so the event log, the phases and the recorded session show them."""

    BINDINGS: ClassVar[list[BindingType]] = _demo_bindings(DEMO_KEYS)
    HELP_ROWS = DEMO_KEYS
    # Nothing here takes typing; the hidden tabs, focused, would eat ← and → (the clicker).
    AUTO_FOCUS = ""
    DEFAULT_CSS = """
    DemoScreen #tour-header {
        height: 1;
        background: $primary-background;
    }
    DemoScreen #caption {
        height: auto;
        padding: 0 1;
        background: $boost;
    }
    DemoScreen Dashboard #run-header,
    DemoScreen Dashboard #figures,
    DemoScreen Dashboard #side {
        display: none;
    }
    DemoScreen.-short Dashboard #latency {
        display: none;
    }
    """

    def __init__(self, control: RunControl, tour: Tour, *, start: bool = True) -> None:
        super().__init__(control, start=start)
        self.tour = tour
        self.index = 0
        #: The run's elapsed time when the step on screen was put in force (None: at start).
        self.step_started: float | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="tour-header")
        yield BigFigures(id="big-figures")
        yield Static(id="caption")
        yield Dashboard(self.control.spec.name, id="dashboard")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.show_step()

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.height < TALL_ROWS, "-short")

    # -- the tour ------------------------------------------------------------------------

    def action_next_step(self) -> None:
        self.go_to(self.index + 1)

    def action_previous_step(self) -> None:
        self.go_to(self.index - 1)

    def go_to(self, index: int) -> None:
        """Show step ``index`` and put its settings in force."""
        if self.finished:
            self.notify("the run has ended: Escape goes back to the cockpit", severity="warning")
            return
        tick = self.history.last_tick
        if tick is None:
            self.notify("the run is starting; the tour goes on once its first figures are in")
            return
        target = self.tour.clamp(index)
        if target == self.index:
            if index > self.index:
                self.notify("that was the last step: s stops the run, = steers it by hand")
            else:
                self.notify("this is the first step")
            return
        self.index = target
        self.step_started = tick.elapsed
        # Asked at once, not posted: a second key press right after computes its changes
        # from the settings this one asked for.
        for change in changes_to(self.tour.step(target), self.control.requested_settings):
            self.change_requested(ChangeRequested(change))
        self.show_step()

    def show_step(self) -> None:
        self.query_one("#caption", Static).update(caption_text(self.tour, self.index))
        self.show_figures()

    def show_figures(self) -> None:
        tick = self.history.last_tick
        elapsed = None if tick is None else tick.elapsed
        in_step = None
        if elapsed is not None:
            in_step = elapsed - (self.step_started or 0.0)
        self.query_one("#tour-header", Static).update(
            step_header(self.tour, self.index, elapsed, in_step)
        )
        self.query_one(BigFigures).show(self.history, self.tour.step(self.index).watch)

    def redraw(self) -> None:
        super().redraw()
        self.show_figures()


class TourIntroScreen(Screen[None]):
    """What the tour will run, told while the broker comes up; space starts the run (at once
    when the broker is ready, else as soon as it is)."""

    DEFAULT_CSS = """
    TourIntroScreen {
        align: center middle;
    }
    TourIntroScreen > Vertical {
        width: 100;
        max-width: 100%;
        height: auto;
        border: thick $primary;
        padding: 0 1;
    }
    TourIntroScreen #tour-title {
        text-style: bold;
        color: $accent;
    }
    TourIntroScreen #intro, TourIntroScreen #runs {
        margin: 1 0 0 0;
    }
    TourIntroScreen #runs {
        color: $text-muted;
    }
    TourIntroScreen ProgressBar {
        margin: 1 0 0 0;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = _demo_bindings(INTRO_KEYS)
    HELP_ROWS = INTRO_KEYS

    def __init__(self, tour: Tour) -> None:
        super().__init__()
        self.tour = tour
        self.control: Any = None
        self.problem = ""
        self.start_asked = False
        self.left = False
        self._began = time.monotonic()
        self._ready_in: float | None = None
        self._timer: Timer | None = None

    @property
    def where(self) -> str:
        uri = self.tour.spec.uri
        return f"the broker at {redact(uri)}" if uri else "a private RabbitMQ node"

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.tour.title, id="tour-title")
            yield Static(self.tour.intro, id="intro")
            yield Static(f"runs: {what_it_runs(self.tour.spec)}", id="runs")
            yield ProgressBar(total=None, show_eta=False, show_percentage=False)
            yield Static("", id="status")
        yield FittingFooter()

    def on_mount(self) -> None:
        self._began = time.monotonic()
        self.show_status()
        self._timer = self.set_interval(0.5, self.show_status)
        self.prepare()

    def status_text(self) -> str:
        waited = time.monotonic() - self._began
        if self.problem:
            return f"✗ {self.problem}"
        if self.control is None:
            what = (
                f"starting {self.where} (usually 5-10 s)"
                if not self.tour.spec.uri
                else f"connecting to {self.where}"
            )
            then = "; the tour starts once it is up" if self.start_asked else ""
            return f"… {what}: {waited:.0f} s{then}"
        return f"✓ {self.where} ready in {self._ready_in or 0:.1f} s: press space to start"

    def show_status(self) -> None:
        self.query_one("#status", Static).update(self.status_text())

    @work(exclusive=True, thread=True, group="tour-broker")
    def prepare(self) -> None:
        from flowdeck.tui.launcher import prepare_run

        try:
            prepared = prepare_run(
                self.tour.spec,
                getattr(self.app, "sessions_root", None),
                provisioner=getattr(self.app, "provisioner", None),
                cleanup=True,
            )
        except FlowdeckError as exc:
            self.app.call_from_thread(self.failed, str(exc))
            return
        self.app.call_from_thread(self.ready, prepared.control)

    def failed(self, problem: str) -> None:
        if self.left:  # Escape was pressed while the broker came up
            return
        self.problem = f"{problem} (give a broker with --uri or FLOWDECK_URI)"
        self.query_one(ProgressBar).display = False
        self.show_status()

    def ready(self, control: Any) -> None:
        if self.left:  # the run was never started: nothing to stop
            return
        self.control = control
        self._ready_in = time.monotonic() - self._began
        self.query_one(ProgressBar).update(total=1, progress=1)
        self.show_status()
        if self.start_asked:
            self.action_next_step()

    def action_next_step(self) -> None:
        """Space: start the run and show the first step."""
        if self.left or self.problem:
            return
        if self.control is None:
            self.start_asked = True
            self.show_status()
            return
        if self._timer is not None:
            self._timer.stop()
        self.left = True
        self.app.switch_screen(DemoScreen(self.control, self.tour))

    def action_leave(self) -> None:
        self.left = True
        self.app.pop_screen()
