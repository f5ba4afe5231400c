"""The dashboard's key table: one list drives the key bindings, the footer and the help.

Each row says which key does what; :func:`bindings` turns the table into Textual
bindings and the help screen renders the same rows, so the help can never disagree with
what the keys do.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

from flowdeck.engine import (
    BY_SETTING,
    STEERABLE,
    Change,
    Setting,
    Settings,
    SpecError,
    Step,
    setting_value,
)


@dataclass(frozen=True, slots=True)
class KeyRow:
    """One key of the dashboard: the key, the action it runs, and what it does."""

    key: str
    action: str
    description: str
    group: str
    show: bool = False  # shown in the footer


#: What each steerable setting is called in key help, toasts and the palette.
LABELS: dict[Setting, str] = {row.setting: row.label for row in STEERABLE}


def _steering_rows() -> list[KeyRow]:
    rows = []
    for row in STEERABLE:
        down, up = row.step.value.split(" / ")
        name = row.setting.value
        rows.append(KeyRow(row.key, f"step('{name}', -1)", f"{row.label}: {down}", "Steer"))
        rows.append(KeyRow(row.key.upper(), f"step('{name}', 1)", f"{row.label}: {up}", "Steer"))
    return rows


KEY_TABLE: tuple[KeyRow, ...] = (
    *_steering_rows(),
    KeyRow("equals_sign", "exact_change", "type an exact change (inflight=200)", "Steer", True),
    KeyRow("space", "pause_resume", "pause / resume publishing", "Steer", True),
    KeyRow("m", "mark_phase", "mark a phase with a label", "Steer", True),
    KeyRow("n", "skip_step", "skip to the next schedule step", "Steer", True),
    KeyRow("s", "stop_run", "stop the run (asks first)", "Run", True),
    KeyRow("l", "toggle_basis", "latency from actual / intended send time", "View", True),
    KeyRow("e", "show_tab('events')", "show the event log", "View"),
    KeyRow("q", "show_tab('queues')", "show the queue table", "View"),
    KeyRow("question_mark", "help", "this help", "View", True),
    KeyRow("ctrl+p", "command_palette", "command palette (every action by name)", "View"),
)

#: How keys read on screen (Textual names some keys by word).
KEY_DISPLAY = {"equals_sign": "=", "question_mark": "?", "space": "space"}


def bindings(rows: tuple[KeyRow, ...] = KEY_TABLE) -> list[Binding]:
    return [
        Binding(
            row.key,
            row.action,
            row.description,
            show=row.show,
            key_display=KEY_DISPLAY.get(row.key),
        )
        for row in rows
        if row.key != "ctrl+p"  # the app binds the palette itself
    ]


def step_change(requested: Settings, setting: Setting, direction: int) -> Change:
    """The change one step up (``direction`` 1) or down (-1) from the value last asked for
    (``requested``: the controller's ``requested_settings``, pending changes included), so
    a key pressed while a change is pending steps on from it, as ``inflight=+10`` does.

    The step is the setting's registry rule: limits and rates double or halve, the way the
    seed sweeps move through in-flight limits; client counts move by one. A limit or rate
    of 0 means "no limit", which has no neighbour: the operator types an exact value.
    """
    row = BY_SETTING[setting]
    if row.step is Step.ONE:
        return Change(setting, float(direction), relative=True)
    value = setting_value(requested, setting)
    if value == 0:
        raise SpecError(
            setting.value,
            f"{setting.value} is 0 (no limit) and has no step; press = and type a value, "
            f"e.g. {setting.value}=100",
        )
    if row.kind is float:
        target = value * 2 if direction > 0 else value / 2
        return Change(setting, round(target, 3))
    low = 1
    whole = value * 2 if direction > 0 else max(low, value // 2)
    return Change(setting, float(int(whole)))
