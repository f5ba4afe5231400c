"""The dashboard's key table: one list drives the key bindings, the footer and the help.

Each row says which key does what; :func:`bindings` turns the table into Textual
bindings and the help screen renders the same rows, so the help can never disagree with
what the keys do. Other screens' help is read off their own bindings
(:func:`rows_from_bindings`).

The footer has one line: the rows it shows carry a short ``hint`` and a ``footer`` rank,
and the bindings come in rank order, so on a narrow terminal what is cut off at the right
is the least needed, and ``?`` (every key) is always first.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType
from textual.screen import Screen

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
    #: Place in the footer (1 first); 0: not in the footer, only in the help.
    footer: int = 0
    #: The footer's word for it (the description when empty).
    hint: str = ""


#: What each steerable setting is called in key help, toasts and the palette.
LABELS: dict[Setting, str] = {row.setting: row.label for row in STEERABLE}


def _steering_rows() -> list[KeyRow]:
    rows = []
    for row in STEERABLE:
        if not row.key:  # steered by an exact change (=) only
            continue
        down, up = row.step.value.split(" / ")
        name = row.setting.value
        rows.append(KeyRow(row.key, f"step('{name}', -1)", f"{row.label}: {down}", "Steer"))
        rows.append(KeyRow(row.key.upper(), f"step('{name}', 1)", f"{row.label}: {up}", "Steer"))
    return rows


KEY_TABLE: tuple[KeyRow, ...] = (
    *_steering_rows(),
    KeyRow(
        "equals_sign", "exact_change", "type an exact change (inflight=200)", "Steer", 2, "change"
    ),
    KeyRow("space", "pause_resume", "pause / resume publishing", "Steer", 3, "pause"),
    KeyRow("m", "mark_phase", "mark a phase with a label", "Steer", 5, "mark"),
    KeyRow("n", "skip_step", "skip to the next schedule step", "Steer", 6, "next step"),
    KeyRow(
        "S",
        "resume_schedule",
        "resume the schedule (an operator change paused it)",
        "Steer",
        7,
        "resume schedule",
    ),
    KeyRow("o", "autotune", "autopilot: search the in-flight limit live (o again: stop)", "Steer"),
    KeyRow("s", "stop_run", "stop the run (asks first)", "Run", 4, "stop"),
    KeyRow("l", "toggle_basis", "latency from actual / intended send time", "View", 8, "latency"),
    KeyRow("v", "toggle_view", "charts / broker and events (narrow terminals)", "View", 9, "view"),
    KeyRow("e", "show_tab('events')", "show the event log", "View"),
    KeyRow("q", "show_tab('queues')", "show the queue table", "View"),
    KeyRow("t", "show_tab('verdicts')", "show the per-setting table (verdicts)", "View"),
    KeyRow(
        "T",
        "per_setting",
        "per-setting table full screen: each verdict's reason, chart, reasoning",
        "View",
    ),
    KeyRow("h", "show_tab('hosts')", "show the per-host table (workers, msg/s, CPU)", "View"),
    KeyRow(
        "f",
        "show_tab('flow')",
        "show where the messages wait (before the queues, in them, at consumers; credit flow)",
        "View",
    ),
    KeyRow("question_mark", "help", "this help (F1 too)", "View", 1, "help"),
    KeyRow("ctrl+p", "command_palette", "command palette (every action by name)", "View"),
)

#: ``?`` on every screen, first in the footer (each screen lists it first in its
#: bindings; the app binds it too, for screens that do not). Not a priority binding: in a
#: text field ``?`` types itself (a URI's query has one), F1 opens the help there.
HELP_BINDING = Binding("question_mark,f1", "app.help", "help", key_display="?")

#: How keys read on screen (Textual names some keys by word).
KEY_DISPLAY = {"equals_sign": "=", "question_mark": "?", "space": "space"}

#: How keys read in the help, by Textual's key name.
KEY_NAMES = {
    "escape": "Esc",
    "enter": "Enter",
    "space": "Space",
    "left": "←",
    "right": "→",
    "up": "↑",
    "down": "↓",
    "home": "Home",
    "end": "End",
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "question_mark": "?",
}


def key_label(key: str) -> str:
    """``ctrl+r`` as ``Ctrl+R``, ``escape,enter`` as ``Esc / Enter``: a key as the help
    names it."""
    names = []
    for part in key.split(","):
        if part.startswith("ctrl+"):
            names.append("Ctrl+" + part[5:].upper())
        elif len(part) == 2 and part[0] == "f" and part[1].isdigit():
            names.append(part.upper())
        else:
            names.append(KEY_NAMES.get(part, part))
    return " / ".join(names)


def bindings(rows: tuple[KeyRow, ...] = KEY_TABLE) -> list[Binding]:
    """The rows as Textual bindings, the footer's first: in footer rank order."""
    shown = sorted((row for row in rows if row.footer), key=lambda row: row.footer)
    hidden = [row for row in rows if not row.footer]
    return [
        Binding(
            row.key,
            row.action,
            row.hint or row.description,
            show=bool(row.footer),
            key_display=KEY_DISPLAY.get(row.key),
            tooltip=row.description,
        )
        for row in (*shown, *hidden)
        if row.key != "ctrl+p"  # the app binds the palette itself
    ]


def rows_from_bindings(screen_bindings: list[BindingType], group: str) -> tuple[KeyRow, ...]:
    """A screen's help rows, read off its bindings (those with a description)."""
    rows = []
    for binding in screen_bindings:
        if isinstance(binding, Binding) and binding.description:
            rows.append(
                KeyRow(
                    binding.key,
                    binding.action,
                    binding.tooltip or binding.description,
                    group,
                )
            )
    return tuple(rows)


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


#: Keys every screen has (the app's own bindings are listed under this group).
EVERYWHERE = "everywhere"


def rows_for(screen: Screen[object]) -> tuple[KeyRow, ...]:
    """The keys of ``screen``: its ``HELP_ROWS`` when it has a key table (the dashboard),
    else its own bindings; then the keys that work on every screen."""
    own: tuple[KeyRow, ...] = getattr(screen, "HELP_ROWS", None) or rows_from_bindings(
        list(screen.BINDINGS), "this screen"
    )
    shown = {row.key for row in own}
    app_rows = rows_from_bindings(list(screen.app.BINDINGS), EVERYWHERE)
    palette = KeyRow(
        "ctrl+p", "command_palette", "command palette (every action by name)", EVERYWHERE
    )
    extra = tuple(row for row in (*app_rows, palette) if row.key not in shown)
    return own + extra
