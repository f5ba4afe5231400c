"""Change: one steering command, whoever asks for it.

The operator (TUI key or CLI), a schedule step and an API call all produce the same
``Change``; the controller resolves relative values (``publishers=+10``) against the
current settings before sending it to the workers and records both times: when it was
requested and when every worker reported it in effect.

A :class:`NodeFault` (``fault kill 2``, ``fault partition 3``) is not a change: no worker
applies it. It loses or brings back one node of a private cluster flowdeck runs, or cuts
it off the others and heals it (a cluster in network namespaces), as a schedule step or from the
cockpit's node key, and opens a phase (a mark named after it) so the report splits the run
there.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import cast

from flowdeck.collectors.broker_settings import (
    CHANGE_PREFIX,
    RECONNECT,
    BrokerSetting,
    parse_assignment,
)
from flowdeck.collectors.errors import SourceError
from flowdeck.collectors.node_faults import FAULT_ACTIONS, FaultAction
from flowdeck.engine.errors import SpecError, did_you_mean
from flowdeck.engine.settings import ALIASES, BY_SETTING, COMMAND_BY_SETTING, Setting
from flowdeck.engine.snapshot import Settings

__all__ = [
    "ALIASES",
    "Change",
    "NodeFault",
    "Setting",
    "check_setting_value",
    "format_number",
    "is_fault",
    "parse_change",
    "parse_fault",
]


@dataclass(frozen=True, slots=True)
class Change:
    """One steering command.

    ``value`` is None for pause/resume/mark. ``relative`` means ``value`` is added to the
    current setting (``publishers=+10``, ``rate=-5``); the controller resolves it to an
    absolute change before any worker sees it. ``label`` names a phase mark; for a broker
    change it is what follows ``broker.``: ``KEY=VALUE`` (the value in its canonical form,
    collectors/broker_settings.py) or ``reconnect``.
    """

    setting: Setting
    value: float | None = None
    relative: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if self.setting in BY_SETTING:
            if self.value is None:
                raise SpecError(self.setting.value, f"{self.setting.value} needs a value")
            if not self.relative:
                check_setting_value(self.setting, self.value)
        elif self.value is not None or self.relative:
            raise SpecError(self.setting.value, f"{self.setting.value} takes no value")
        if self.setting is Setting.BROKER and self.label != RECONNECT:
            if not self.label:
                raise SpecError(
                    "broker",
                    "a broker change is broker.KEY=VALUE, e.g. "
                    "broker.credit_flow_default_credit={100,50}, or broker.reconnect",
                )
            row, term = broker_assignment(self.label)
            if self.label != f"{row.key}={term}":
                object.__setattr__(self, "label", f"{row.key}={term}")

    def resolved(self, current: float) -> Change:
        """The absolute change this one means when the setting is now ``current``."""
        if not self.relative or self.value is None:
            return self
        row = BY_SETTING[self.setting]
        target = min(max(current + self.value, row.low), row.high)
        if row.kind is int:
            target = round(target)
        return Change(self.setting, target, relative=False, label=self.label)

    def describe(self) -> str:
        """The change as an operator would type it: ``inflight=200``, ``mark "warm"``."""
        if self.setting is Setting.MARK:
            return f"mark {shlex.quote(self.label)}" if self.label else "mark"
        if self.setting is Setting.BROKER:
            return f"{CHANGE_PREFIX}{self.label}"
        if self.value is None:
            return self.setting.value
        sign = "+" if self.relative and self.value >= 0 else ""
        return f"{self.setting.value}={sign}{format_number(self.value)}"


@dataclass(frozen=True, slots=True)
class NodeFault:
    """One node of a private node or cluster lost or brought back on purpose: ``kill``
    (SIGKILL, as a crash), ``stop`` (a clean shutdown), ``start`` or ``restart``; or, on a
    cluster in network namespaces, cut off the others (``partition``) and put back
    (``heal``). ``node`` names it as ``flowdeck broker kill`` does: its number (``2``),
    ``n2`` or its name."""

    action: FaultAction
    node: str

    def describe(self) -> str:
        """As an operator writes it: ``fault kill 2``."""
        return f"fault {self.action} {self.node}"

    def mark(self) -> Change:
        """The phase mark the fault opens, named after it."""
        return Change(Setting.MARK, label=self.describe())


def is_fault(text: str) -> bool:
    """Whether ``text`` is a node fault (``fault ...``) rather than a change."""
    return text.strip().split(" ", 1)[0].lower() == "fault"


def parse_fault(text: str) -> NodeFault:
    """``fault kill 2``, ``fault start n2``, ``fault restart rabbit-2@host``, ``fault
    partition 3``: a NodeFault."""
    words = text.split()
    if len(words) != 3 or words[0].lower() != "fault" or words[1].lower() not in FAULT_ACTIONS:
        raise SpecError(
            "fault",
            f"a node fault is 'fault ACTION NODE' with ACTION one of "
            f"{', '.join(FAULT_ACTIONS)} and NODE the node's number (2), n2 or name, "
            f"got {text.strip()!r}",
        )
    return NodeFault(cast(FaultAction, words[1].lower()), words[2])


def broker_assignment(text: str) -> tuple[BrokerSetting, str]:
    """``KEY=VALUE`` of a broker change as (its row, the canonical Erlang term)."""
    try:
        return parse_assignment(text)
    except SourceError as exc:
        raise SpecError("broker", str(exc)) from None


def format_number(value: float) -> str:
    """``200`` for whole numbers, ``2.5`` otherwise: how values read in messages."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def check_setting_value(setting: Setting, value: float) -> None:
    """Raise a SpecError naming the setting, the value and the allowed range."""
    row = BY_SETTING[setting]
    low, high = row.low, row.high
    if row.kind is int and not float(value).is_integer():
        raise SpecError(setting.value, f"{setting.value} must be a whole number, got {value}")
    if not low <= value <= high:
        raise SpecError(
            setting.value,
            f"{setting.value} must be {format_number(low)}..{format_number(high)}, "
            f"got {format_number(value)}",
        )


def parse_setting(word: str) -> Setting:
    key = word.strip().lower().replace("-", "_")
    if key in ALIASES:
        return ALIASES[key]
    try:
        return Setting(key)
    except ValueError:
        known = ", ".join(s.value for s in Setting)
        close = did_you_mean(key, [*(s.value for s in Setting), *ALIASES])
        raise SpecError("change", f"unknown setting {word!r}{close}; use one of: {known}") from None


def parse_change(text: str) -> Change:
    """Parse what an operator typed: ``inflight=200``, ``publishers=+10``, ``pause``,
    ``mark "after warm-up"``, ``broker.credit_flow_default_credit={100,50}``,
    ``broker.reconnect``.
    """
    text = text.strip()
    if not text:
        raise SpecError("change", "empty change; try inflight=200, prefetch=60 or pause")
    if text.lower().startswith(CHANGE_PREFIX):
        rest = text[len(CHANGE_PREFIX) :].strip()
        return Change(Setting.BROKER, label=RECONNECT if rest.lower() == RECONNECT else rest)
    head, _, rest = text.partition(" ")
    if parse_setting(head.partition("=")[0]) is Setting.MARK and "=" not in head:
        label = " ".join(shlex.split(rest)) if rest.strip() else ""
        return Change(Setting.MARK, label=label)
    if "=" not in text:
        setting = parse_setting(text)
        if setting in BY_SETTING:
            raise SpecError(
                setting.value, f"{setting.value} needs a value, e.g. {setting.value}=100"
            )
        return Change(setting)
    name, _, raw = text.partition("=")
    setting = parse_setting(name)
    raw = raw.strip()
    relative = raw.startswith(("+", "-"))
    row = BY_SETTING.get(setting)
    if row is None:
        raise SpecError(setting.value, f"{setting.value} takes no value")
    return Change(setting, number_in_unit(setting.value, raw, row.unit), relative=relative)


#: The units a value may be written in, by a row's unit: each one's size in the row's unit
#: (``work=5ms``, ``work=0.5s``, ``work=250us``, ``reject=10%``).
UNITS: dict[str, dict[str, float]] = {
    "ms": {"ms": 1.0, "s": 1000.0, "us": 0.001, "µs": 0.001},
    "%": {"%": 1.0},
    "msg/s": {"msg/s": 1.0, "/s": 1.0},
}
_NUMBER_AND_UNIT = re.compile(r"^([+-]?[0-9.]+(?:e[+-]?[0-9]+)?)\s*([a-zµ%/]*)$", re.IGNORECASE)


def number_in_unit(name: str, raw: str, unit: str) -> float:
    """``raw`` (``5``, ``5ms``, ``0.5s``) as a number in ``unit``: a bare number is in the
    unit already; a unit the setting is not measured in is refused, naming the ones it is."""
    match = _NUMBER_AND_UNIT.match(raw.strip())
    scales = UNITS.get(unit, {unit: 1.0} if unit else {})
    if match is None or (match.group(2) and match.group(2).lower() not in scales):
        units = f", or one with a unit ({', '.join(scales)})" if scales else ""
        raise SpecError(name, f"{name} needs a number{units}, got {raw!r}")
    try:
        value = float(match.group(1))
    except ValueError:
        raise SpecError(name, f"{name} needs a number, got {raw!r}") from None
    return value * scales.get(match.group(2).lower(), 1.0) if match.group(2) else value


def apply_change(settings: Settings, change: Change) -> Settings:
    """``settings`` with an absolute change applied (pause/resume set ``paused``)."""
    row = BY_SETTING.get(change.setting)
    if row is not None:
        if change.value is None:
            return settings
        return settings.with_value(change.setting, change.value)
    command = COMMAND_BY_SETTING[change.setting]
    if command.paused is None:
        return settings
    return replace(settings, paused=command.paused)
