"""``flowdeck sessions``: list, show, export and delete recorded sessions.

Sessions live under ``--sessions-dir``, else ``$FLOWDECK_SESSIONS_DIR``, else the user's
data directory (see ``engine.recording.recorder.default_sessions_root``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowdeck.cli import COMMANDS
from flowdeck.cli.common import print_table, sessions_dir
from flowdeck.cli.summary import print_phases
from flowdeck.collectors import printable, redact
from flowdeck.engine import (
    SESSIONS_DIR_ENV,
    Counters,
    EventKind,
    FlowdeckError,
    LatencyKind,
    SendBasis,
    default_sessions_root,
)
from flowdeck.figures.trend import PEAK_WINDOW_S, sustained_peak

# The session reader (pyarrow) loads in the handlers: `sessions list --ids` and a bad
# --sessions-dir answer without it.
if TYPE_CHECKING:
    from flowdeck.engine import Session, SessionInfo

#: What "peak" means in the sessions list and ``sessions show``: the best rate the run held,
#: not its best second (a catch-up burst after an alarm or a pause is one second).
PEAK_MEANING = "peak = best rate held in each of 5 consecutive seconds"


def add_sessions_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--sessions-dir``, read back by :func:`sessions_root` (``flowdeck report`` too)."""
    parser.add_argument(
        "--sessions-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"where sessions are (default: ${SESSIONS_DIR_ENV}, else {default_sessions_root()})",
    )


def register(subparsers: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    add_sessions_dir_argument(common)
    parser = subparsers.add_parser(
        "sessions",
        help=COMMANDS["sessions"],
    )
    actions = parser.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        parents=[common],
        help=f"one line per recorded session ({PEAK_MEANING})",
    )
    listing.add_argument(
        "--ids", action="store_true", help="only the session ids, one a line (for completion)"
    )
    listing.set_defaults(handler=list_command)

    show = actions.add_parser("show", parents=[common], help="a session's summary and event log")
    show.add_argument("session_id", metavar="ID", help="session id (a unique prefix will do)")
    show.set_defaults(handler=show_command)

    export = actions.add_parser("export", parents=[common], help="write a session as CSV files")
    export.add_argument("session_id", metavar="ID", help="session id (a unique prefix will do)")
    export.add_argument("--csv", type=Path, required=True, metavar="DIR", help="output directory")
    export.set_defaults(handler=export_command)

    delete = actions.add_parser("delete", parents=[common], help="delete a session from disk")
    delete.add_argument("session_id", metavar="ID", help="session id (a unique prefix will do)")
    delete.set_defaults(handler=delete_command)


def sessions_root(args: argparse.Namespace) -> Path:
    return sessions_dir(args.sessions_dir)


def list_command(args: argparse.Namespace) -> int:
    root = sessions_root(args)
    if args.ids:
        from flowdeck.engine import session_format as fmt

        for path in sorted(root.iterdir()) if root.is_dir() else []:
            if fmt.looks_like_session(path):
                print(printable(path.name))
        return 0
    from flowdeck.engine import list_sessions

    infos = list_sessions(root)
    if not infos:
        print(f"no sessions in {printable(str(root))}")
        return 0
    # One unreadable session must not hide the others: it is left out, with one line why.
    skipped = [info for info in infos if info.problem]
    for info in skipped:
        problem = printable(" ".join(info.problem.split()))
        shown = printable(info.session_id)
        print(f"flowdeck: skipped session {shown}: {problem}", file=sys.stderr)
    readable = [info for info in infos if not info.problem]
    header = (
        "ID", "START", "NAME", "DURATION", "OUTCOME", "PHASES",
        f"PEAK PUB/s ({PEAK_WINDOW_S} s HELD)", f"PEAK CONS/s ({PEAK_WINDOW_S} s HELD)",
    )  # fmt: skip
    rows = [_list_row(info) for info in readable]
    if rows:
        print_table(header, rows, right={3, 5, 6, 7})
    count = len(readable)
    unreadable = f" ({len(skipped)} unreadable, skipped)" if skipped else ""
    print(f"{count} session{'s' if count != 1 else ''} in {printable(str(root))}{unreadable}")
    return 0


def _list_row(info: SessionInfo) -> tuple[str, ...]:
    return (
        printable(info.session_id),
        _local_time(info.start),
        printable(info.name),
        _seconds(info.duration),
        info.outcome,
        str(info.phases),
        _rate(info.peak_publish_rate),
        _rate(info.peak_consume_rate),
    )


def show_command(args: argparse.Namespace) -> int:
    from flowdeck.engine import open_session_by_id
    from flowdeck.engine import session_format as fmt

    session = open_session_by_id(sessions_root(args), args.session_id)
    manifest = session.manifest
    spec = manifest.spec
    summary = manifest.summary or {}
    outcome = session.outcome
    if manifest.stop_reason:
        outcome = f"{outcome} ({manifest.stop_reason})"
    lines = [
        ("session", manifest.session_id),
        ("path", str(session.path)),
        ("name", manifest.name + (f" - {spec['description']}" if spec.get("description") else "")),
        ("started", _local_time(manifest.start)),
        ("ended", _local_time(manifest.end) if manifest.end is not None else "-"),
        ("duration", _seconds(session.duration)),
        ("outcome", outcome),
        ("host", manifest.host),
        ("versions", ", ".join(f"{k} {v}" for k, v in sorted(manifest.versions.items()))),
        ("format", manifest.schema_version),
        ("broker", redact(str(spec.get("uri") or "")) or "private local node"),
        ("spec", _describe_spec(spec)),
    ]
    totals = session.totals()
    lines.append(
        (
            "totals",
            ", ".join(f"{name} {getattr(totals, name):,}" for name in totals.__dataclass_fields__),
        )
    )
    figures = session.figures()
    for label in ("publish", "consume"):
        peak = sustained_peak([row[f"{label}_rate"] for row in figures.seconds])
        mean, basis = _mean_rate(label, summary, totals, session)
        lines.append(
            (
                label,
                f"mean {_rate(mean, 1)} msg/s ({basis}), peak {_rate(peak)} msg/s held "
                f"for {PEAK_WINDOW_S} s",
            )
        )
    for kind in LatencyKind:
        for basis in SendBasis:
            p = session.latency_percentiles(kind, basis)
            if p is not None:
                lines.append(
                    (
                        f"{kind.value} {basis.value}",
                        f"p50 {p.p50:.2f} p75 {p.p75:.2f} p95 {p.p95:.2f} p99 {p.p99:.2f} "
                        f"p99.9 {p.p999:.2f} max {p.max:.2f} ms ({p.count:,} samples)",
                    )
                )
    safety = summary.get("safety")
    if isinstance(safety, dict):
        lines.append(("data safety", ", ".join(_safety_item(k, v) for k, v in safety.items())))
    broker = session.table(fmt.BROKER_DIR)
    if broker.num_rows:
        lines.append(("broker samples", f"{broker.num_rows:,}"))
    lines.append(("phases", str(len(figures.phases))))
    if manifest.recording_error:
        lines.append(("recording", manifest.recording_error))
    if session.torn_event_lines:
        lines.append(("event log", f"{session.torn_event_lines} torn line(s) skipped"))
    for problem in session.problems:
        lines.append(("problem", problem))
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        print(f"{label.ljust(width)}  {printable(value)}")
    print()
    print_phases(figures, sys.stdout)
    print()
    events = session.events
    print(f"events ({len(events)})")
    for event in events:
        change = f" #{event.change_id}" if event.change_id is not None else ""
        marker = "!" if event.kind in _ALERT_KINDS else " "
        print(
            f"{marker}{event.at - manifest.start:+9.1f}s  {event.kind.value:<17}"
            f"{change:<5} {printable(event.message)}"
        )
    return 0


_ALERT_KINDS = frozenset(
    {EventKind.ALARM_RAISED, EventKind.BLOCKED, EventKind.OUTAGE_STARTED, EventKind.ERROR}
)


def export_command(args: argparse.Namespace) -> int:
    from flowdeck.engine import export_csv, open_session_by_id

    session = open_session_by_id(sessions_root(args), args.session_id)
    try:
        written = export_csv(session, args.csv)
    except OSError as exc:
        raise FlowdeckError(
            f"cannot write CSV files to {args.csv}: {exc.strerror or exc}; choose another --csv"
        ) from None
    for path in written:
        print(printable(str(path)))
    shown = printable(str(args.csv))
    print(f"exported session {session.session_id} to {shown} ({len(written)} files)")
    return 0


def delete_command(args: argparse.Namespace) -> int:
    from flowdeck.engine import delete_session

    deleted = delete_session(sessions_root(args), args.session_id)
    print(
        f"deleted session {printable(deleted.path.name)}: {printable(str(deleted.path))} "
        f"({deleted.files} files, {_size(deleted.size_bytes)})"
    )
    return 0


#: What the run's summary divides each mean rate by (engine.progress.RATE_MEANING).
_ACTIVE = {"publish": "first to last send", "consume": "first to last delivery"}


def _mean_rate(
    label: str, summary: dict[str, Any], totals: Counters, session: Session
) -> tuple[float | None, str]:
    """The mean rate the run's own summary gave, and what it divides by.

    Sessions recorded since the summary states the clients' active time show exactly the
    summary's figure (count / first-to-last send or delivery). Older ones hold no such time:
    their count is divided by the time publishing lasted (start to the drain event), or by
    the whole recording, and the line says which.
    """
    safety = summary.get("safety")
    counted = "published" if label == "publish" else "consumed"
    seconds = summary.get(f"{label}_seconds")
    rate = summary.get(f"{label}_rate")
    if isinstance(seconds, int | float) and isinstance(rate, int | float):
        count = safety.get(counted) if isinstance(safety, dict) else getattr(totals, counted)
        return float(rate), f"{count:,} over {seconds:.2f} s, {_ACTIVE[label]}"
    count = getattr(totals, counted)
    drains = [e.at for e in session.events if e.kind is EventKind.DRAIN]
    start = session.manifest.start
    if drains:
        span, what = drains[0] - start, "start to publishing stopped"
    else:
        span, what = session.duration or 0.0, "the whole recording"
    mean = count / span if span > 0 else None
    return mean, f"{count:,} over {span:.2f} s, {what}; an older session: no active time kept"


def _safety_item(name: str, value: Any) -> str:
    if isinstance(value, bool):  # confirms: whether loss could be assessed at all
        return f"{name} {'on' if value else 'off'}"
    return f"{name} {value:,}" if isinstance(value, int | float) else f"{name} {value}"


def _describe_spec(spec: dict[str, Any]) -> str:
    queue = f"{spec.get('queues', '?')} {spec.get('queue_type', '?')} queue(s)"
    rate = spec.get("rate", 0)
    parts = [
        f"{spec.get('publishers', '?')} publishers",
        f"{spec.get('consumers', '?')} consumers",
        queue,
        f"rate {rate} msg/s each" if rate else "rate unlimited",
        f"inflight {spec.get('inflight', '?')}",
        f"prefetch {spec.get('prefetch', '?')}",
        f"ack_every {spec.get('ack_every', '?')}",
        f"{spec.get('message_size', '?')} B",
    ]
    schedule = spec.get("schedule")
    if isinstance(schedule, list) and schedule:
        parts.append(f"{len(schedule)} scheduled change(s)")
    return ", ".join(parts)


def _local_time(at: float | None) -> str:
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 3600:
        return f"{int(value // 3600)}h{int(value % 3600 // 60):02d}m"
    if value >= 60:
        return f"{int(value // 60)}m{int(value % 60):02d}s"
    return f"{value:.1f}s"


def _rate(value: float | None, decimals: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{decimals}f}"


def _size(size_bytes: int) -> str:
    if size_bytes < 1024:
        return f"{size_bytes} B"
    size = float(size_bytes)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"
