"""``flowdeck report SESSION… --out DIR``: the PySpark report job over recorded sessions.

A SESSION is a session id (a unique prefix will do, as for ``flowdeck sessions show``)
under ``--sessions-dir``, a session directory or a Hadoop URI. The same job runs under
``spark-submit spark_reports/job.py``, which takes directories and URIs only; this command
starts Spark itself (``local[*]`` unless ``--master`` says otherwise), after every local
argument has been checked.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import Any

from flowdeck.cli import COMMANDS
from flowdeck.cli.sessions import add_sessions_dir_argument, sessions_root
from flowdeck.collectors import printable
from flowdeck.engine import FlowdeckError, SessionNotFound, find_session


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help=COMMANDS["report"],
        description="Turn recorded sessions into report.html plus a .md and .csv per table, "
        "with PySpark (local[*] by default, any Spark master with --master). A SESSION is a "
        "session id (or a unique prefix) under --sessions-dir, a session directory or a "
        "Hadoop URI.",
    )
    from flowdeck.spark_reports.job import add_arguments  # imports no PySpark

    add_arguments(parser)
    add_sessions_dir_argument(parser)
    parser.set_defaults(handler=run)


def resolve_sessions(args: argparse.Namespace) -> list[str]:
    """Each SESSION as the job takes it: Hadoop URIs, paths that exist and anything spelt
    like a path as given (the job's check names what is wrong with them), anything else a
    session id under the sessions root (InputError naming it when there is none)."""
    from flowdeck.spark_reports.inputs import InputError, is_local, local_path

    resolved: list[str] = []
    for given in args.sessions:
        spelt_as_path = os.sep in given or "/" in given or given.startswith(("~", "."))
        if not is_local(given) or spelt_as_path or local_path(given).expanduser().exists():
            resolved.append(given)
            continue
        try:
            resolved.append(str(find_session(sessions_root(args), given)))
        except SessionNotFound as exc:
            raise InputError(f"session {given!r}: no such directory, and {exc}") from None
    return resolved


def run(args: argparse.Namespace) -> int:
    from flowdeck.spark_reports.inputs import InputError

    try:
        args.sessions = resolve_sessions(args)
    except InputError as exc:
        print(f"flowdeck report: {printable(str(exc))}", file=sys.stderr)
        return 2
    missing = [name for name in ("pyspark", "matplotlib") if importlib.util.find_spec(name) is None]
    if missing:
        raise FlowdeckError(
            f"the report job needs {' and '.join(missing)}, not installed; "
            "install them with: pip install 'flowdeck[reports]'"
        )
    from flowdeck.spark_reports.job import run as run_job

    return run_job(args)
