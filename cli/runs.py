"""``flowdeck runs``: the runs going on on this host, with their control endpoints."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from flowdeck.cli import COMMANDS
from flowdeck.cli.common import print_table
from flowdeck.collectors import printable
from flowdeck.engine import RUNS_DIR_ENV, running_runs, runs_dir


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "runs",
        help=COMMANDS["runs"],
        description=(
            "The runs going on on this host (headless or in a cockpit), from the endpoint "
            f"files in ${RUNS_DIR_ENV}, else {runs_dir()}. Entries of processes that are "
            "gone are removed."
        ),
    )
    parser.add_argument("--json", action="store_true", help="one JSON list, tokens left out")
    parser.set_defaults(handler=runs_command)


def runs_command(args: argparse.Namespace) -> int:
    runs = running_runs()
    if args.json:
        print(
            json.dumps(
                [{k: v for k, v in r.to_json().items() if k != "token"} for r in runs], indent=2
            )
        )
        return 0
    if not runs:
        print("no run is going on")
        return 0
    rows = [
        (
            printable(r.run_id),
            printable(r.name),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started)),
            r.url,
            str(r.pid),
        )
        for r in runs
    ]
    print_table(("id", "name", "started", "endpoint", "pid"), rows)
    return 0
