"""`flowdeck serve`: the cockpit (or the demo tour) in a web browser, for projecting.

textual-serve runs the app as a child process per browser tab and draws it in the page
with xterm.js over a websocket; the app is the terminal cockpit unchanged. It listens on
127.0.0.1 by default: whoever reaches the page drives a cockpit that can start and steer
load, and the page asks for no password.

The served command carries no broker URI (it would show in ``ps``): the child reads
``FLOWDECK_URI`` from this process's environment, as the demo does.

Two things the page does for a projected tour that textual-serve's own does not:

* **Keys work at once.** The page gives the terminal the keyboard focus as soon as it is
  drawn (and again whenever the window gets it back), so the presenter's clicker or space
  bar drives the tour without a click in the page first. The page is textual-serve's, with
  that script added (:func:`focusing_templates`).
* **One tour, however many tabs.** Each tab gets its own process, so ``--demo`` serves
  ``flowdeck demo --shared DIR`` with one DIR for the server's life: the first tab presents
  the tour, every later tab watches that tour (its run followed through its control
  endpoint, the step read off its settings, nothing steered) instead of starting a second
  load on the same broker (``tui/tour_share.py``).
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from flowdeck.cli import COMMANDS

#: The loopback address served on unless told otherwise.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: Added to textual-serve's page before ``</body>``: focus the terminal's input once xterm.js
#: has made it, and again when the window gets the focus back (a tab switched to).
FOCUS_SCRIPT = """<script>
  /* flowdeck: the presenter's keys reach the terminal without a click in the page */
  (function () {
    function focusTerminal() {
      var input = document.querySelector("#terminal .xterm-helper-textarea");
      if (input && document.activeElement !== input) {
        input.focus({ preventScroll: true });
      }
      return input !== null;
    }
    var tries = 0;
    var timer = setInterval(function () {
      if (focusTerminal() || ++tries > 600) clearInterval(timer);
    }, 50);
    window.addEventListener("focus", focusTerminal);
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) focusTerminal();
    });
  })();
</script>
"""
#: textual-serve's page template, by the name its server renders.
PAGE = "app_index.html"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help=COMMANDS["serve"],
        description=(
            "Serve the cockpit over HTTP with textual-serve, to open in a browser and project: "
            "each browser tab gets its own cockpit; with --demo the first tab presents the "
            "tour and every later tab watches that one. Keys reach the terminal without a "
            "click in the page. Listens on 127.0.0.1 unless --host says otherwise; the page "
            "has no password, so keep it on loopback or a trusted network."
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


def served_command(args: argparse.Namespace, shared: Path | None = None) -> list[str]:
    """The command each browser tab runs: this Python's flowdeck, cockpit or demo;
    ``shared``: the directory every tab's demo shares (one tour, presented by the first)."""
    command = [sys.executable, "-m", "flowdeck.cli"]
    if not args.demo:
        return [*command, "cockpit"]
    command.append("demo")
    if args.scale is not None:
        command += ["--scale", f"{args.scale:g}"]
    if shared is not None:
        command += ["--shared", str(shared)]
    return command


def focusing_templates(folder: Path) -> Path | None:
    """textual-serve's page template with :data:`FOCUS_SCRIPT` added, written in
    ``folder`` (the templates path to serve from); None when the page does not read as
    expected (then textual-serve's own is served: keys need a click in the page first)."""
    import textual_serve

    original = Path(textual_serve.__file__).with_name("templates") / PAGE
    try:
        page = original.read_text(encoding="utf-8")
    except OSError:
        return None
    if page.count("</body>") != 1:
        return None
    (folder / PAGE).write_text(page.replace("</body>", FOCUS_SCRIPT + "</body>"), encoding="utf-8")
    return folder


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
    # Private to this server and gone with it: the page template, and the tour's share.
    workspace = Path(tempfile.mkdtemp(prefix="flowdeck-serve-"))
    try:
        templates = workspace / "templates"
        templates.mkdir()
        shared = workspace / "tour" if args.demo else None
        options: dict[str, Any] = {}
        if focusing_templates(templates) is not None:
            options["templates_path"] = templates
        else:
            print(
                "flowdeck serve: textual-serve's page is not the one expected; serving it "
                "as it is (click in the page before pressing keys)",
                file=sys.stderr,
            )
        server = Server(
            shlex.join(served_command(args, shared)),
            host=args.host,
            port=args.port,
            title=title,
            public_url=args.public_url,
            **options,
        )
        try:
            server.serve()
        except OSError as exc:  # the port is taken, or the address is not this host's
            print(
                f"flowdeck serve: cannot listen on {args.host}:{args.port}: "
                f"{exc.strerror or exc}; pick another with --port or --host",
                file=sys.stderr,
            )
            return 1
        return 0
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
