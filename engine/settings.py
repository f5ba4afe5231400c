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

from dataclasses import dataclass
from enum import StrEnum


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
    #: The cockpit key that steps it down; its upper case steps it up.
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

    @property
    def name(self) -> str:
        return self.setting.value

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
