"""The steerable settings: one row each, and everything about a setting read off its row.

A setting's RunSpec field, type, range, unit, labels, cockpit key and step, where it
applies and the other words operators type for it are said once, here. RunSpec
validation (``engine.spec.FIELDS``), Change parsing and range checks (``engine.change``),
the worker's dispatch, the controller's settings tracking, the cockpit's keys, palette and
settings bar, the CLI flags and the generated docs tables all derive from ``STEERABLE``
and ``COMMANDS``, so adding a setting is adding a row (and the worker's apply method).

A broker change (``broker.KEY=VALUE``, ``broker.reconnect``) is one command row whose
settings are rows of their own in ``collectors.broker_settings``: the controller applies
it on the nodes flowdeck runs (engine/broker_changes.py), not the workers.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from enum import StrEnum

#: Where settings beyond the rows below come from: ``module:attribute`` entries, comma
#: separated, each naming a :class:`SteerableSetting` or a sequence of them. Read when this
#: module is first imported, in every process of a run (its workers inherit it).
SETTINGS_ENV = "FLOWDECK_SETTINGS"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")


class Setting(StrEnum):
    """What a change acts on. The values are the words operators type; a setting added
    from :data:`SETTINGS_ENV` is a member made by :func:`new_setting`."""

    INFLIGHT = "inflight"
    PREFETCH = "prefetch"
    ACK_EVERY = "ack_every"
    RATE = "rate"
    PUBLISHERS = "publishers"
    CONSUMERS = "consumers"
    WORK = "work"
    REJECT = "reject"
    POISON = "poison"
    MESSAGE_SIZE = "message_size"
    PAUSE = "pause"
    RESUME = "resume"
    MARK = "mark"
    BROKER = "broker"


class Scope(StrEnum):
    """Which clients a change reaches: publishers, consumers, or how many of each run
    (``topology``: clients open or close); ``run`` for a phase mark, which no client sees."""

    PUBLISHER = "publisher"
    CONSUMER = "consumer"
    TOPOLOGY = "topology"
    RUN = "run"
    #: The broker's nodes (a broker setting): no client sees the change, the nodes do.
    BROKER = "broker"


class Step(StrEnum):
    """How one cockpit key press moves a setting."""

    #: Double up, halve down: how the seed sweeps move through limits and rates. A whole
    #: number setting halves to no less than 1; 0 ("no limit") has no neighbour.
    HALVE_DOUBLE = "halve / double"
    #: One more or one less (a relative change, resolved by the controller).
    ONE = "one less / one more"


@dataclass(frozen=True, slots=True)
class SteerableSetting:
    """One setting that carries a number and can be steered during a run."""

    setting: Setting
    #: The RunSpec field and the ``Settings`` attribute that hold it (the same name).
    field: str
    kind: type[int] | type[float]
    low: float
    high: float
    #: What the spec docs and the CLI help say it is.
    help: str
    #: Label in key help and the palette, and the shorter one in the settings bar.
    label: str
    short: str
    #: The cockpit key that steps it down; its upper case steps it up ("" = no key: an
    #: exact change, ``=``, steers it).
    key: str
    step: Step
    applies_to: Scope
    #: Unit shown after ranges in spec errors and docs ("" = a plain count).
    unit: str = ""
    #: Unit shown after the value in the settings bar.
    bar_unit: str = ""
    #: 0 means "no limit" (shown so, and no key step from it).
    zero_is_unlimited: bool = False
    #: Whether it can change while the run goes (every row today: a setting that cannot
    #: belongs in RunSpec only).
    live: bool = True
    aliases: tuple[str, ...] = ()
    #: Its value when a spec does not say (RunSpec's own fields carry their defaults).
    default: float = 0
    #: The report's column heading ("" = the label, capitalised).
    title: str = ""
    #: Its tag in the cockpit's per-setting rows and charts, e.g. ``if`` in ``if=100``
    #: ("" = the field).
    tag: str = ""
    #: Whether a run that ran at two or more values of it is a sweep the report judges and
    #: recommends a value of (a limit's sweep; not a rate or a client count).
    sweep: bool = False
    #: The name of its /metrics gauge after ``flowdeck_`` ("" = the field).
    metric: str = ""
    #: A setting most runs leave alone: the settings bar shows it only away from its
    #: default (no work time, no rejections, the usual message size).
    quiet: bool = False

    @property
    def name(self) -> str:
        return self.setting.value

    @property
    def heading(self) -> str:
        return self.title or self.label[:1].upper() + self.label[1:]

    @property
    def short_tag(self) -> str:
        return self.tag or self.field

    @property
    def gauge(self) -> str:
        return f"flowdeck_{self.metric or self.field}"

    def quiet_at(self, value: float) -> bool:
        """Whether the settings bar leaves the setting out at ``value`` (a quiet setting at
        its default)."""
        return self.quiet and value == self.default

    def convert(self, value: float) -> int | float:
        """``value`` as the setting's type (counts and limits are whole numbers)."""
        return int(value) if self.kind is int else float(value)


@dataclass(frozen=True, slots=True)
class SteeringCommand:
    """A change that carries no number: pause, resume, mark a phase."""

    setting: Setting
    label: str
    applies_to: Scope
    #: The cockpit key that issues it ("" = issued another way, e.g. space toggles both).
    key: str = ""
    #: What ``Settings.paused`` becomes once it applies (None = it changes no setting).
    paused: bool | None = None
    takes_label: bool = False
    aliases: tuple[str, ...] = ()


STEERABLE: tuple[SteerableSetting, ...] = (
    SteerableSetting(
        Setting.INFLIGHT,
        "inflight",
        int,
        0,
        1_000_000,
        "in-flight limit: most unconfirmed messages per publisher; 0 = no limit",
        label="in-flight limit",
        short="in-flight",
        key="i",
        step=Step.HALVE_DOUBLE,
        applies_to=Scope.PUBLISHER,
        zero_is_unlimited=True,
        aliases=("in_flight", "inflight_limit", "confirm"),
        default=1000,
        title="In-flight limit",
        tag="if",
        sweep=True,
        metric="inflight_limit",
    ),
    SteerableSetting(
        Setting.PREFETCH,
        "prefetch",
        int,
        0,
        65_535,
        "basic.qos prefetch per consumer; 0 = unlimited",
        label="prefetch",
        short="prefetch",
        key="p",
        step=Step.HALVE_DOUBLE,
        applies_to=Scope.CONSUMER,
        zero_is_unlimited=True,
        aliases=("qos",),
        default=1000,
        tag="pf",
        sweep=True,
    ),
    SteerableSetting(
        Setting.ACK_EVERY,
        "ack_every",
        int,
        1,
        65_535,
        "ack every N deliveries (multiple flag when > 1)",
        label="ack every",
        short="ack every",
        key="a",
        step=Step.HALVE_DOUBLE,
        applies_to=Scope.CONSUMER,
        aliases=("ack", "ack_interval", "multi_ack_every"),
        default=1,
        tag="ack",
        sweep=True,
    ),
    SteerableSetting(
        Setting.RATE,
        "rate",
        float,
        0,
        10_000_000,
        "messages per second per publisher; 0 = as fast as possible",
        label="rate per publisher",
        short="rate",
        key="r",
        step=Step.HALVE_DOUBLE,
        applies_to=Scope.PUBLISHER,
        unit="msg/s",
        bar_unit="/s",
        zero_is_unlimited=True,
        title="Rate per publisher",
        tag="rate",
        metric="rate_per_publisher",
    ),
    SteerableSetting(
        Setting.PUBLISHERS,
        "publishers",
        int,
        0,
        10_000,
        "number of publishers (one connection each)",
        label="publishers",
        short="publishers",
        key="u",
        step=Step.ONE,
        applies_to=Scope.TOPOLOGY,
        aliases=("producers",),
        default=1,
        tag="pub",
    ),
    SteerableSetting(
        Setting.CONSUMERS,
        "consumers",
        int,
        0,
        10_000,
        "number of consumers (one connection each)",
        label="consumers",
        short="consumers",
        key="c",
        step=Step.ONE,
        applies_to=Scope.TOPOLOGY,
        default=1,
        tag="con",
    ),
    SteerableSetting(
        Setting.WORK,
        "work",
        float,
        0,
        60_000,
        "consumer work time per message (ms): each consumer works through its deliveries "
        "one at a time and acks each after its work; 0 = none (the spread and distribution "
        "are work_spread and work_distribution)",
        label="work time",
        short="work",
        key="w",
        step=Step.HALVE_DOUBLE,
        applies_to=Scope.CONSUMER,
        unit="ms",
        bar_unit="ms",
        aliases=("work_time", "consumer_latency"),
        title="Work time (ms)",
        tag="work",
        metric="work_ms",
        quiet=True,
    ),
    SteerableSetting(
        Setting.REJECT,
        "reject",
        float,
        0,
        100,
        "share of deliveries each consumer rejects (basic.nack), in percent; requeued or "
        "not as requeue says",
        label="reject share",
        short="reject",
        key="",
        step=Step.HALVE_DOUBLE,
        applies_to=Scope.CONSUMER,
        unit="%",
        bar_unit="%",
        aliases=("nack", "reject_share"),
        title="Rejected (%)",
        tag="rej",
        metric="reject_percent",
        quiet=True,
    ),
    SteerableSetting(
        Setting.POISON,
        "poison",
        float,
        0,
        100,
        "share of messages marked poison at publish, in percent: every consumer rejects "
        "them at every delivery (a queue's delivery limit dead-letters them)",
        label="poison share",
        short="poison",
        key="",
        step=Step.HALVE_DOUBLE,
        applies_to=Scope.PUBLISHER,
        unit="%",
        bar_unit="%",
        aliases=("poison_share",),
        title="Poison (%)",
        tag="poison",
        metric="poison_percent",
        quiet=True,
    ),
    SteerableSetting(
        Setting.MESSAGE_SIZE,
        "message_size",
        int,
        28,
        64 * 1024 * 1024,
        "message body size; at least 28 bytes, the body's publisher id, sequence and send times",
        label="message size",
        short="size",
        key="",
        step=Step.HALVE_DOUBLE,
        applies_to=Scope.PUBLISHER,
        unit="bytes",
        bar_unit=" B",
        aliases=("size",),
        default=1000,
        title="Message size (bytes)",
        tag="size",
        metric="message_size_bytes",
        quiet=True,
    ),
)

COMMANDS: tuple[SteeringCommand, ...] = (
    SteeringCommand(Setting.PAUSE, "pause publishing", Scope.PUBLISHER, key="space", paused=True),
    SteeringCommand(
        Setting.RESUME, "resume publishing", Scope.PUBLISHER, key="space", paused=False
    ),
    SteeringCommand(Setting.MARK, "mark a phase", Scope.RUN, key="m", takes_label=True),
    SteeringCommand(
        Setting.BROKER,
        "set a broker setting on the nodes flowdeck runs, or reconnect the run's clients",
        Scope.BROKER,
    ),
)


def new_setting(name: str) -> Setting:
    """The :class:`Setting` of a row added from outside this module (``Setting(name)`` finds
    it from then on, in this process): a lower-case word of letters, digits and ``_``."""
    try:
        return Setting(name)
    except ValueError:
        pass
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"a setting's name is a lower-case word (letters, digits, _), got {name!r}"
        )
    member = str.__new__(Setting, name)
    member._name_ = name.upper()
    member._value_ = name
    Setting._value2member_map_[name] = member
    return member


def _added_rows(spec: str) -> tuple[SteerableSetting, ...]:
    """The rows named by :data:`SETTINGS_ENV`'s value ``spec``."""
    rows: list[SteerableSetting] = []
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        module_name, _, attribute = entry.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attribute or "SETTINGS")
        except (ImportError, AttributeError) as exc:
            raise RuntimeError(
                f"{SETTINGS_ENV}: {entry!r} names no settings ({exc}); give module:attribute"
            ) from exc
        for row in found if isinstance(found, list | tuple) else (found,):
            if not isinstance(row, SteerableSetting):
                raise RuntimeError(f"{SETTINGS_ENV}: {entry!r} gives {row!r}, not a setting row")
            rows.append(row)
    return tuple(rows)


_BUILT_IN = STEERABLE
STEERABLE = (*_BUILT_IN, *_added_rows(os.environ.get(SETTINGS_ENV, "")))
_taken = [word for row in STEERABLE for word in (row.field, *row.aliases)]
if len(set(_taken)) < len(_taken):
    raise RuntimeError(
        f"{SETTINGS_ENV}: a setting's name or alias is taken twice: "
        + ", ".join(sorted({w for w in _taken if _taken.count(w) > 1}))
    )

#: Each numeric setting's row, by setting.
BY_SETTING: dict[Setting, SteerableSetting] = {row.setting: row for row in STEERABLE}
#: Each command's row, by setting.
COMMAND_BY_SETTING: dict[Setting, SteeringCommand] = {row.setting: row for row in COMMANDS}
#: Each numeric setting's row, by its RunSpec field.
BY_FIELD: dict[str, SteerableSetting] = {row.field: row for row in STEERABLE}
#: Every other word operators type for a setting, mapped to the setting.
ALIASES: dict[str, Setting] = {
    **{alias: row.setting for row in STEERABLE for alias in row.aliases},
    **{alias: command.setting for command in COMMANDS for alias in command.aliases},
}


def steerable(setting: Setting) -> SteerableSetting | None:
    """The row of a setting that carries a number; None for pause, resume and mark."""
    return BY_SETTING.get(setting)
