"""`flowdeck demo`: the cockpit in demo mode, a guided tour of the seed's benchmark #2.

Textual is imported only in the handler, as for the cockpit.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from flowdeck.cli import COMMANDS
from flowdeck.engine import URI_ENV


def register(subparsers: Any) -> None:
    from flowdeck.tui.tour import DEFAULT_TOUR_SCALE, DEFAULT_TOUR_SECONDS

    parser = subparsers.add_parser(
        "demo",
        help=COMMANDS["demo"],
        description=(
            "Open the cockpit in demo mode: a guided tour that plays the seed's benchmark #2 "
            "story on a live run, one step per key (space next, p back), with big figures "
            "and captions. It first measures what the broker takes (a few seconds of "
            "publishing as fast as it confirms) and sets step 1's load above it, so the "
            "story's overload is real on any machine; each caption says whether the figures "
            "on screen show what the story tells, and what they show when they do not. The "
            "broker is --uri, else FLOWDECK_URI, else a private RabbitMQ node started for the "
            "tour."
        ),
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=DEFAULT_TOUR_SCALE,
        help=f"scale of benchmark #2's clients and queues (default {DEFAULT_TOUR_SCALE:g}: "
        "4 publishers, 2 quorum queues, 4 consumers; the load is set from the probe)",
    )
    parser.add_argument(
        "--uri", help=f"AMQP URI of the broker (default: ${URI_ENV}, else a private node)"
    )
    parser.add_argument("--management-url", help="management API URL (default: from uri)")
    parser.add_argument("--prometheus-url", help="Prometheus server URL (default: none)")
    parser.add_argument(
        "--duration",
        type=float,
        default=DEFAULT_TOUR_SECONDS,
        help=f"seconds before the run ends by itself (default {DEFAULT_TOUR_SECONDS:g})",
    )
    parser.add_argument("--sessions-dir", type=Path, help="where the tour's session is recorded")
    parser.add_argument(
        "--shared",
        type=Path,
        metavar="DIR",
        help="one tour for every process given DIR (flowdeck serve --demo gives each browser "
        "tab the same): the first presents it, the others watch it",
    )
    parser.add_argument(
        "--theme", help="Textual theme (default flowdeck-colorblind, a colour-blind-safe one)"
    )
    parser.set_defaults(handler=open_demo)


def open_demo(args: argparse.Namespace) -> int:
    from flowdeck.tui.tour import bench2_tour

    tour = bench2_tour(
        args.scale,
        args.duration,
        uri=args.uri or os.environ.get(URI_ENV, ""),
        management_url=args.management_url or "",
        prometheus_url=args.prometheus_url or "",
    )
    from flowdeck.tui.app import DemoApp
    from flowdeck.tui.tour_share import TourShare

    share = None
    if args.shared is not None:
        share = TourShare(args.shared)
        share.present()  # else another process presents: this one watches
    app = DemoApp(tour, sessions_root=args.sessions_dir, theme=args.theme, share=share)
    try:
        app.run()
    finally:
        app.provisioner.close()  # already done on a normal quit; not after a crash
    return 0
