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
from flowdeck.engine import FlowdeckError, LatencyKind, RunSummary, SendBasis
from flowdeck.tui.keys import KeyRow, bindings
from flowdeck.tui.messages import ChangeRequested
from flowdeck.tui.model import RunHistory, setting_verdicts
from flowdeck.tui.run_screen import RunScreen
from flowdeck.tui.source import RunControl
from flowdeck.tui.spec_text import what_it_runs
from flowdeck.tui.tour import (
    CONSUME,
    DEPTH,
    OVERLOAD,
    P99,
    PENDING,
    PUBLISH,
    Observation,
    Seen,
    StepFigures,
    Tour,
    TourStep,
    changes_to,
    observe,
    overload_rate,
    probe_observation,
)
from flowdeck.tui.widgets.dashboard import Dashboard
from flowdeck.tui.widgets.figure_strip import Figure, figures
from flowdeck.tui.widgets.footer import FittingFooter

#: How long a watcher waits for the presenter's run to start (a private node can take 40 s).
PRESENTER_WAIT = 120.0
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

#: What a watcher's screen does not offer: the presenter steers the tour.
STEERING_ACTIONS = ("next_step", "previous_step", "stop_run", "exact_change")
#: The big figures the probe points at.
PROBE_WATCH = (PUBLISH, CONSUME, P99)

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


def step_header(
    tour: Tour,
    index: int,
    elapsed: float | None,
    in_step: float | None,
    *,
    probing: bool = False,
    watching: bool = False,
) -> Table:
    """The top line: which step of how many (or the probe), its title, the run's and the
    step's clocks; a watcher's says whose tour it follows."""
    table = Table.grid(expand=True)
    table.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    table.add_column(justify="right", no_wrap=True)
    left = Text()
    if probing:
        left.append(" MEASURING ", style="bold reverse")
        left.append(" what this broker can take", style="bold")
    else:
        left.append(f" STEP {index + 1}/{len(tour.steps)} ", style="bold reverse")
        left.append(f" {tour.step(index).title}", style="bold")
    if elapsed is None:
        right = "starting the run…"
    else:
        right = f"run {_clock(elapsed)}"
        if in_step is not None and not probing:
            right += f" · step {_clock(in_step)}"
    if watching:
        right = f"watching the presenter's tour · {right}"
    table.add_row(left, right)
    return table


#: How an observation begins, by what it found (readable without colour).
SEEN_MARKS = {
    Seen.WATCHING: ("◌ ", "dim"),
    Seen.AS_TOLD: ("✓ on screen: ", "bold"),
    Seen.OTHERWISE: ("✗ not as the story says. On screen: ", "bold"),
}


def caption_text(tour: Tour, index: int, observation: Observation | None = None) -> Text:
    """The step's caption, then what to look at and what the figures on screen show; when
    they do not show what the story says (``Seen.OTHERWISE``), what they show instead of
    what to look for."""
    step = tour.step(index)
    text = Text(step.caption)
    text.append("\n")
    if observation is None or observation.seen is not Seen.OTHERWISE:
        text.append("▶ look at: ", style="bold")
        text.append(step.look_at, style="bold")
    if observation is not None:
        mark, style = SEEN_MARKS[observation.seen]
        if observation.seen is not Seen.OTHERWISE:
            text.append("\n")
        text.append(mark, style=style)
        text.append(observation.text, style="" if observation.seen is Seen.AS_TOLD else style)
    return text


def probe_caption(tour: Tour, observation: Observation) -> Text:
    """While the probe runs: what it does and why, and how far it is."""
    probe = tour.probe
    seconds = 0 if probe is None else probe.seconds
    window = 0 if probe is None else probe.inflight
    text = Text(
        f"Before the story, this broker is measured: {seconds} s of publishing as fast as it "
        f"confirms (no rate limit, {window} messages in flight per publisher). Step 1's load "
        "is then set above what it takes, so the story's overload is real on this machine."
    )
    text.append("\n")
    mark, style = SEEN_MARKS[observation.seen]
    text.append(mark, style=style)
    text.append(observation.text, style=style)
    return text


def step_figures(history: RunHistory, step: TourStep | None) -> StepFigures | None:
    """What the screen shows of ``step`` (None: the probe): the big figures (the last
    second's msg/s, e2e p99 and pending confirms, the queue depth and its arrow's
    direction) and the step's phase as the run's figures judge it, once the phase in force
    is the step's (its settings are the step's)."""
    tick = history.last_tick
    if tick is None:
        return None
    rows = [row for row in setting_verdicts(history).rows if not row.drain]
    row = rows[-1] if rows else None
    if row is not None:
        ours = row.settings.rate == 0 if step is None else not changes_to(step, row.settings)
        row = row if ours else None
    e2e = tick.latency.get((LatencyKind.END_TO_END, SendBasis.ACTUAL))
    sample = history.sample
    slope, trend = history.depth_direction()
    return StepFigures(
        seconds=0 if row is None else row.seconds,
        verdict=None if row is None else row.verdict,
        reason="" if row is None else row.reason,
        publish=tick.publish_rate,
        consume=tick.consume_rate,
        p99_ms=e2e.p99 if e2e is not None and e2e.count > 0 else None,
        pending=float(tick.pending_confirms),
        depth=None if sample is None or not sample.queues else float(sample.queue_depth),
        depth_slope=slope,
        depth_trend=trend,
        target=tick.target_rate,
    )


def probed_capacity(history: RunHistory) -> tuple[float, int] | None:
    """What the probe measured: the consume rate of the run's first phase (at the probe's
    settings) once it settled (``SettingRow.steady_consume``: the median of its seconds
    after the first few), and its seconds; None before it has any."""
    if history.last_tick is None:
        return None
    rows = setting_verdicts(history).rows
    if not rows or rows[0].settings.rate != 0:
        return None
    first = rows[0]
    return (first.steady_consume or first.consume), first.seconds


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

    def __init__(
        self, control: RunControl, tour: Tour, *, start: bool = True, watching: bool = False
    ) -> None:
        super().__init__(control, start=start)
        self.tour = tour
        self.index = 0
        #: The run's elapsed time when the step on screen was put in force (None: at start).
        self.step_started: float | None = None
        #: Following a tour another process presents (a second browser tab): the step is
        #: read off the run's settings, and nothing here steers.
        self.watching = watching
        #: Measuring the broker before step 1 (the tour's probe), until it has.
        self.probing = tour.probe is not None
        #: What the screen showed when each step was left: the next captions compare with it.
        self.left_with: dict[int, StepFigures] = {}
        #: What the figures on screen show against the step's caption (None: no figures yet).
        self.observation: Observation | None = None
        self._caption_key: tuple[object, ...] = ()
        self._published = False
        #: A watcher has seen a step of the presenter's change (else it joined mid-step).
        self._followed = False

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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A watcher's screen steers nothing: the presenter's keys are not offered."""
        if self.watching and action in STEERING_ACTIONS:
            return False
        return super().check_action(action, parameters)

    # -- the tour ------------------------------------------------------------------------

    def action_next_step(self) -> None:
        if self.probing:
            self.notify_probing()
            return
        self.go_to(self.index + 1)

    def action_previous_step(self) -> None:
        if self.probing:
            self.notify_probing()
            return
        self.go_to(self.index - 1)

    def notify_probing(self) -> None:
        probe = self.tour.probe
        measured = probed_capacity(self.history)
        left = (probe.seconds if probe else 0) - (measured[1] if measured else 0)
        self.notify(
            f"measuring this broker first: step 1 starts by itself in about {max(left, 1)} s"
        )

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
        self.enter_step(target, tick.elapsed)

    def enter_step(self, target: int, elapsed: float, *, record: bool = True) -> None:
        """Put step ``target``'s settings in force and show it (``record``: keep what the
        screen showed of the step being left, for the next caption to compare with)."""
        if record:
            left = step_figures(self.history, self.tour.step(self.index))
            if left is not None:
                self.left_with[self.index] = left
        self.index = target
        self.step_started = elapsed
        # Asked at once, not posted: a second key press right after computes its changes
        # from the settings this one asked for.
        for change in changes_to(self.tour.step(target), self.control.requested_settings):
            self.change_requested(ChangeRequested(change))
        self.show_step()

    def finish_probe(self, capacity: float, elapsed: float) -> None:
        """The probe has measured ``capacity`` msg/s consumed: the story's load is set above
        it and step 1 begins."""
        spec = self.control.spec
        rate = overload_rate(capacity, spec.publishers, self.tour.rate)
        self.tour = self.tour.at_rate(rate, capacity or None)
        self.probing = False
        self.left_with.clear()
        if capacity > 0:
            self.notify(
                f"this broker took {capacity:,.0f} msg/s: step 1 offers {OVERLOAD:g}× that, "
                f"{spec.publishers} publishers × {rate:,.0f} msg/s",
                timeout=8,
            )
        else:
            self.notify(
                f"the probe saw nothing consumed: step 1 runs the preset's {rate:,.0f} msg/s "
                "per publisher",
                severity="warning",
                timeout=8,
            )
        self.enter_step(0, elapsed, record=False)

    def follow_presenter(self) -> None:
        """A watcher's screen: the step is the one whose settings are in force."""
        settings = self.control.settings
        tick = self.history.last_tick
        elapsed = 0.0 if tick is None else tick.elapsed
        if self.tour.probing(settings):
            self.probing = True
            return
        if self.probing or settings.rate != self.tour.rate:
            measured = probed_capacity(self.history)
            capacity = measured[0] if measured else self.tour.capacity
            self.tour = self.tour.at_rate(settings.rate, capacity)
            self.probing = False
        index = self.tour.step_of(settings)
        if index is not None and (index != self.index or not self._followed):
            left = step_figures(self.history, self.tour.step(self.index))
            if left is not None and self._followed:
                self.left_with[self.index] = left
            # The first step seen may have begun before this screen joined.
            self.step_started = elapsed if self._followed else None
            self._followed = True
            self.index = index
            self.show_step()

    def show_step(self) -> None:
        self.observe()
        self.show_caption()
        self.show_figures()

    def observe(self) -> None:
        """Check the caption against the figures on screen; at the probe's end, start
        step 1."""
        if self.probing:
            now = step_figures(self.history, None)
            probe = self.tour.probe
            measured = probed_capacity(self.history)
            if now is not None and measured is not None:
                now = replace(now, seconds=measured[1])
            if probe is not None:
                self.observation = probe_observation(probe, now)
            tick = self.history.last_tick
            if (
                not self.watching
                and probe is not None
                and measured is not None
                and tick is not None
                and measured[1] >= probe.seconds
            ):
                self.finish_probe(measured[0], tick.elapsed)
            return
        if self.history.draining:
            self.observation = Observation(
                Seen.WATCHING,
                "publishing has stopped: the run ends once consumers have taken what is left",
            )
            return
        step = self.tour.step(self.index)
        before = self.left_with.get(self.index - 1)
        self.observation = observe(
            step, step_figures(self.history, step), before, self.tour.capacity
        )

    def show_caption(self) -> None:
        observation = self.observation
        key = (self.probing, self.index, self.tour.rate, observation)
        if key == self._caption_key:
            return
        self._caption_key = key
        if self.probing:
            text = probe_caption(
                self.tour, observation or Observation(Seen.WATCHING, "waiting for figures")
            )
        else:
            text = caption_text(self.tour, self.index, observation)
        self.query_one("#caption", Static).update(text)

    def show_figures(self) -> None:
        tick = self.history.last_tick
        elapsed = None if tick is None else tick.elapsed
        in_step = None
        # A watcher that joined mid-step does not know when the step began.
        if elapsed is not None and not (self.watching and self.step_started is None):
            in_step = elapsed - (self.step_started or 0.0)
        self.query_one("#tour-header", Static).update(
            step_header(
                self.tour,
                self.index,
                elapsed,
                in_step,
                probing=self.probing,
                watching=self.watching,
            )
        )
        watch = PROBE_WATCH if self.probing else self.tour.step(self.index).watch
        self.query_one(BigFigures).show(self.history, watch)

    def redraw(self) -> None:
        super().redraw()
        if self.watching:
            self.follow_presenter()
        else:
            self.publish_run()
        self.observe()
        self.show_caption()
        self.show_figures()

    def publish_run(self) -> None:
        """Presenting a shared tour (``flowdeck serve --demo``): name the run for the other
        tabs, once it has started (its session directory holds its control endpoint)."""
        share = getattr(self.app, "tour_share", None)
        session = self.control.session_dir
        if share is None or not share.presenting or session is None or self._published:
            return
        share.publish(session)
        self._published = True

    def show_summary(self, summary: RunSummary) -> None:
        if not self.watching:
            super().show_summary(summary)
            return
        # A watcher has no cockpit to go back to: it keeps the tour's last figures.
        self.dashboard.note = "THE TOUR HAS ENDED (Escape closes)"
        self.dashboard.show(self.history, self.control.settings, ())

    def action_leave(self) -> None:
        if self.watching:
            self.app.exit()  # the tour goes on in the presenter's process
            return
        super().action_leave()


class TourIntroScreen(Screen[None]):
    """What the tour will run, told while the broker comes up; space starts the run (at once
    when the broker is ready, else as soon as it is). A watcher's (``flowdeck serve --demo``,
    a second tab) waits for the presenter's run instead and follows it as soon as it goes;
    if the presenter's tab closes first, it takes the presenter's part."""

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

    def __init__(self, tour: Tour, *, watching: bool = False) -> None:
        super().__init__()
        self.tour = tour
        #: Waiting for the tour another process presents, to follow it.
        self.watching = watching
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
        if self.watching:
            return (
                "… this tour is being presented in another browser tab: waiting for its run "
                f"to start, to follow it here ({waited:.0f} s)"
            )
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

        if self.watching and self.await_presenter():
            return
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

    def await_presenter(self) -> bool:
        """(In the worker's thread.) Wait for the presenter's run and follow it (True); when
        the presenter's process is gone before its run started, take its part (False: this
        process prepares the tour itself)."""
        from flowdeck.engine import RemoteRun, endpoint_for

        share = getattr(self.app, "tour_share", None)
        began = time.monotonic()
        while share is not None and time.monotonic() - began < PRESENTER_WAIT:
            if self.left:
                return True
            session = share.presented_run()
            if session is not None:
                try:
                    remote = RemoteRun.connect(endpoint_for(str(session)))
                except FlowdeckError:
                    time.sleep(0.5)  # its endpoint is not written yet
                    continue
                self.app.call_from_thread(self.ready, remote)
                return True
            if share.presenter_gone() and share.present():
                self.app.call_from_thread(self.take_over)
                return False
            time.sleep(0.5)
        self.app.call_from_thread(
            self.failed, f"no tour started in the other tab within {PRESENTER_WAIT:.0f} s"
        )
        return True

    def take_over(self) -> None:
        self.watching = False
        self.show_status()

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
        if self.start_asked or self.watching:
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
        self.app.switch_screen(DemoScreen(self.control, self.tour, watching=self.watching))

    def action_leave(self) -> None:
        self.left = True
        if self.watching:
            self.app.exit()  # a watcher has no cockpit to go back to
            return
        self.app.pop_screen()
