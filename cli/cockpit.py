"""`flowdeck cockpit` (and `flowdeck` alone): open the Textual cockpit.

Textual is imported only here, inside the handler, so every other command starts without it.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from flowdeck.cli import COMMANDS
from flowdeck.engine import DEFAULT_PRESET, URI_ENV, RunSpec, load_spec_file, preset


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cockpit",
        help=COMMANDS["cockpit"],
        description=(
            "Open the Textual cockpit: pick or edit a run, launch it, watch and steer it, "
            "replay sessions. With no broker uri, runs start a private RabbitMQ node."
        ),
    )
    parser.add_argument("--preset", help=f"preset to start from (default {DEFAULT_PRESET})")
    parser.add_argument("--spec", type=Path, help="TOML spec file to start from")
    parser.add_argument(
        "--scale", type=float, help="scale factor for the preset (default 0.1, fits a laptop)"
    )
    parser.add_argument(
        "--uri",
        help="AMQP URI of the broker (default: $FLOWDECK_URI, else a private local node)",
    )
    parser.add_argument("--management-url", help="management API URL (default: from uri)")
    parser.add_argument("--prometheus-url", help="Prometheus server URL (default: none)")
    parser.add_argument("--duration", type=float, help="run length in seconds")
    parser.add_argument("--sessions-dir", type=Path, help="where sessions are recorded")
    parser.add_argument(
        "--theme", help="Textual theme (default flowdeck-colorblind, a colour-blind-safe one)"
    )
    parser.add_argument(
        "--launch", action="store_true", help="launch the run at once (no launch screen)"
    )
    parser.add_argument("--sessions", action="store_true", help="open on the sessions screen")
    parser.set_defaults(handler=open_cockpit)


def initial_spec(args: argparse.Namespace) -> RunSpec:
    from flowdeck.tui.screens.launch import DEFAULT_SCALE

    scale = args.scale if args.scale is not None else DEFAULT_SCALE
    if args.spec is not None:
        spec = load_spec_file(args.spec, args.scale)
    else:
        spec = preset(args.preset or DEFAULT_PRESET, scale)
    overrides: dict[str, Any] = {}
    if args.uri is not None:
        overrides["uri"] = args.uri
    elif not spec.uri and os.environ.get(URI_ENV):
        # As `flowdeck run` and the demo take it; in the form, so the launch shows where
        # the run goes (an empty uri there means a private node).
        overrides["uri"] = os.environ[URI_ENV]
    if args.management_url is not None:
        overrides["management_url"] = args.management_url
    if args.prometheus_url is not None:
        overrides["prometheus_url"] = args.prometheus_url
    if overrides:
        spec = replace(spec, **overrides)
    if args.duration is not None:
        spec = spec.with_duration(args.duration)
    return spec


def open_cockpit(args: argparse.Namespace) -> int:
    spec = initial_spec(args)
    from flowdeck.tui.app import FlowdeckApp

    app = FlowdeckApp(
        spec=spec,
        sessions_root=args.sessions_dir,
        theme=args.theme,
        open_sessions=args.sessions,
        launch=args.launch,
    )
    try:
        app.run()
    finally:
        app.provisioner.close()  # already done on a normal quit; not after a crash
    return 0
