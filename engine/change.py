"""Change: one steering command, whoever asks for it.

The operator (TUI key or CLI), a schedule step and an API call all produce the same
``Change``; the controller resolves relative values (``publishers=+10``) against the
current settings before sending it to the workers and records both times: when it was
requested and when every worker reported it in effect.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import StrEnum

from engine.errors import SpecError


class Setting(StrEnum):
    """What a change acts on. The values are the words operators type."""

    INFLIGHT = "inflight"
    PREFETCH = "prefetch"
    ACK_EVERY = "ack_every"
    RATE = "rate"
    PUBLISHERS = "publishers"
    CONSUMERS = "consumers"
    PAUSE = "pause"
    RESUME = "resume"
    MARK = "mark"


#: Settings that carry a number, with the inclusive range a resolved value must lie in.
NUMERIC_RANGES: dict[Setting, tuple[float, float]] = {
    Setting.INFLIGHT: (0, 1_000_000),
    Setting.PREFETCH: (0, 65_535),
    Setting.ACK_EVERY: (1, 65_535),
    Setting.RATE: (0, 10_000_000),
    Setting.PUBLISHERS: (0, 10_000),
    Setting.CONSUMERS: (0, 10_000),
}

#: Settings whose values are whole numbers.
INTEGER_SETTINGS = frozenset(
    {Setting.INFLIGHT, Setting.PREFETCH, Setting.ACK_EVERY, Setting.PUBLISHERS, Setting.CONSUMERS}
)

#: Other words operators use for a setting, mapped to the setting.
ALIASES: dict[str, Setting] = {
    "in_flight": Setting.INFLIGHT,
    "inflight_limit": Setting.INFLIGHT,
    "confirm": Setting.INFLIGHT,
    "qos": Setting.PREFETCH,
    "ack": Setting.ACK_EVERY,
    "ack_interval": Setting.ACK_EVERY,
    "multi_ack_every": Setting.ACK_EVERY,
    "producers": Setting.PUBLISHERS,
}


@dataclass(frozen=True, slots=True)
class Change:
    """One steering command.

    ``value`` is None for pause/resume/mark. ``relative`` means ``value`` is added to the
    current setting (``publishers=+10``, ``rate=-5``); the controller resolves it to an
    absolute change before any worker sees it. ``label`` names a phase mark.
    """

    setting: Setting
    value: float | None = None
    relative: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if self.setting in NUMERIC_RANGES:
            if self.value is None:
                raise SpecError(self.setting.value, f"{self.setting.value} needs a value")
            if not self.relative:
                check_setting_value(self.setting, self.value)
        elif self.value is not None or self.relative:
            raise SpecError(self.setting.value, f"{self.setting.value} takes no value")

    def resolved(self, current: float) -> Change:
        """The absolute change this one means when the setting is now ``current``."""
        if not self.relative or self.value is None:
            return self
        low, high = NUMERIC_RANGES[self.setting]
        target = min(max(current + self.value, low), high)
        if self.setting in INTEGER_SETTINGS:
            target = round(target)
        return Change(self.setting, target, relative=False, label=self.label)

    def describe(self) -> str:
        """The change as an operator would type it: ``inflight=200``, ``mark "warm"``."""
        if self.setting is Setting.MARK:
            return f"mark {shlex.quote(self.label)}" if self.label else "mark"
        if self.value is None:
            return self.setting.value
        sign = "+" if self.relative and self.value >= 0 else ""
        return f"{self.setting.value}={sign}{format_number(self.value)}"


def format_number(value: float) -> str:
    """``200`` for whole numbers, ``2.5`` otherwise: how values read in messages."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def check_setting_value(setting: Setting, value: float) -> None:
    """Raise a SpecError naming the setting, the value and the allowed range."""
    low, high = NUMERIC_RANGES[setting]
    if setting in INTEGER_SETTINGS and not float(value).is_integer():
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
        raise SpecError("change", f"unknown setting {word!r}; use one of: {known}") from None


def parse_change(text: str) -> Change:
    """Parse what an operator typed: ``inflight=200``, ``publishers=+10``, ``pause``,
    ``mark "after warm-up"``.
    """
    text = text.strip()
    if not text:
        raise SpecError("change", "empty change; try inflight=200, prefetch=60 or pause")
    head, _, rest = text.partition(" ")
    if parse_setting(head.partition("=")[0]) is Setting.MARK and "=" not in head:
        label = " ".join(shlex.split(rest)) if rest.strip() else ""
        return Change(Setting.MARK, label=label)
    if "=" not in text:
        setting = parse_setting(text)
        if setting in NUMERIC_RANGES:
            raise SpecError(
                setting.value, f"{setting.value} needs a value, e.g. {setting.value}=100"
            )
        return Change(setting)
    name, _, raw = text.partition("=")
    setting = parse_setting(name)
    raw = raw.strip()
    relative = raw.startswith(("+", "-"))
    try:
        value = float(raw)
    except ValueError:
        raise SpecError(setting.value, f"{setting.value} needs a number, got {raw!r}") from None
    if setting not in NUMERIC_RANGES:
        raise SpecError(setting.value, f"{setting.value} takes no value")
    return Change(setting, value, relative=relative)
