"""``flowdeck steer [RUN] CHANGE...``: change a running run from another shell.

The changes are the cockpit's own (``inflight=200``, ``prefetch=60``, ``publishers=+5``,
``pause``, ``mark "label"``), checked here before anything is sent, then asked of the
run's control endpoint in one request; each line says when it was in force.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from flowdeck.cli import COMMANDS, usage_error
from flowdeck.cli.common import sessions_dir
from flowdeck.collectors import printable
from flowdeck.engine import SpecError, parse_change

# The control client (httpx) loads once the changes are checked.
if TYPE_CHECKING:
    from flowdeck.engine import Endpoint


def add_endpoint_arguments(parser: argparse.ArgumentParser, default: Any = None) -> None:
    """How to reach a run given as a URL (steer and attach)."""
    group = parser.add_argument_group(
        "reaching a run by URL",
        "A run on this host is found by its id; one elsewhere by its endpoint's URL and token.",
    )
    group.add_argument(
        "--token",
        metavar="TOKEN",
        default=default,
        help="the run's token ($FLOWDECK_CONTROL_TOKEN)",
    )
    group.add_argument(
        "--token-file",
        metavar="FILE",
        default=default,
        help="a file holding the token, or the run's control.json (in its session directory)",
    )
    group.add_argument(
        "--ca-file", metavar="PEM", default=default, help="CA to trust for an https:// endpoint"
    )
    group.add_argument(
        "--sessions-dir",
        metavar="DIR",
        default=default,
        help="with no run named, the run started from this sessions directory (default: "
        "$FLOWDECK_SESSIONS_DIR, else the user's)",
    )


def add_wait_argument(parser: argparse.ArgumentParser, default: Any = 10.0) -> None:
    parser.add_argument(
        "--wait",
        metavar="SECONDS",
        type=float,
        default=default,
        help="how long to wait for each change to be in force (default 10, at most 30)",
    )


def options_among(words: list[str], args: argparse.Namespace, prog: str) -> list[str]:
    """The words without the options written among or after them (``steer URL
    --token-file F inflight=200``), those options set on ``args``."""
    late = argparse.ArgumentParser(prog=prog, add_help=False, exit_on_error=False)
    add_endpoint_arguments(late, argparse.SUPPRESS)
    add_wait_argument(late, argparse.SUPPRESS)
    try:
        found, rest = late.parse_known_args(words)
    except argparse.ArgumentError as exc:
        usage_error(prog, str(exc))
    unknown = [word for word in rest if word.startswith("--")]
    if unknown:
        usage_error(prog, f"unrecognized arguments: {' '.join(unknown)}")
    for name, value in vars(found).items():
        setattr(args, name, value)
    return rest


def endpoint_from(run: str | None, args: argparse.Namespace) -> Endpoint:
    """The endpoint of ``run``; with none named, of the only run started from this
    shell's sessions directory (another checkout's run is never steered by default)."""
    from flowdeck.engine import endpoint_for

    return endpoint_for(
        run,
        token=args.token,
        token_file=args.token_file,
        ca_file=args.ca_file,
        sessions_root=None if run else sessions_dir(args.sessions_dir),
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "steer",
        help=COMMANDS["steer"],
        description=(
            "Send changes to a running run (headless or in a cockpit) through its control "
            "endpoint. RUN is a run id as `flowdeck runs` lists it (a unique prefix will do), "
            "its session directory, or the endpoint's URL; left out, the only run started "
            "from this shell's sessions directory (with several, they are listed)."
        ),
    )
    parser.add_argument(
        "words",
        nargs=argparse.REMAINDER,
        metavar="[RUN] CHANGE",
        help="changes as the cockpit's = prompt takes them: inflight=200 prefetch=60 "
        "publishers=+5 pause resume 'mark \"label\"'",
    )
    add_wait_argument(parser)
    add_endpoint_arguments(parser)
    parser.set_defaults(handler=steer_command)


def split_run(words: list[str]) -> tuple[str | None, list[str]]:
    """The run and the changes: the first word names a run unless it reads as a change."""
    first = words[0]
    if first.startswith(("http://", "https://")) or len(words) > 1:
        try:
            parse_change(first)
        except SpecError:
            return first, words[1:]
    return None, words


def steer_command(args: argparse.Namespace) -> int:
    words = options_among(list(args.words), args, "flowdeck steer")
    if not words:
        raise SpecError("change", "no change given; e.g. flowdeck steer inflight=200")
    run, texts = split_run(words)
    if not texts:
        raise SpecError("change", "no change given; e.g. flowdeck steer inflight=200")
    if not 0 <= args.wait <= 30:
        raise SpecError("wait", f"--wait must be 0..30 seconds, got {args.wait:g}")
    for text in texts:
        parse_change(text)  # every change checked before the first is sent
    from flowdeck.engine import MAX_CHANGES, ControlClient, ControlRefused

    client = ControlClient(endpoint_from(run, args))
    late = 0
    for start in range(0, len(texts), MAX_CHANGES):
        batch = texts[start : start + MAX_CHANGES]
        try:
            answers = client.changes(batch, wait=args.wait)  # one request for them all
        except ControlRefused as exc:
            about = f"{batch[0]}: " if len(batch) == 1 else ""
            print(f"flowdeck: {printable(about + exc.message)}", file=sys.stderr)
            return 2 if exc.status < 500 else 1
        for text, answer in zip(batch, answers, strict=True):
            change = printable(str(answer.get("change") or text))
            if answer.get("in_force"):
                after = answer.get("in_force_after_ms", 0)
                print(f"{change} in force after {after} ms", flush=True)
            else:
                late += 1
                print(
                    f"{change} asked (change #{answer.get('id')}), "
                    f"not in force after {args.wait:g} s",
                    flush=True,
                )
    return 1 if late else 0
