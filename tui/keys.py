"""The dashboard's key table: one list drives the key bindings, the footer and the help.

Each row says which key does what; :func:`bindings` turns the table into Textual
bindings and the help screen renders the same rows, so the help can never disagree with
what the keys do.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

from engine.change import Change, Setting
from engine.errors import SpecError
from engine.snapshot import Settings


@dataclass(frozen=True, slots=True)
class KeyRow:
    """One key of the dashboard: the key, the action it runs, and what it does."""

    key: str
    action: str
    description: str
    group: str
    show: bool = False  # shown in the footer


#: Steerable settings: (setting, key for "down", how a step changes it).
STEPPED: tuple[tuple[Setting, str, str], ...] = (
    (Setting.INFLIGHT, "i", "halve / double"),
    (Setting.PREFETCH, "p", "halve / double"),
    (Setting.ACK_EVERY, "a", "halve / double"),
    (Setting.RATE, "r", "halve / double"),
    (Setting.PUBLISHERS, "u", "one less / one more"),
    (Setting.CONSUMERS, "c", "one less / one more"),
)

LABELS: dict[Setting, str] = {
    Setting.INFLIGHT: "in-flight limit",
    Setting.PREFETCH: "prefetch",
    Setting.ACK_EVERY: "ack every",
    Setting.RATE: "rate per publisher",
    Setting.PUBLISHERS: "publishers",
    Setting.CONSUMERS: "consumers",
}


def _steering_rows() -> list[KeyRow]:
    rows = []
    for setting, key, how in STEPPED:
        down, up = how.split(" / ")
        rows.append(
            KeyRow(key, f"step('{setting.value}', -1)", f"{LABELS[setting]}: {down}", "Steer")
        )
        rows.append(
            KeyRow(key.upper(), f"step('{setting.value}', 1)", f"{LABELS[setting]}: {up}", "Steer")
        )
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


def current_value(settings: Settings, setting: Setting) -> float:
    return float(getattr(settings, setting.value))


def step_change(settings: Settings, setting: Setting, direction: int) -> Change:
    """The change one step up (``direction`` 1) or down (-1) from the value in force.

    Limits and rates double or halve, the way the seed sweeps move through in-flight
    limits; client counts move by one. A limit or rate of 0 means "no limit", which has
    no neighbour: the operator types an exact value instead.
    """
    if setting in (Setting.PUBLISHERS, Setting.CONSUMERS):
        return Change(setting, float(direction), relative=True)
    value = current_value(settings, setting)
    if value == 0:
        raise SpecError(
            setting.value,
            f"{setting.value} is 0 (no limit) and has no step; press = and type a value, "
            f"e.g. {setting.value}=100",
        )
    if setting is Setting.RATE:
        target = value * 2 if direction > 0 else value / 2
        return Change(setting, round(target, 3))
    low = 1
    target = value * 2 if direction > 0 else max(low, value // 2)
    return Change(setting, float(int(target)))
