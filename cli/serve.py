"""`flowdeck serve`: the cockpit (or the demo tour) in a web browser, for projecting.

textual-serve runs the app as a child process per browser tab and draws it in the page
with xterm.js over a websocket; the app is the terminal cockpit unchanged. It listens on
127.0.0.1 by default: whoever reaches the page drives a cockpit that can start and steer
load, and the page asks for no password.

The served command carries no broker URI (it would show in ``ps``): the child reads
``FLOWDECK_URI`` from this process's environment, as the demo does.
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import sys
from typing import Any

from flowdeck.cli import COMMANDS

#: The loopback address served on unless told otherwise.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help=COMMANDS["serve"],
        description=(
            "Serve the cockpit over HTTP with textual-serve, to open in a browser and project: "
            "each browser tab gets its own cockpit. Listens on 127.0.0.1 unless --host says "
            "otherwise; the page has no password, so keep it on loopback or a trusted network."
        ),
    )
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="serve the guided tour (flowdeck demo) instead of the cockpit",
    )
    parser.add_argument(
        "--scale", type=float, help="with --demo: the tour's scale (see flowdeck demo --help)"
    )
    parser.add_argument(
        "--public-url",
        help="the URL browsers use, when it is not http://HOST:PORT (behind a proxy)",
    )
    parser.set_defaults(handler=serve)


def served_command(args: argparse.Namespace) -> list[str]:
    """The command each browser tab runs: this Python's flowdeck, cockpit or demo."""
    command = [sys.executable, "-m", "flowdeck.cli"]
    if not args.demo:
        return [*command, "cockpit"]
    command.append("demo")
    if args.scale is not None:
        command += ["--scale", f"{args.scale:g}"]
    return command


def check_arguments(args: argparse.Namespace) -> str:
    """What is wrong with the arguments, in one line ("" when nothing is)."""
    if not 0 < args.port < 65536:
        return f"--port must be 1..65535, got {args.port}"
    if args.scale is not None and not args.demo:
        return "--scale goes with --demo (the cockpit's scale is set on its launch screen)"
    if args.scale is not None and not 0 < args.scale <= 100:
        return f"--scale must be in (0, 100], got {args.scale:g}"
    return ""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(args: argparse.Namespace) -> int:
    problem = check_arguments(args)
    if problem:
        print(f"flowdeck serve: {problem}", file=sys.stderr)
        return 2
    if not is_loopback(args.host):
        print(
            f"flowdeck serve: listening on {args.host}: anyone who reaches port {args.port} "
            "can start and steer load on your broker (the page has no password)",
            file=sys.stderr,
        )
    from textual_serve.server import Server

    title = "flowdeck demo" if args.demo else "flowdeck"
    server = Server(
        shlex.join(served_command(args)),
        host=args.host,
        port=args.port,
        title=title,
        public_url=args.public_url,
    )
    try:
        server.serve()
    except OSError as exc:  # the port is taken, or the address is not this host's
        print(
            f"flowdeck serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; "
            "pick another with --port or --host",
            file=sys.stderr,
        )
        return 1
    return 0
