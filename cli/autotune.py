"""``flowdeck autotune SETTING [RUN]``: start the autopilot on a running run.

The run may be headless or in a cockpit, here or elsewhere: the autopilot runs in the run's
own process (through its control endpoint, as the cockpit's ``o`` does for a run it
started), from where the run is now: it waits out a draining backlog, steps the setting,
judges each step by the run's own figures and leaves the run at the report's
recommendation. This command prints what it says and ends with its choice;
``flowdeck autotune stop [RUN]`` stops it, ``flowdeck autotune status [RUN]`` shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from flowdeck.cli import COMMANDS
from flowdeck.cli.common import parse_duration
from flowdeck.cli.steer import add_endpoint_arguments, endpoint_from
from flowdeck.collectors import printable
from flowdeck.engine import SpecError

if TYPE_CHECKING:
    from flowdeck.engine import ControlClient

#: The words besides a setting's name.
ACTIONS = ("stop", "status")
#: Exit code when the search ended without a value (stopped, a bound passed first, the run
#: ended): the run goes on, or went on, at the value in force.
NO_CHOICE = 3


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "autotune",
        help=COMMANDS["autotune"],
        description=(
            "Start the autopilot on a running run (headless or in a cockpit) through its "
            "control endpoint. SETTING is inflight, prefetch or ack_every (the best value: "
            "what the report recommends on the run's session) or rate (the highest rate the "
            "broker sustains for the spec); `stop` stops a search, `status` shows it. RUN as "
            "for flowdeck steer (left out: the only run started from this shell's sessions "
            "directory). Follows the search and prints what it says; exits 0 with a choice, "
            f"{NO_CHOICE} without one."
        ),
    )
    parser.add_argument("setting", metavar="SETTING|stop|status")
    parser.add_argument("run", nargs="?", metavar="RUN")
    parser.add_argument(
        "--max-p99", metavar="TIME", help="stop at a step whose e2e p99 is above this (100ms)"
    )
    parser.add_argument(
        "--max-backlog", metavar="MESSAGES", type=int, help="stop when more are ready"
    )
    parser.add_argument(
        "--hold", metavar="TIME", help="hold each step at least this long (default 6s)"
    )
    parser.add_argument(
        "--then",
        choices=("stay", "stop"),
        default="stay",
        help="when done: stay at the choice (default) or stop the run there",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="start it and return; its steps show in the run's events (the cockpit's log)",
    )
    add_endpoint_arguments(parser)
    parser.set_defaults(handler=autotune_command)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    max_p99 = args.max_p99
    if max_p99 is not None and max_p99.strip().replace(".", "", 1).isdigit():
        max_p99 += "ms"
    options = {
        "max_p99_ms": None if max_p99 is None else 1e3 * parse_duration(max_p99, "max p99"),
        "max_backlog": args.max_backlog,
        "hold_s": None if args.hold is None else parse_duration(args.hold, "hold"),
        "then": args.then,
    }
    if options["max_p99_ms"] == 0 or options["hold_s"] == 0:
        raise SpecError("autotune", "--max-p99 and --hold must be more than 0")
    if args.max_backlog is not None and args.max_backlog < 0:
        raise SpecError("autotune", f"--max-backlog must be 0 or more, got {args.max_backlog}")
    return options


def autotune_command(args: argparse.Namespace) -> int:
    word = args.setting.strip().lower().replace("-", "_")
    from flowdeck.engine import Autopilot, ControlClient, ControlRefused

    if word not in ACTIONS:
        names = [s.value for s in Autopilot.TUNABLE]
        if word not in names:
            raise SpecError(
                "autotune", f"the autopilot tunes {', '.join(names)}; got {args.setting!r}"
            )
        options = _options(args)
    client = ControlClient(endpoint_from(args.run, args))
    try:
        if word == "status":
            return _print_state(client.autotune_state(), final=False)
        if word == "stop":
            return _print_state(client.stop_autotune(), final=True)
        state = client.autotune(word, **options)
    except ControlRefused as exc:
        print(f"flowdeck: {printable(exc.message)}", file=sys.stderr)
        return 2 if exc.status < 500 else 1
    print(f"autotune {state['setting']} started ({state['state']})", flush=True)
    if args.detach:
        return 0
    try:
        return asyncio.run(_follow(client))
    except KeyboardInterrupt:
        print(
            "stopped following; the autopilot goes on in the run (flowdeck autotune stop ends it)",
            file=sys.stderr,
        )
        return 130


async def _follow(client: ControlClient) -> int:
    """Print what the autopilot says as the run's events carry it, until it is done."""
    from flowdeck.engine import ControlRefused

    seen = 0
    async for kind, data in client.stream():
        if kind == "summary":
            break
        if kind != "event" or not str(data.get("message", "")).startswith("autotune"):
            continue
        try:
            state = await client.acall("GET", "/autotune")
        except ControlRefused:
            continue
        said = state.get("said", [])
        # The stream replays recent events first: print each thing said once, in order.
        for line in said[seen:] if len(said) > seen else ():
            print(printable(line), flush=True)
        seen = max(seen, len(said))
        if not state.get("active"):
            return _print_state(state, final=True, said=False)
    try:
        state = client.autotune_state()
    except ControlRefused:
        print("the run ended before the autopilot said its choice", file=sys.stderr)
        return NO_CHOICE
    return _print_state(state, final=True, said=False)


def _print_state(state: dict[str, Any], *, final: bool, said: bool = True) -> int:
    lines = state.get("said", []) if said else []
    for line in lines[-5:]:
        print(printable(line))
    chosen = state.get("chosen")
    word = state.get("setting", "?")
    if not final:
        print(f"autotune {word}: {state.get('state')}, {state.get('steps', 0)} step(s)")
        return 0
    reasoning = state.get("reasoning") or []
    if reasoning:
        print(printable(reasoning[-1]))
    if chosen is None:
        print(f"autotune {word} ended without a choice ({state.get('state')})")
        return NO_CHOICE
    shown = f"{chosen:g}"
    print(f"autotune {word}={shown} chosen")
    return 0
