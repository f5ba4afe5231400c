"""The alarm banner: impossible to miss while a memory or disk alarm is on."""

from __future__ import annotations

from textual.widgets import Static

from tui.model import RunHistory

ALARM_WORDS = {
    "memory": "MEMORY ALARM: the broker blocks every publishing connection",
    "disk": "DISK ALARM: free disk below the limit; the broker blocks publishers",
}


class AlarmBanner(Static):
    """Hidden while no alarm is on; a full-width reversed line naming each alarm."""

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
    """

    def show(self, history: RunHistory) -> None:
        alarms = sorted(history.alarms)
        self.set_class(bool(alarms), "-on")
        if alarms:
            words = " | ".join(ALARM_WORDS.get(a, f"{a.upper()} ALARM") for a in alarms)
            blocked = history.last_tick.blocked if history.last_tick else 0
            self.update(f"▲ {words} ({blocked} of our connections blocked) ▲")
