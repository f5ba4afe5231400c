"""`flowdeck import-perftest`: a PerfTest command line as a flowdeck spec file.

Prints the TOML spec equivalent to the given PerfTest options (save it with ``> FILE`` and
run it with ``flowdeck run --spec FILE``). Options flowdeck cannot honour are refused in one line
(exit 2). Also home of ``--perftest`` for ``flowdeck run``: :func:`add_perftest_option`
and :func:`spec_from_run_args`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import tomli_w

from flowdeck.cli import COMMANDS
from flowdeck.cli.common import (
    flag_values,
    spec_from_args,
    with_timing,
)
from flowdeck.collectors import printable
from flowdeck.engine import (
    RunSpec,
    SpecError,
    load_spec_file,
    perftest_words,
    preset,
    spec_from_mapping,
    spec_from_perftest,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "import-perftest",
        help=COMMANDS["import-perftest"],
        description=(
            "Translate RabbitMQ PerfTest options into a flowdeck spec file. Give the options "
            "as one quoted argument, after --, or as @FILE (a file holding the line), e.g. "
            'flowdeck import-perftest "-x 20 -y 20 -u q -qq -r 1000 -c 100". '
            "Options flowdeck cannot honour are named and refused. The mapping is in "
            "docs/perftest.md."
        ),
    )
    parser.add_argument(
        "perftest",
        nargs=argparse.REMAINDER,
        metavar="OPTIONS",
        help="PerfTest options, e.g. '-x 2 -y 2 -r 100 -z 60'",
    )
    parser.set_defaults(handler=import_command)


def spec_toml(spec: RunSpec) -> str:
    """The spec as a TOML spec file ``load_spec_file`` reads back to the same spec."""
    values = spec.to_mapping()
    if not values["schedule"]:
        del values["schedule"]
    return tomli_w.dumps(values)


def import_command(args: argparse.Namespace) -> int:
    words = [w for w in args.perftest if w != "--"]
    if not words:
        raise SpecError("perftest", "give the PerfTest options, e.g. '-x 2 -y 2 -r 100 -z 60'")
    text = perftest_words(words[0] if len(words) == 1 else words)  # @FILE: the file's line
    spec = spec_from_perftest(text)
    given = printable(text if isinstance(text, str) else " ".join(text))
    header = (
        f"# flowdeck spec from PerfTest: {given}\n"
        "# save it to a file and run it with: flowdeck run --spec FILE\n"
    )
    sys.stdout.write(header + spec_toml(spec))
    return 0


# -- flowdeck run --perftest ----------------------------------------------------------------


def add_perftest_option(parser: argparse.ArgumentParser) -> None:
    """``--perftest "OPTIONS"`` on a command that runs a spec."""
    parser.add_argument(
        "--perftest",
        metavar="OPTIONS",
        help=(
            "run what a PerfTest command line runs, e.g. --perftest '-x 20 -y 20 -qq -r 1000 "
            "-c 100 -z 300' (or @FILE: the line saved in FILE); --preset/--spec give what "
            "PerfTest does not say, flags refine it"
        ),
    )


def spec_from_run_args(args: argparse.Namespace) -> RunSpec:
    """The run's spec with ``--perftest`` taken into account.

    Without it this is ``common.spec_from_args``. With it: the preset or spec file (if
    any) is the base for what PerfTest does not describe, the PerfTest line sets the load,
    then the field flags, ``--duration``, ``--schedule`` and ``--change`` refine it, as
    they refine a preset.
    """
    text = getattr(args, "perftest", None)
    if not text:
        return spec_from_args(args)
    if args.preset and args.spec:
        raise SpecError("preset", "give either --preset or --spec, not both")
    base: RunSpec | None = None
    if args.spec:
        base = load_spec_file(Path(args.spec))
    elif args.preset:
        base = preset(args.preset)
    spec = spec_from_perftest(text, base)
    if args.scale is not None:
        try:
            spec = spec.scaled(float(args.scale))
        except ValueError:
            raise SpecError("scale", f"scale must be a number, got {args.scale!r}") from None
    values = flag_values(args)
    if values:
        spec = spec_from_mapping(values, spec)
    return with_timing(spec, args)
