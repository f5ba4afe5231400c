"""`flowdeck presets`: the built-in specs, one line each, starting with the name."""

from __future__ import annotations

import argparse
from typing import Any

from flowdeck.cli import COMMANDS
from flowdeck.engine import DEFAULT_PRESET, FIGURES, PRESETS, RunSpec


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "presets",
        help=COMMANDS["presets"],
        description=(
            "One line per preset: its name, the seed figure it reproduces (fig N: figure N "
            "of the write-up on quorum queues and flow control), then what it runs. Run one "
            "with `flowdeck run --preset NAME --scale F`; `flowdeck run --matrix benchN` runs "
            "a benchmark's figures one after the other. The mirrored presets need a cluster "
            "(flowdeck broker start --nodes 3, or none given: flowdeck starts one)."
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
    figure_of = {f.preset: f.number for f in FIGURES.values()}
    for name, spec in PRESETS.items():
        default = " (default)" if name == DEFAULT_PRESET else ""
        figure = f"fig {figure_of[name]:<2}" if name in figure_of else ""
        print(f"{name:<{width}}  {figure:<6}  {describe(spec)}{default}")
    return 0
