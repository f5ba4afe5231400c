"""What several subcommands share: a RunSpec from flags, and which broker to use.

Every RunSpec field is a flag with the same name (dashes for underscores), built from
``engine.spec.FIELDS`` so a new field is a new flag. Values are taken as text and checked
here or by RunSpec, so a bad one is a SpecError naming the field, the value and the range
(one line, exit 2) instead of argparse's usage dump.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowdeck.collectors import printable
from flowdeck.engine import (
    DEFAULT_PRESET,
    FIELDS,
    RunSpec,
    ScheduleStep,
    SpecError,
    format_number,
    load_spec_file,
    management_password,
    preset,
    schedule_step,
    spec_from_mapping,
)

if TYPE_CHECKING:
    pass

#: Scale of the default preset when ``flowdeck run`` gets no spec at all: fits 2 cores.
DEFAULT_SCALE = 0.05

#: Fields that get a special flag instead of the generic one.
_SPECIAL = {"duration", "queue_args", "schedule", "thresholds"}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str, field: str = "duration") -> float:
    """Seconds from ``30``, ``30s``, ``5m``, ``1.5h``."""
    match = _DURATION.match(text)
    if not match:
        raise SpecError(field, f"{field} must be seconds like 30, 30s, 5m or 1h, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


#: Longest drain taken: a consumer still behind after a day is a run to look at, not wait on.
MAX_DRAIN_SECONDS = 24 * 3600.0


def parse_drain(text: str) -> float:
    """``--drain``: seconds (``5``, ``30s``, ``2m``) within 0..a day."""
    seconds = parse_duration(text, "drain")
    if not 0 <= seconds <= MAX_DRAIN_SECONDS:
        raise SpecError(
            "drain", f"drain must be 0..{MAX_DRAIN_SECONDS:.0f} s (a day), got {text.strip()}"
        )
    return seconds


def parse_number(field: str, text: str) -> int | float:
    """A flag's number, whole for whole-number fields."""
    kind = FIELDS[field].kind
    try:
        value = float(text)
    except ValueError:
        raise SpecError(field, f"{field} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise SpecError(field, f"{field} must be a finite number, got {text!r}")
    if kind is int:
        if not value.is_integer():
            raise SpecError(field, f"{field} must be a whole number, got {text!r}")
        return int(value)
    return value


def parse_scalar(text: str) -> int | float | bool | str:
    """A queue argument's value: a number, true/false, or text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    return text


def parse_queue_args(items: list[str]) -> dict[str, int | float | bool | str]:
    args: dict[str, int | float | bool | str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SpecError(
                "queue_args",
                f"queue_args must be NAME=VALUE (e.g. x-max-length=10000), got {item!r}",
            )
        args[name.strip()] = parse_scalar(value.strip())
    return args


def parse_step(text: str, field: str = "change") -> ScheduleStep:
    """``AT:CHANGE`` (``30:inflight=200``, ``1m:mark "warm"``, ``20s:fault kill 2``) as a
    schedule step."""
    at_text, sep, change_text = text.partition(":")
    if not sep:
        raise SpecError(field, f"{field} must be AT:CHANGE like 30s:inflight=200, got {text!r}")
    at = parse_duration(at_text, field)
    try:
        return schedule_step(at, change_text)
    except SpecError as exc:
        raise SpecError(field, f"{field} {text!r}: {exc.message}") from None


def parse_schedule_flag(text: str) -> list[ScheduleStep]:
    """``--schedule "0:inflight=10; 60:inflight=20"``: steps separated by ``;``."""
    return [parse_step(part.strip(), "schedule") for part in text.split(";") if part.strip()]


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset``, ``--spec``, ``--scale`` and one flag per RunSpec field."""
    source = parser.add_argument_group("what to run")
    source.add_argument("--preset", metavar="NAME", help="a built-in preset (flowdeck presets)")
    source.add_argument("--spec", metavar="FILE", help="a TOML spec file")
    source.add_argument(
        "--scale", metavar="F", help="shrink counts proportionally (e.g. 0.05) to fit a machine"
    )
    source.add_argument(
        "--duration",
        metavar="TIME",
        help="how long the run lasts: 30, 30s, 5m, 1h; stretches a preset's schedule to fit",
    )
    source.add_argument(
        "--step",
        metavar="TIME",
        help="how long each phase of the schedule lasts (60s: a 6-step sweep runs 6 min); "
        "the run's duration follows from the steps",
    )
    source.add_argument(
        "--change",
        metavar="AT:CHANGE",
        action="append",
        default=[],
        help="add a timed change, e.g. 30s:inflight=200 or '1m:mark \"warm\"' (repeatable)",
    )
    fields_group = parser.add_argument_group("spec fields (override the preset or file)")
    for name, info in FIELDS.items():
        if name in ("duration", "thresholds"):  # thresholds: flowdeck run --threshold
            continue
        help_text = info.help.replace("%", "%%")  # argparse %-formats help
        if info.low is not None and info.high is not None:
            unit = f" {info.unit}".replace("%", "%%") if info.unit else ""
            help_text += f" ({format_number(info.low)}..{format_number(info.high)}{unit})"
        if info.choices:
            help_text += f" (one of {info.named_choices})"
        if name == "queue_args":
            fields_group.add_argument(
                flag(name),
                dest=name,
                metavar="NAME=VALUE",
                action="append",
                default=None,
                help=help_text + " (repeatable)",
            )
        elif name == "schedule":
            fields_group.add_argument(
                flag(name),
                dest=name,
                metavar="STEPS",
                default=None,
                help="timed changes replacing the spec's: '0:inflight=10; 60:inflight=20'",
            )
        elif info.kind is bool:
            fields_group.add_argument(
                flag(name),
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            fields_group.add_argument(
                flag(name), dest=name, metavar="VALUE", default=None, help=help_text
            )


def flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields given as flags, converted (duration and schedule excepted)."""
    values: dict[str, Any] = {}
    for name, info in FIELDS.items():
        if name in _SPECIAL:
            continue
        raw = getattr(args, name, None)
        if raw is None:
            continue
        if info.kind in (int, float):
            values[name] = parse_number(name, raw)
        else:
            values[name] = raw
    if getattr(args, "queue_args", None):
        values["queue_args"] = parse_queue_args(args.queue_args)
    return values


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """The run's spec: preset or file (or the default preset), scaled, then the flags,
    then the duration (stretching the schedule) and the added changes.
    """
    if args.preset and args.spec:
        raise SpecError("preset", "give either --preset or --spec, not both")
    scale = None
    if args.scale is not None:
        try:
            scale = float(args.scale)
        except ValueError:
            raise SpecError("scale", f"scale must be a number, got {args.scale!r}") from None
    values = flag_values(args)
    spec: RunSpec
    if args.spec:
        spec = load_spec_file(Path(args.spec), scale)
    else:
        name = args.preset
        if name is None and not values:
            name = DEFAULT_PRESET
            scale = DEFAULT_SCALE if scale is None else scale
        spec = preset(name) if name else spec_from_mapping({})
        if scale is not None:
            spec = spec.scaled(scale)
    if values:
        spec = spec_from_mapping(values, spec)
    return with_timing(spec, args)


def with_timing(spec: RunSpec, args: argparse.Namespace) -> RunSpec:
    """The spec with the flags about time: ``--duration`` (the spec's schedule stretched
    to fit), ``--schedule`` and ``--change`` (at the times they say), and ``--step`` (each
    phase of the resulting schedule that long, the duration following). SpecError when
    both ``--step`` and ``--duration`` are given."""
    step = getattr(args, "step", None)
    if step is not None and args.duration is not None:
        raise SpecError(
            "step",
            "give --step (each phase's length; the duration follows) or --duration, not both",
        )
    if args.duration is not None:
        spec = spec.with_duration(parse_duration(args.duration))  # RunSpec checks the range
    steps = list(spec.schedule)
    if getattr(args, "schedule", None) is not None:
        steps = parse_schedule_flag(args.schedule)
    steps += [parse_step(text) for text in getattr(args, "change", None) or []]
    if steps != list(spec.schedule):
        if step is not None:  # the steps' times are re-spaced below: any within the run
            spec = replace(spec, duration=max([spec.duration, *(s.at + 1 for s in steps)]))
        spec = spec_from_mapping({"schedule": sorted(steps, key=lambda s: s.at)}, spec)
    if step is not None:
        spec = spec.with_step(parse_duration(step, "step"))
    return spec


def sessions_dir(given: Path | str | None) -> Path:
    """Where sessions are: ``given`` (``--sessions-dir``), else ``$FLOWDECK_SESSIONS_DIR``,
    else the user's data directory. Something there that is not a directory is refused
    (exit 2): a file given by mistake would read as "no sessions" and take no recording.
    """
    from flowdeck.engine import SESSIONS_DIR_ENV, default_sessions_root

    root = Path(given).expanduser() if given else default_sessions_root()
    source = "--sessions-dir" if given else f"${SESSIONS_DIR_ENV}"
    if root.exists() and not root.is_dir():
        raise SpecError(
            "sessions_dir",
            f"{source} {printable(str(root))} is not a directory; give the directory "
            "sessions are recorded in",
        )
    return root


def print_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: Collection[int] = ()
) -> None:
    """A plain table on stdout (rich.table): no borders, two spaces between columns, the
    ``right`` columns right-aligned, cells taken as text (a ``[`` in a name is no markup),
    never wrapped or cut however narrow the terminal or pipe (a width of its own)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_edge=False)
    for index, title in enumerate(header):
        justify = "right" if index in right else "left"
        table.add_column(Text(title), justify=justify, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console = Console(width=1_000_000, no_color=True, highlight=False, soft_wrap=True)
    with console.capture() as captured:
        console.print(table)
    for line in captured.get().splitlines():
        print(line.rstrip())


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    """``--management-url`` and ``--prometheus-url`` are spec fields; these are not."""
    group = parser.add_argument_group("broker")
    group.add_argument(
        "--management-user", metavar="USER", help="management API user (default: the uri's)"
    )
    group.add_argument(
        "--management-password",
        metavar="PASSWORD",
        help="management API password (shows in ps: prefer the file or "
        "FLOWDECK_MANAGEMENT_PASSWORD; default: the AMQP password)",
    )
    group.add_argument(
        "--management-password-file",
        metavar="FILE",
        help="read the management API password from the first line of FILE",
    )


def management_password_from(args: argparse.Namespace) -> str | None:
    """The management password of ``--management-password-file``,
    ``FLOWDECK_MANAGEMENT_PASSWORD`` or ``--management-password`` (in that order, see
    engine.credentials); None means the AMQP password."""
    return management_password(
        getattr(args, "management_password", None),
        password_file=getattr(args, "management_password_file", None),
    )
