"""The flowdeck cockpit: a thin Textual app that hands each job to a screen."""

from __future__ import annotations

import asyncio
import gc
from multiprocessing import resource_tracker
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from flowdeck.engine import RunSpec
from flowdeck.tui.commands import SteeringCommands
from flowdeck.tui.palette import COLORBLIND_THEME, THEMES
from flowdeck.tui.source import RunControl


def freeze_long_lived(*, collect: bool = False) -> None:
    """Take every object alive now out of the cyclic garbage collector's walks.

    A full collection walks every tracked object: with Textual, numpy, pyarrow and a run's
    structures that held the event loop 70-200 ms, several times a minute (measured with
    ``benchmarks/tui_lag.py``). What exists once the app and a run have started lives as
    long as they do; frozen, it is no longer walked, and a full collection costs only what
    came later. Freezing is one list splice. ``collect`` first frees what earlier apps in
    this process left (tests run many): a full collection, so only before the app runs.
    """
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


class FlowdeckApp(App[None]):
    """Opens on the launch screen, or straight on a run's dashboard when given one."""

    CSS_PATH = "app.tcss"
    TITLE = "flowdeck"
    COMMANDS = App.COMMANDS | {SteeringCommands}
    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+q", "quit", "quit", priority=True)]

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

    def on_mount(self) -> None:
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = self.requested_theme or COLORBLIND_THEME.name
        from flowdeck.tui.screens.launch import LaunchScreen

        launch_screen = LaunchScreen(self.spec)
        self.push_screen(launch_screen)
        self.call_after_refresh(freeze_long_lived)  # the screens' widgets
        if self.control is not None:
            from flowdeck.tui.screens.live import LiveScreen

            self.push_screen(LiveScreen(self.control))
        elif self.open_sessions:
            from flowdeck.tui.screens.sessions import SessionsScreen

            self.push_screen(SessionsScreen())
        elif self.launch:
            self.call_after_refresh(launch_screen.action_launch)

    async def on_unmount(self) -> None:
        # The screens (and the run they steer) are closed by now; stopping a node takes
        # seconds, off the event loop.
        await asyncio.to_thread(self.provisioner.close)
