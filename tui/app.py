"""The flowdeck cockpit: a thin Textual app that hands each job to a screen."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any, ClassVar

from textual import events, messages
from textual.app import App, ScreenStackError
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.timer import Timer

from flowdeck.engine import RunSpec
from flowdeck.tui import routes
from flowdeck.tui.commands import SteeringCommands
from flowdeck.tui.keys import rows_for
from flowdeck.tui.long_lived import freeze_long_lived
from flowdeck.tui.navigation import Route
from flowdeck.tui.palette import COLORBLIND_THEME, THEMES
from flowdeck.tui.source import RunControl
from flowdeck.tui.tour import Tour
from flowdeck.tui.tour_share import TourShare

#: Longest a typed-ahead key waits for the screen it was typed at to be ready for it
#: (mounted, its focus given, what the key before set off handled), and longest a key
#: handed on may take to be handled, before the next key goes on regardless. Keys wait on
#: that state, not on a timer: a bound this long is only met by a screen that is stuck.
#: With both cores busy a tab at the launch form took 1-3 s to be handled (its queue
#: behind 10-40 repaints); a one-second bound then handed "5" to the field before
#: publishers, and the form kept publishers 2.
KEY_HOLD_LIMIT = 60.0
#: How often held keys look again whether their screen is ready.
KEY_HOLD_POLL = 0.01
#: Nice value added to the cockpit's worker processes. On a machine short of CPU (the
#: seed's benchmark #3 on 2 cores: broker, workers and screen share them) the screen then
#: answers keys first; the load loses only what the screen takes (~20 ms of CPU a second).
#: benchmarks/tui_lag.py, two runs each: key p99 137-166 ms at 0, 60-86 ms at 5, 56-67 ms
#: at 10, with 5.9-9.7k msg/s carried either way (the broker is the bottleneck there).
WORKER_NICENESS = 10
#: Quit says what it waits for when a run takes longer than this to stop.
QUIT_QUIET_WAIT = 0.5
#: Longest quit waits for a run to stop; past it the run is left as a crash leaves it
#: (its session reads back as incomplete).
QUIT_RUN_WAIT = 10.0


#: Messages that only repaint: a key goes to the same place whether they are handled or
#: not. A busy screen has tens of them queued after each focus change (the form restyles
#: the row that has the focus), so a key that waited for them waited seconds.
REPAINTS = (messages.Update, messages.Layout, messages.Prompt)


def _busy(node: MessagePump) -> bool:
    """Whether ``node`` has messages to handle other than repaints."""
    queued: list[Message | None] = list(node._message_queue.values)
    return any(not isinstance(message, REPAINTS) for message in queued)


class FlowdeckApp(App[None]):
    """Opens on the launch screen, or straight on a run's dashboard when given one."""

    CSS_PATH = "app.tcss"
    TITLE = "flowdeck"
    COMMANDS = App.COMMANDS | {SteeringCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "quit", priority=True),
        Binding("question_mark,f1", "help", "help", key_display="?"),
    ]

    def __init__(
        self,
        *,
        control: RunControl | None = None,
        spec: RunSpec | None = None,
        sessions_root: Path | None = None,
        theme: str | None = None,
        open_sessions: bool = False,
        launch: bool = False,
    ) -> None:
        super().__init__()
        # Runs spawn worker processes; multiprocessing's resource tracker hands its child
        # the descriptor of sys.stderr, which Textual replaces by one without a descriptor.
        # Started here, before Textual takes over, the tracker gets the real one.
        resource_tracker.ensure_running()
        freeze_long_lived(collect=True)  # the imported modules
        self.control = control
        self.spec = spec
        self.sessions_root = sessions_root
        self.requested_theme = theme
        self.open_sessions = open_sessions
        self.launch = launch
        from flowdeck.collectors import Provisioner

        #: Owns the private node every launch of this session shares; stopped on quit.
        self.provisioner = Provisioner(name="flowdeck-cockpit")
        from flowdeck.engine import WorkerPool

        #: Worker processes booted while the launch screen is open, so a launch does not
        #: wait for them (a second or more of launch -> first data); ended on quit.
        self.worker_pool = WorkerPool(niceness=WORKER_NICENESS).install()
        #: Whether the launch screen is the app's first (a tour's watcher has none).
        self.opens_launch = True
        #: The launch form is still to open, once the run's screen above is closed.
        self._launch_when_uncovered = False
        #: Changes typed at the change prompt this session, oldest first (its up/down keys).
        self.change_history: list[str] = []
        # Keys typed while a screen opens wait here, in order, until it has the focus.
        self._held_keys: deque[events.Key | events.Paste] = deque()
        #: Keys handed on, not yet back in on_event: id -> when handed on.
        self._released: dict[int, float] = {}
        self._held_since = 0.0  # when the oldest held key began to wait for its screen
        self._key_in_flight: events.Key | events.Paste | None = None
        self._in_flight_since = 0.0
        #: Where the key in flight was handed: the focused widget (or the screen) and up.
        self._in_flight_path: list[MessagePump] = []
        self._release_timer: Timer | None = None

    def get_default_screen(self) -> Screen[Any]:
        return _Uncovered()

    def uncovered(self) -> None:
        """Every screen above the app's first is closed: the launch form opens, if a run's
        screen was opened without it underneath."""
        if self._launch_when_uncovered and len(self.screen_stack) == 1:
            self._launch_when_uncovered = False
            self.push_screen(self.screen_class(Route.LAUNCH)(self.spec))

    def screen_class(self, route: Route) -> type[Screen[Any]]:
        """The screen class a route names (``tui.navigation``: screens open one another by
        name, and this app is the one place that knows them all)."""
        return routes.screen_class(route)

    def on_mount(self) -> None:
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = self.requested_theme or COLORBLIND_THEME.name
        if not self.opens_launch:
            return
        self.call_after_refresh(freeze_long_lived)  # the screens' widgets
        if self.control is not None:
            # A run to steer (``flowdeck attach``): its screen alone. The launch form, the
            # heaviest screen, opens when that screen is closed (see _Uncovered), rather
            # than being built underneath first: 2 s of the event loop before the run showed.
            self._launch_when_uncovered = True
            self.push_screen(self.screen_class(Route.LIVE)(self.control))
            return
        launch_screen = self.screen_class(Route.LAUNCH)(self.spec)
        self.push_screen(launch_screen)
        if self.open_sessions:
            self.push_screen(self.screen_class(Route.SESSIONS)())
        elif self.launch:
            self.call_after_refresh(launch_screen.action_launch)

    # -- typed-ahead keys ------------------------------------------------------------------
    #
    # Textual hands a key to the focused widget through its message queue, and checks the
    # screen's bindings only once the key has bubbled back up to the app; the next key is
    # handed on meanwhile. So in "=inflight=1" typed in one burst, "=" opened the prompt
    # after "inflight=1" had gone to the dashboard: the prompt got nothing. Here a key waits
    # until the one before it has been handled all the way (and whatever screen it opened
    # has focused its input) before it is handed on, so keys land where the screen they
    # were typed at would have put them, in order.

    def ready_for_keys(self) -> bool:
        """Whether the screen on top can take a key now: it is mounted, has given the
        focus to its input (or has nothing to focus), and what the last key set off has
        been handled (Enter in a prompt submits, and the prompt closes, through messages:
        a key handed on before would go to the closing prompt)."""
        try:
            screen = self.screen
        except ScreenStackError:  # quitting: no screen left to take keys
            return False
        if not screen.is_mounted:
            return False
        focused = screen.focused
        if focused is None:
            # Textual gives the focus when the screen resumes, and a screen may give it
            # from a callback: the key waits for those, not for a set time.
            return not screen.focus_chain or not _busy(screen)
        # What a key sets off travels from the focused widget up to its screen.
        path = [node for node in focused.ancestors_with_self if node is not self]
        return not any(_busy(node) for node in path)

    async def on_event(self, event: events.Event) -> None:
        if not isinstance(event, events.Key | events.Paste):
            await super().on_event(event)
            return
        if not self._screen_stack:
            return  # quitting: no screen left to take it
        if event.is_forwarded:  # back from the widgets: the bindings are checked now
            await super().on_event(event)
            if event is self._key_in_flight:
                self._key_landed()
            return
        released = self._released.pop(id(event), None) is not None
        if not released and (
            self._key_in_flight is not None or self._held_keys or not self.ready_for_keys()
        ):
            if not self._held_keys:
                self._held_since = time.monotonic()
            self._held_keys.append(event)
            self._arm_release()
            return
        self._key_in_flight = event
        self._in_flight_since = time.monotonic()
        target = self.focused or self.screen
        self._in_flight_path = [node for node in target.ancestors_with_self if node is not self]
        await super().on_event(event)
        if not event.is_forwarded:  # a priority binding took it at once
            self._key_landed()
        else:
            self._arm_release()

    def _key_landed(self) -> None:
        self._key_in_flight = None
        self._in_flight_path = []
        self._release_held_key()

    def _arm_release(self) -> None:
        if self._release_timer is None:
            self._release_timer = self.set_timer(KEY_HOLD_POLL, self._on_release_timer)

    def _on_release_timer(self) -> None:
        self._release_timer = None
        in_flight = self._key_in_flight
        if in_flight is not None:
            waited = time.monotonic() - self._in_flight_since
            if not self._key_handled(in_flight) and waited < KEY_HOLD_LIMIT:
                self._arm_release()
                return
            self._key_in_flight = None
            self._in_flight_path = []
            self._held_since = time.monotonic()  # the next key's wait for its screen
        self._release_held_key()

    def _key_handled(self, key: events.Key | events.Paste) -> bool:
        """Whether the key in flight is done with though it never came back to the app: a
        widget used it (and stopped it), or the widgets it was handed to are gone. Either
        way it is in no message queue any more; while it is in one (a tab behind the
        repaints at a busy screen), the next key would go where the focus is before the
        tab moved it."""
        queued = (self, *self._in_flight_path)
        if any(key in node._message_queue.values for node in queued):
            return False
        gone = not all(node.is_running and node.is_attached for node in self._in_flight_path)
        return key._stop_propagation or gone

    def _release_held_key(self) -> None:
        """Hand the oldest held key on once its screen is ready (or it waited too long)."""
        if not self._held_keys or self._key_in_flight is not None:
            return
        if self._released:
            # The key handed on last is on its way back; one that never comes back (its
            # message dropped) would hold the rest for good, so it is given up on after
            # the bound a stuck screen gets.
            if time.monotonic() - min(self._released.values()) < KEY_HOLD_LIMIT:
                self._arm_release()
                return
            self._released.clear()
        if not self.ready_for_keys() and time.monotonic() - self._held_since < KEY_HOLD_LIMIT:
            self._arm_release()
            return
        event = self._held_keys.popleft()
        self._held_since = self._released[id(event)] = time.monotonic()
        if not self.post_message(event):  # closing: it will not come back
            self._released.pop(id(event), None)

    def action_help(self) -> None:
        """``?`` (or F1) on any screen: the keys of the screen on top."""
        help_screen = self.screen_class(Route.HELP)
        if isinstance(self.screen, help_screen):
            self.screen.dismiss(None)
            return
        self.push_screen(help_screen(rows_for(self.screen)))

    async def action_quit(self) -> None:
        """Quit within a second or two, saying what it waits for. The private node is
        throwaway (its data directory goes with it), so it is killed, not shut down: a
        graceful stop took 12-14 s with the screen frozen and nothing said."""
        self.worker_pool.close()
        await self._stop_runs()
        if self._node_booting():
            # The node cannot be stopped half-started (the launch holds it): wait for it.
            self.notify(
                "quitting: waiting for the private RabbitMQ node that is starting "
                "(10-40 s the first time), then stopping it…",
                timeout=60,
            )
            while self._node_booting() and self.provisioner.running_node is None:
                await asyncio.sleep(0.1)
        node = self.provisioner.running_node
        if node is not None:
            self.notify("quitting: stopping the private RabbitMQ node…", timeout=30)
            await asyncio.to_thread(node.kill)
        self.exit()

    async def _stop_runs(self) -> None:
        """Stop the runs this cockpit started, before their node goes, so each is recorded
        as stopped and its queues are cleaned as a stop does (a quit used to leave the
        session "incomplete", as a crash does). A run attached from elsewhere goes on."""
        from flowdeck.engine import Controller
        from flowdeck.tui.run_screen import RunScreen

        runs = [
            screen.control
            for screen in self.screen_stack
            if isinstance(screen, RunScreen)
            and not screen.finished
            and isinstance(screen.control, Controller)
            and screen.control.running
        ]
        if not runs:
            return
        stopping = asyncio.gather(
            *(run.stop("the cockpit was quit") for run in runs), return_exceptions=True
        )
        try:
            await asyncio.wait_for(asyncio.shield(stopping), QUIT_QUIET_WAIT)
            return
        except TimeoutError:
            names = ", ".join(run.spec.name for run in runs)
            self.notify(
                f"quitting: stopping the run {names}: publishing has stopped, consumers take "
                "what is left, then the session is closed…",
                timeout=QUIT_RUN_WAIT,
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping, QUIT_RUN_WAIT - QUIT_QUIET_WAIT)

    def _node_booting(self) -> bool:
        launch = self.screen_class(Route.LAUNCH)
        return any(
            isinstance(screen, launch) and getattr(screen, "booting_node", False)
            for screen in self.screen_stack
        )

    async def on_unmount(self) -> None:
        # The screens (and the run they steer) are closed by now; stopping a node takes
        # seconds, off the event loop.
        self.worker_pool.close()
        await asyncio.to_thread(self.provisioner.close)


class _Uncovered(Screen[None]):
    """The app's first screen, under all the others: shown only when they are all closed,
    and then it has the app open the launch form (see ``FlowdeckApp.uncovered``)."""

    def on_screen_resume(self) -> None:
        app = self.app
        if isinstance(app, FlowdeckApp):
            app.call_later(app.uncovered)


class DemoApp(FlowdeckApp):
    """The cockpit opened on the tour (``tui.tour``): the launch screen underneath (with the
    tour's run in its form), the intro on top. With a ``share`` (``flowdeck serve --demo``)
    a process that is not its presenter watches the presenter's tour instead: no launch
    screen under it, nothing to start or steer."""

    def __init__(
        self,
        tour: Tour,
        *,
        sessions_root: Path | None = None,
        theme: str | None = None,
        share: TourShare | None = None,
    ):
        super().__init__(spec=tour.spec, sessions_root=sessions_root, theme=theme)
        self.tour = tour
        #: The tour shared between browser tabs, presented or watched by this process.
        self.tour_share = share
        self.watching = share is not None and not share.presenting
        self.opens_launch = not self.watching

    def on_mount(self) -> None:
        # FlowdeckApp's own on_mount runs after this one (Textual calls each class's
        # handler) and opens the launch screen: the intro goes on top once it has.
        intro = self.screen_class(Route.TOUR_INTRO)(self.tour, watching=self.watching)
        self.call_later(self.push_screen, intro)
