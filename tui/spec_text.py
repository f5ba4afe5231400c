"""RunSpec field values as the launch form's text, and back.

Numbers and words read as typed; the table and list fields (``queue_args``, ``schedule``)
use TOML inline syntax, the same as a spec file, so what works in one works in the other.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

from flowdeck.engine import FIELDS, RunSpec, SpecError, format_number


def toml_inline(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return format_number(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(str(k))} = {toml_inline(v)}" for k, v in value.items())
        return f"{{ {inner} }}" if inner else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_inline(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def field_text(name: str, value: Any) -> str:
    """What the form shows for a field's value."""
    kind = FIELDS[name].kind
    if kind in (dict, list):
        return toml_inline(value)
    if kind in (int, float):
        return format_number(value)
    return str(value)


def field_value(name: str, text: str) -> Any:
    """The field's value from what was typed; SpecError naming the field if it cannot be."""
    info = FIELDS[name]
    text = text.strip()
    if info.kind is str:
        return text
    if info.kind in (dict, list):
        empty: Any = {} if info.kind is dict else []
        if not text:
            return empty
        try:
            return tomllib.loads(f"value = {text}")["value"]
        except tomllib.TOMLDecodeError as exc:
            example = (
                '{ "x-max-length" = 10000 }'
                if info.kind is dict
                else '[{ at = 60, change = "inflight=200" }]'
            )
            raise SpecError(name, f"{name} is not TOML ({exc}); e.g. {example}") from None
    try:
        number = float(text)
    except ValueError:
        raise SpecError(name, f"{name} must be a number, got {text!r}") from None
    if info.kind is int:
        if not number.is_integer():
            raise SpecError(name, f"{name} must be a whole number, got {text!r}")
        return int(number)
    return number


def what_it_runs(spec: RunSpec) -> str:
    """A spec in one line: queues, clients, rate, windows, duration and its schedule's first
    steps (the launch form's and the tour intro's "runs:")."""
    rate = f"{spec.rate:g} msg/s" if spec.rate else "as fast as possible"
    lazy = " lazy" if spec.lazy else ""
    parts = [
        f"{spec.queues} {spec.queue_type}{lazy} queue{'s' if spec.queues != 1 else ''}",
        f"{spec.publishers} publisher{'s' if spec.publishers != 1 else ''} x {rate}",
        f"{spec.consumers} consumer{'s' if spec.consumers != 1 else ''}",
        f"{spec.message_size} B messages",
        f"in-flight {spec.inflight or 'no limit'}",
        f"prefetch {spec.prefetch or 'unlimited'}",
        f"ack every {spec.ack_every}",
        f"{spec.duration:g} s",
    ]
    if spec.schedule:
        steps = ", ".join(f"{s.at:g}s {s.change.describe()}" for s in spec.schedule[:6])
        more = "…" if len(spec.schedule) > 6 else ""
        parts.append(f"schedule: {steps}{more}")
    return "; ".join(parts)
