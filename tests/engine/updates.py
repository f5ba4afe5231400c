"""What a test of a real run keeps of the controller's updates: its events and its ticks."""

from __future__ import annotations

from flowdeck.engine.controller import Controller
from flowdeck.engine.events import RunEvent
from flowdeck.engine.progress import Tick


def collect_updates(controller: Controller) -> tuple[list[RunEvent], list[Tick]]:
    """Lists that fill with the run's events and once-a-second ticks as the run goes."""
    events: list[RunEvent] = []
    ticks: list[Tick] = []

    def keep(update: object) -> None:
        if isinstance(update, RunEvent):
            events.append(update)
        elif isinstance(update, Tick):
            ticks.append(update)

    controller.add_listener(keep)
    return events, ticks
