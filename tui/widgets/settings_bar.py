"""The settings in force, always on screen, with each pending change beside its setting."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from flowdeck.engine import (
    BY_SETTING,
    STEERABLE,
    PendingChange,
    Setting,
    Settings,
    format_number,
    setting_value,
)
from flowdeck.tui.model import RunState, wrap_key

#: How the state word shows, by its severity.
STATE_STYLES = {"ok": "bold green", "warning": "bold reverse yellow", "error": "bold reverse red"}


def describe_value(setting: Setting, value: float) -> str:
    row = BY_SETTING[setting]
    if row.zero_is_unlimited and value == 0:
        return "no limit"
    return f"{format_number(value)}{row.bar_unit}"


class SettingsBar(Static):
    """``in-flight 100 → 200 (pending 1/2)  prefetch 100  ...  publishing``.

    The state word at the end is what the publishers are doing (``model.run_state``):
    ``publishing`` only when nothing holds them, ``BLOCKED by memory alarm on <node>``,
    ``PAUSED``, ``draining``."""

    DEFAULT_CSS = """
    SettingsBar {
        height: auto;
        padding: 0 1;
        background: $panel;
    }
    """

    _shown_shape: tuple[tuple[int, ...], ...] = ()

    def show(
        self,
        settings: Settings | None,
        pending: tuple[PendingChange, ...],
        state: RunState | None = None,
    ) -> None:
        if settings is None:
            self.update("settings: waiting for the workers")
            self._shown_shape = ()
            return
        line = Text()
        waiting = {p.change.setting: p for p in pending}
        for row in STEERABLE:
            setting = row.setting
            value = setting_value(settings, setting)
            change = waiting.get(setting)
            if row.quiet_at(value) and change is None:
                continue  # a setting most runs leave alone, at its default
            line.append(f"{row.short} ", style="dim")
            line.append(describe_value(setting, value), style="bold")
            if change is not None and change.change.value is not None:
                line.append(f" → {describe_value(setting, change.change.value)}", style="bold")
                line.append(
                    f" pending {change.workers_done}/{change.workers_total}",
                    style="reverse yellow",
                )
            line.append("  ")
        pause = waiting.get(Setting.PAUSE) or waiting.get(Setting.RESUME)
        if state is None:
            state = (
                RunState("paused", "warning") if settings.paused else RunState("publishing", "ok")
            )
        word = state.word.upper() if state.word == "paused" else state.word
        line.append(word, style=STATE_STYLES.get(state.severity, "bold"))
        if pause is not None:
            line.append(f" → {pause.change.setting.value} pending", style="reverse yellow")
        shape = wrap_key(line.plain)
        self.update(line, layout=shape != self._shown_shape)
        self._shown_shape = shape
