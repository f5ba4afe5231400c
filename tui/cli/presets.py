"""`flowdeck presets`: the built-in specs, one line each, starting with the name."""

from __future__ import annotations

import argparse
from typing import Any

from flowdeck.engine import DEFAULT_PRESET, PRESETS, RunSpec


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "presets",
        help="list the built-in presets",
        description=(
            "One line per preset: its name, then what it runs. Run one with "
            "`flowdeck run --preset NAME --scale F`."
        ),
    )
    parser.set_defaults(handler=presets_command)


def describe(spec: RunSpec) -> str:
    """What a preset runs, in one line."""
    steps = f", {len(spec.schedule)} timed steps" if spec.schedule else ""
    what = spec.description or (
        f"{spec.publishers} publishers x {spec.rate:g} msg/s, {spec.queues} "
        f"{spec.queue_type} queue(s), {spec.consumers} consumers"
    )
    return f"{what}; {spec.duration:g} s{steps}"


def presets_command(args: argparse.Namespace) -> int:
    del args
    width = max(len(name) for name in PRESETS)
    for name, spec in PRESETS.items():
        default = " (default)" if name == DEFAULT_PRESET else ""
        print(f"{name:<{width}}  {describe(spec)}{default}")
    return 0
