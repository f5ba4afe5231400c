"""`flowdeck completion bash|zsh|tcsh`: a shell completion script for every command and flag.

The script is generated from the same argparse parser that ``flowdeck`` runs (by shtab),
so a new flag completes as soon as it exists. Install it, e.g. for bash::

    flowdeck completion bash > ~/.local/share/bash-completion/completions/flowdeck

or for zsh, into a directory on ``$fpath``::

    flowdeck completion zsh > ~/.zfunc/_flowdeck
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flowdeck.engine import FlowdeckError

SHELLS = ("bash", "zsh", "tcsh")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or tcsh)",
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
    script: str = shtab.complete(parser, shell=shell)
    return script


def completion_command(args: argparse.Namespace) -> int:
    sys.stdout.write(completion_script(args.shell))
    return 0
