"""The settings in force, always on screen, with each pending change beside its setting."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from engine.change import Setting, format_number
from engine.progress import PendingChange
from engine.snapshot import Settings
from tui.model import wrap_key

SHORT = {
    Setting.INFLIGHT: "in-flight",
    Setting.PREFETCH: "prefetch",
    Setting.ACK_EVERY: "ack every",
    Setting.RATE: "rate",
    Setting.PUBLISHERS: "publishers",
    Setting.CONSUMERS: "consumers",
}


def describe_value(setting: Setting, value: float) -> str:
    if setting in (Setting.INFLIGHT, Setting.PREFETCH, Setting.RATE) and value == 0:
        return "no limit"
    if setting is Setting.RATE:
        return f"{format_number(value)}/s"
    return format_number(value)


class SettingsBar(Static):
    """``in-flight 100 → 200 (pending 1/2)  prefetch 100  ...  publishing``."""

    DEFAULT_CSS = """
    SettingsBar {
        height: auto;
        padding: 0 1;
        background: $panel;
    }
    """

    _shown_shape: tuple[tuple[int, ...], ...] = ()

    def show(self, settings: Settings | None, pending: tuple[PendingChange, ...]) -> None:
        if settings is None:
            self.update("settings: waiting for the workers")
            self._shown_shape = ()
            return
        line = Text()
        waiting = {p.change.setting: p for p in pending}
        for setting, word in SHORT.items():
            value = float(getattr(settings, setting.value))
            line.append(f"{word} ", style="dim")
            line.append(describe_value(setting, value), style="bold")
            change = waiting.get(setting)
            if change is not None and change.change.value is not None:
                line.append(f" → {describe_value(setting, change.change.value)}", style="bold")
                line.append(
                    f" pending {change.workers_done}/{change.workers_total}",
                    style="reverse yellow",
                )
            line.append("  ")
        pause = waiting.get(Setting.PAUSE) or waiting.get(Setting.RESUME)
        if settings.paused:
            line.append("PAUSED", style="bold reverse yellow")
        else:
            line.append("publishing", style="bold green")
        if pause is not None:
            line.append(f" → {pause.change.setting.value} pending", style="reverse yellow")
        shape = wrap_key(line.plain)
        self.update(line, layout=shape != self._shown_shape)
        self._shown_shape = shape
