"""`flowdeck completion bash|zsh|tcsh`: a shell completion script for every command and flag.

The script is generated from the same argparse parser that ``flowdeck`` runs (by shtab),
so a new flag completes as soon as it exists; the values that are known complete too:
preset names, enumerated spec fields (``--queue-type``, ``--leader-locator``, ...),
``--autotune``'s settings, and session ids (from ``flowdeck sessions list --ids``).
Install it, e.g. for bash::

    flowdeck completion bash > ~/.local/share/bash-completion/completions/flowdeck

or for zsh, into a directory on ``$fpath``::

    flowdeck completion zsh > ~/.zfunc/_flowdeck
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flowdeck.cli import COMMANDS
from flowdeck.engine import FlowdeckError

SHELLS = ("bash", "zsh", "tcsh")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "completion",
        help=COMMANDS["completion"],
        description=(
            "Print a completion script for flowdeck's commands and flags. bash: "
            "flowdeck completion bash > ~/.local/share/bash-completion/completions/flowdeck; "
            "zsh: flowdeck completion zsh > ~/.zfunc/_flowdeck (with ~/.zfunc on $fpath)."
        ),
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    parser.set_defaults(handler=completion_command)


def completion_script(shell: str) -> str:
    try:
        import shtab
    except ImportError:
        raise FlowdeckError("shell completion needs the shtab package: pip install shtab") from None
    from flowdeck.cli import build_parser

    parser: argparse.ArgumentParser = build_parser()
    _complete_values(parser, shtab)
    script: str = shtab.complete(parser, shell=shell)
    return script


def _words(name: str, words: list[str]) -> dict[str, Any]:
    """A shtab completion offering ``words`` (a preset name, an enumerated value)."""
    joined = " ".join(words)
    return {
        "bash": f"_flowdeck_{name}_words",
        "zsh": f"({joined})",
        "tcsh": f"({joined})",
        "preamble": {"bash": f'\n_flowdeck_{name}_words() {{ compgen -W "{joined}" -- "$1"; }}\n'},
    }


def _complete_values(parser: argparse.ArgumentParser, shtab: Any) -> None:
    """Give the flags whose values are known their words: preset names, every spec field
    with choices (--queue-type, --leader-locator, ...), the settings --autotune searches;
    and session ids (asked of ``flowdeck sessions list --ids`` as the user types)."""
    from flowdeck.engine import FIELDS, PRESETS, Autopilot

    known: dict[str, Any] = {
        "preset": _words("preset", list(PRESETS)),
        "autotune": _words("autotune", [s.value for s in Autopilot.TUNABLE]),
        "session_id": shtab.cmd("flowdeck sessions list --ids"),
        "sessions": shtab.cmd("flowdeck sessions list --ids"),
    }
    for name, info in FIELDS.items():
        if info.choices:
            known[name] = _words(name, [choice for choice in info.choices if choice])
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _complete_values(sub, shtab)
        elif action.dest in known:
            action.complete = known[action.dest]  # type: ignore[attr-defined]


def completion_command(args: argparse.Namespace) -> int:
    sys.stdout.write(completion_script(args.shell))
    return 0
