"""The alarm banner: impossible to miss while a memory or disk alarm is on, or while the run
goes on unrecorded (the sessions directory is read-only, full or gone)."""

from __future__ import annotations

from itertools import islice

from textual.widgets import Static

from flowdeck.engine import EventKind
from flowdeck.tui.model import RunHistory

ALARM_WORDS = {
    "memory": "MEMORY ALARM: the broker blocks every publishing connection",
    "disk": "DISK ALARM: free disk below the limit; the broker blocks publishers",
}


class AlarmBanner(Static):
    """Hidden while no alarm is on and recording works; a full-width reversed line naming
    each alarm, and one saying why recording stopped (from the RECORDING_STOPPED event)."""

    DEFAULT_CSS = """
    AlarmBanner {
        display: none;
        width: 1fr;
        height: auto;
        background: $error;
        color: $text;
        text-style: bold;
        content-align: center middle;
    }
    AlarmBanner.-on {
        display: block;
    }
    AlarmBanner.-recording-only {
        background: $warning;
        color: $background;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.recording_trouble = ""
        self._events_seen = 0

    def show(self, history: RunHistory) -> None:
        self._read_recording_trouble(history)
        alarms = sorted(history.alarms)
        lines: list[str] = []
        if alarms:
            words = " | ".join(ALARM_WORDS.get(a, f"{a.upper()} ALARM") for a in alarms)
            blocked = history.last_tick.blocked if history.last_tick else 0
            lines.append(f"▲ {words} ({blocked} of our connections blocked) ▲")
        if self.recording_trouble:
            lines.append(f"● NOT RECORDING: {self.recording_trouble} ●")
        self.set_class(bool(lines), "-on")
        self.set_class(bool(self.recording_trouble) and not alarms, "-recording-only")
        if lines:
            self.update("\n".join(lines))

    def _read_recording_trouble(self, history: RunHistory) -> None:
        """Only the events added since the last call are read (the list only grows)."""
        if len(history.events) < self._events_seen:  # another run's history
            self._events_seen = 0
            self.recording_trouble = ""
        for event in islice(history.events, self._events_seen, None):
            if event.kind is EventKind.RECORDING_STOPPED:
                self.recording_trouble = event.message
        self._events_seen = len(history.events)
