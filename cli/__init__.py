"""The ``flowdeck`` command line.

Each subcommand lives in its own module here with a ``register(subparsers)`` function that
adds its parser and sets ``handler``; a handler returns the exit code. Textual is imported
only when the app is opened, so headless runs start fast and work without it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from flowdeck.collectors import printable
from flowdeck.engine import FlowdeckError, SpecError

#: Subcommand modules, in the order ``flowdeck --help`` lists them.
COMMAND_MODULES = (
    "run",
    "steer",
    "runs",
    "attach",
    "presets",
    "broker",
    "collect",
    "sessions",
    "report",
    "cockpit",
    "demo",
    "serve",
    "import_perftest",
    "completion",
)
#: The words that name a subcommand on the command line.
COMMAND_NAMES = frozenset(name.replace("_", "-") for name in COMMAND_MODULES)


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser, its errors one line and exit 2 like every other bad input
    instead of a usage dump (subcommand parsers are of the same class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The innermost subcommand parsed sets it last: whose words were not understood.
        self.set_defaults(command_prog=self.prog)

    def error(self, message: str) -> NoReturn:
        usage_error(self.prog, message)


def usage_error(prog: str, message: str) -> NoReturn:
    """Print an argument error as one line pointing at ``prog --help``; exit 2."""
    hint = ""
    # argparse takes a value starting with "-" (--queue-pattern -x) for an option.
    missing = re.fullmatch(r"argument (?:\S+/)?(--\S+): expected one argument", message)
    if missing:
        hint = f" (a value starting with '-' is given as {missing.group(1)}=VALUE)"
    print(f"{prog}: {printable(message)}{hint}; see {prog} --help", file=sys.stderr)
    sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="flowdeck",
        description="A live stress cockpit for RabbitMQ. With no command, opens the cockpit.",
    )
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"flowdeck.cli.{name}")
        module.register(subparsers)
    return parser


def _opens_cockpit(words: list[str]) -> bool:
    """True when no command is named, so the words are the cockpit's own options
    (``flowdeck --uri amqp://...`` opens the cockpit on that broker).
    """
    if not words or words[0] in ("-h", "--help", "--version"):
        return False
    return words[0].startswith("-") and not any(w in COMMAND_NAMES for w in words)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(words)
    except BrokenPipeError:
        # The reader went away (``flowdeck presets | head``): stop quietly, as Unix tools do.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _dispatch(words: list[str]) -> int:
    if words == ["--version"]:  # answer without building every subcommand's parser
        from flowdeck.cli.versions import print_versions

        print_versions()
        return 0
    parser = build_parser()
    if _opens_cockpit(words):
        words = ["cockpit", *words]
    args, unknown = parser.parse_known_args(words)
    if unknown:
        usage_error(args.command_prog, f"unrecognized arguments: {' '.join(unknown)}")
    if args.version:
        from flowdeck.cli.versions import print_versions

        print_versions()
        return 0
    if args.command is None:
        args = parser.parse_args(["cockpit"])
    try:
        code: int = args.handler(args)
    except SpecError as exc:
        print(f"flowdeck: {printable(exc.message)}", file=sys.stderr)
        return 2
    except FlowdeckError as exc:
        print(f"flowdeck: {printable(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
