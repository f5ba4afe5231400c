"""``flowdeck attach [RUN|URL]``: the cockpit on a run that is already going.

The run goes on in its own process (a headless ``flowdeck run``, or another cockpit); this
one follows it through its control endpoint with the full dashboard and the same steering
keys. Quitting (Ctrl+Q) only detaches: the run goes on, and ``s`` is what stops it.
"""

from __future__ import annotations

import argparse
from typing import Any

from flowdeck.cli import COMMANDS
from flowdeck.cli.steer import add_endpoint_arguments, endpoint_from
from flowdeck.engine import FlowdeckError, RemoteRun


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "attach",
        help=COMMANDS["attach"],
        description=(
            "Open the cockpit on a run that is going on: its dashboard, events and steering "
            "keys, through the run's control endpoint. RUN is a run id as `flowdeck runs` "
            "lists it (a unique prefix will do), its session directory or the endpoint's URL; "
            "left out, the only run going on. Ctrl+Q detaches and the run goes on."
        ),
    )
    parser.add_argument(
        "run", nargs="?", metavar="RUN|URL", help="which run (default: the only one)"
    )
    add_endpoint_arguments(parser)
    parser.set_defaults(handler=attach_command)


def attach_command(args: argparse.Namespace) -> int:
    remote = RemoteRun.connect(endpoint_from(args.run, args))
    if remote.state == "ended":
        raise FlowdeckError(f"run {remote.run_id} has ended; flowdeck sessions show it")
    from flowdeck.tui.app import FlowdeckApp

    FlowdeckApp(control=remote).run()
    try:
        state = remote.client.status()["state"]
    except FlowdeckError:
        state = "ended"
    if state in ("running", "starting"):
        print(f"detached from run {remote.run_id}; it goes on (flowdeck runs lists it)")
    return 0
