"""The event log: every change, phase, alarm, block/unblock and error, with its time."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import RichLog

from flowdeck.engine import EventKind, RunEvent

STYLES: dict[EventKind, str] = {
    EventKind.CHANGE_REQUESTED: "yellow",
    EventKind.CHANGE_APPLIED: "bold green",
    EventKind.PHASE: "bold magenta",
    EventKind.DRAIN: "magenta",
    EventKind.ALARM_RAISED: "bold reverse red",
    EventKind.ALARM_CLEARED: "bold green",
    EventKind.BLOCKED: "bold red",
    EventKind.UNBLOCKED: "green",
    EventKind.OUTAGE_STARTED: "bold reverse red",
    EventKind.OUTAGE_ENDED: "green",
    EventKind.SOURCE_STALE: "yellow",
    EventKind.SOURCE_RECOVERED: "green",
    EventKind.ERROR: "bold red",
}


def event_line(event: RunEvent) -> Text:
    """``14:02:07 change #3 in effect in every worker: inflight=200`` in the kind's style.

    The engine's messages already name what happened, so the kind shows as colour only.
    """
    stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
    return Text.assemble((stamp, "dim"), " ", (event.message, STYLES.get(event.kind, "")))


class EventLog(RichLog):
    """Appends one line per event; keeps the last thousand."""

    DEFAULT_CSS = """
    EventLog {
        height: 1fr;
    }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=1000, wrap=True, markup=False, min_width=20, **kwargs)  # type: ignore[arg-type]
        self.shown = 0

    def add(self, event: RunEvent) -> None:
        self.write(event_line(event))
        self.shown += 1

    def replace_all(self, events: list[RunEvent]) -> None:
        self.clear()
        self.shown = 0
        for event in events[-1000:]:
            self.add(event)
