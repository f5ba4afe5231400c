"""The ``flowdeck`` command line.

Each subcommand lives in its own module here with a ``register(subparsers)`` function that
adds its parser and sets ``handler``; a handler returns the exit code. Only the module of
the command given is loaded (the others are listed by their one-line help, from
:data:`COMMANDS`), and a module loads its heavy parts in its handler: ``flowdeck --help``,
``flowdeck run --help`` and an input error answer before the engine's clients, the broker
collectors or Textual are imported.
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
from flowdeck.engine import FlowdeckError, SpecError, did_you_mean

#: Each subcommand and its one line of help, in the order ``flowdeck --help`` lists them;
#: its module is ``flowdeck.cli.<name with _ for ->``.
COMMANDS: dict[str, str] = {
    "run": "run load headless: progress each second, then a summary",
    "steer": "change a running run from another shell; says when each change is in force",
    "autotune": "start the autopilot on a running run: search a setting from where it is now",
    "runs": "list the runs going on, with their control endpoints",
    "attach": "open the cockpit on a running run; quitting it leaves the run going",
    "presets": "list the built-in presets",
    "broker": "start, show or stop a private RabbitMQ node or cluster; lose one node of it",
    "collect": "print what the broker says (management API or Prometheus)",
    "sessions": "list, show, export and delete recorded sessions",
    "report": "turn recorded sessions into an HTML report with Markdown and CSV tables",
    "cockpit": "open the live cockpit (the default command)",
    "demo": "a guided tour for an audience: the seed's benchmark #2 live, big figures",
    "serve": "serve the cockpit (or, with --demo, the guided tour) to a web browser",
    "import-perftest": "print the flowdeck spec (TOML) equivalent to a PerfTest command line",
    "completion": "print a shell completion script (bash, zsh or tcsh)",
}
COMMAND_MODULES = tuple(name.replace("-", "_") for name in COMMANDS)
#: The words that name a subcommand on the command line.
COMMAND_NAMES = frozenset(COMMANDS)


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


def build_parser(words: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's in full, or, given the ``words`` to
    parse, only the one they name in full and the others by their help line."""
    parser = OneLineParser(
        prog="flowdeck",
        description="A live stress cockpit for RabbitMQ. With no command, opens the cockpit.",
    )
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = _command_of(words) if words is not None else None
    for name, help_line in COMMANDS.items():
        if words is None or name == named:
            module = importlib.import_module(f"flowdeck.cli.{name.replace('-', '_')}")
            module.register(subparsers)
        else:
            subparsers.add_parser(name, help=help_line, add_help=False)
    return parser


def _command_of(words: Sequence[str]) -> str | None:
    """The command the words name: the first that is not an option (``--version`` is the
    only top-level option, and takes no value)."""
    first = next((word for word in words if not word.startswith("-")), None)
    if first is not None and first not in COMMANDS:
        _unknown_command(first)
    return first


def _opens_cockpit(words: list[str]) -> bool:
    """True when no command is named, so the words are the cockpit's own options
    (``flowdeck --uri amqp://...`` opens the cockpit on that broker).
    """
    if not words or words[0] in ("-h", "--help", "--version"):
        return False
    return words[0].startswith("-") and not any(w in COMMAND_NAMES for w in words)


def _option_strings(parser: argparse.ArgumentParser, prog: str) -> list[str]:
    """The long options of the (sub)parser called ``prog``, for a "did you mean"."""
    if parser.prog == prog:
        return [o for action in parser._actions for o in action.option_strings if o[:2] == "--"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found = _option_strings(sub, prog)
                if found:
                    return found
    return []


def _unknown_command(word: str) -> NoReturn:
    close = did_you_mean(word, COMMANDS)
    usage_error(
        "flowdeck",
        f"unknown command {word!r}{close}; the commands are {', '.join(COMMANDS)}",
    )


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
    if _opens_cockpit(words):
        words = ["cockpit", *words]
    parser = build_parser(words or ["cockpit"])
    args, unknown = parser.parse_known_args(words)
    if unknown:
        close = ""
        flags = [word.split("=", 1)[0] for word in unknown if word.startswith("--")]
        if flags:
            close = did_you_mean(flags[0], _option_strings(parser, args.command_prog))
        usage_error(args.command_prog, f"unrecognized arguments: {' '.join(unknown)}{close}")
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
