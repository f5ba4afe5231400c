"""Reading sessions back: the list, one session's tables and events, totals, CSV export.

Everything here reads through ``engine.recording.format`` (the same contract the Spark
report uses), so a session reads the same whichever tool opens it. Sessions from older
format versions read (missing columns are filled, see :func:`format.conform`); a newer
major version is refused with a message saying to upgrade.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from engine.errors import FlowdeckError
from engine.events import EventKind, RunEvent
from engine.latency import LatencyKind, SendBasis, percentile_from_buckets
from engine.progress import Percentiles
from engine.recording import format as fmt
from engine.snapshot import Counters

#: Counter columns of the client table, summed into totals and per-second series.
COUNTER_COLUMNS = tuple(Counters.__dataclass_fields__)
#: Gauge columns of the client table, summed over workers per second (last value each).
GAUGE_COLUMNS = ("pending_confirms", "unacked", "connections", "blocked_connections")


class SessionNotFound(FlowdeckError):
    """No session with the id asked for; the message says where flowdeck looked."""


class SessionUnreadable(FlowdeckError):
    """A session this flowdeck cannot read (newer format, broken manifest)."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One line of the sessions list. ``problem`` is set (and most figures None) when the
    session cannot be read; rates are the highest one-second rates over all workers.
    """

    session_id: str
    path: Path
    name: str = ""
    start: float | None = None
    end: float | None = None
    duration: float | None = None
    outcome: str = ""
    phases: int = 0
    peak_publish_rate: float | None = None
    peak_consume_rate: float | None = None
    schema_version: str = ""
    problem: str = ""


@dataclass(frozen=True, slots=True)
class Deleted:
    """What ``delete_session`` removed."""

    path: Path
    files: int
    size_bytes: int


def resolve_outcome(manifest: fmt.Manifest) -> str:
    """The manifest's outcome, with ``running`` turned into ``incomplete`` when the process
    that was recording is gone (killed, crashed) or cannot be checked (another host).
    """
    if manifest.outcome != fmt.OUTCOME_RUNNING:
        return manifest.outcome
    if manifest.recorder_pid is None or manifest.host != socket.gethostname():
        return fmt.OUTCOME_INCOMPLETE
    try:
        process = psutil.Process(int(manifest.recorder_pid))
        alive = process.status() != psutil.STATUS_ZOMBIE
        # A pid reused by a later process is not the recorder.
        started_before = process.create_time() <= manifest.start + 5
    except (psutil.Error, ValueError):
        return fmt.OUTCOME_INCOMPLETE
    return fmt.OUTCOME_RUNNING if alive and started_before else fmt.OUTCOME_INCOMPLETE


@dataclass
class Session:
    """One recorded session, read lazily: the manifest at once, tables when asked for."""

    path: Path
    manifest: fmt.Manifest
    #: Lines of events.jsonl that did not read (a line torn by a kill), skipped.
    torn_event_lines: int = 0
    #: Parts that did not read, with why; they are left out of the tables.
    problems: list[str] = field(default_factory=list)
    _tables: dict[str, pa.Table] = field(default_factory=dict, repr=False)
    _events: list[RunEvent] | None = field(default=None, repr=False)

    @property
    def session_id(self) -> str:
        return self.manifest.session_id

    @property
    def outcome(self) -> str:
        return resolve_outcome(self.manifest)

    @property
    def events(self) -> list[RunEvent]:
        """The event log in the order it was written; torn or unknown lines skipped."""
        if self._events is None:
            self._events = self._read_events()
        return self._events

    def table(self, name: str) -> pa.Table:
        """All parts of table ``name`` (a ``format.TABLES`` key) in the current schema."""
        if name not in fmt.TABLES:
            raise ValueError(f"no table {name!r} in a session; tables: {', '.join(fmt.TABLES)}")
        if name not in self._tables:
            self._tables[name] = self._read_table(name)
        return self._tables[name]

    @property
    def phases(self) -> int:
        """Phases the run went through: one per PHASE event, at least one."""
        return max(1, sum(1 for event in self.events if event.kind is EventKind.PHASE))

    @property
    def duration(self) -> float | None:
        """Seconds from start to end; for an unfinished session, to the last recorded row."""
        if self.manifest.end is not None:
            return self.manifest.end - self.manifest.start
        client = self.table(fmt.CLIENT_DIR)
        if client.num_rows == 0:
            return None
        last = pc.max(client.column("elapsed_s")).as_py()
        return float(last) if last is not None else None

    def totals(self) -> Counters:
        """Message counts over the whole session, all workers (sums of the interval deltas)."""
        client = self.table(fmt.CLIENT_DIR)
        return Counters(
            *(int(pc.sum(client.column(name)).as_py() or 0) for name in COUNTER_COLUMNS)
        )

    def client_per_second(self) -> pa.Table:
        """The client series summed over workers, one row per second of the run.

        ``second`` is ``floor(elapsed_s)`` of the interval's end. Counter columns hold the
        messages of the intervals that ended in that second; ``*_rate`` columns are msg/s
        (each worker's counts over its own interval lengths, then summed), so a second that
        caught two of a worker's snapshots, or none, does not double or drop its rate.
        Gauges are summed over workers.
        """
        client = self.table(fmt.CLIENT_DIR)
        second = pc.cast(pc.floor(client.column("elapsed_s")), pa.int64())
        per_worker = (
            client.append_column("second", second)
            .group_by(["second", "worker"])
            .aggregate(
                [(name, "sum") for name in (*COUNTER_COLUMNS, "interval_s")]
                + [(name, "max") for name in (*GAUGE_COLUMNS, "target_rate")]
            )
        )
        interval = per_worker.column("interval_s_sum")
        rates = {
            f"{name}_rate": pc.if_else(
                pc.greater(interval, 0),
                pc.divide(pc.cast(per_worker.column(f"{name}_sum"), pa.float64()), interval),
                0.0,
            )
            for name in ("published", "confirmed", "consumed", "acked", "nacked", "returned")
        }
        for name, column in rates.items():
            per_worker = per_worker.append_column(name, column)
        summed = per_worker.group_by("second").aggregate(
            [("worker", "count")]
            + [(f"{name}_sum", "sum") for name in COUNTER_COLUMNS]
            + [(f"{name}_max", "sum") for name in (*GAUGE_COLUMNS, "target_rate")]
            + [(name, "sum") for name in rates]
        )
        renamed = [
            name.replace("_sum_sum", "").replace("_max_sum", "").replace("_rate_sum", "_rate")
            for name in summed.column_names
        ]
        renamed = ["workers" if name == "worker_count" else name for name in renamed]
        return summed.rename_columns(renamed).sort_by("second")

    def latency_percentiles(
        self,
        kind: LatencyKind,
        basis: SendBasis,
        start_s: float | None = None,
        end_s: float | None = None,
    ) -> Percentiles | None:
        """Percentiles (ms) of the merged histograms between two elapsed times; None if empty."""
        latency = self.table(fmt.LATENCY_DIR)
        mask = pc.and_(
            pc.equal(latency.column("kind"), str(kind)),
            pc.equal(latency.column("basis"), str(basis)),
        )
        if start_s is not None:
            mask = pc.and_(mask, pc.greater(latency.column("elapsed_s"), start_s))
        if end_s is not None:
            mask = pc.and_(mask, pc.less_equal(latency.column("elapsed_s"), end_s))
        rows = latency.filter(mask)
        if rows.num_rows == 0:
            return None
        buckets = rows.group_by("value_us").aggregate([("count", "sum")])
        merged = dict(
            zip(
                buckets.column("value_us").to_pylist(),
                buckets.column("count_sum").to_pylist(),
                strict=True,
            )
        )

        def ms(percentile: float) -> float:
            value = percentile_from_buckets(merged, percentile)
            return 0.0 if value is None else value / 1000

        return Percentiles(
            count=sum(merged.values()),
            p50=ms(50),
            p75=ms(75),
            p95=ms(95),
            p99=ms(99),
            max=ms(100),
        )

    def info(self) -> SessionInfo:
        """The session as one line of the sessions list."""
        series = self.client_per_second()
        return SessionInfo(
            session_id=self.session_id,
            path=self.path,
            name=self.manifest.name,
            start=self.manifest.start,
            end=self.manifest.end,
            duration=self.duration,
            outcome=self.outcome,
            phases=self.phases,
            peak_publish_rate=_peak(series, "published_rate"),
            peak_consume_rate=_peak(series, "consumed_rate"),
            schema_version=self.manifest.schema_version,
        )

    def _read_table(self, name: str) -> pa.Table:
        schema = fmt.TABLES[name]
        parts = []
        for part in fmt.part_files(self.path / name):
            try:
                parts.append(fmt.read_part(part, schema))
            except fmt.SessionFormatError as exc:
                self.problems.append(str(exc))
        if not parts:
            return schema.empty_table()
        return pa.concat_tables(parts)

    def _read_events(self) -> list[RunEvent]:
        path = self.path / fmt.EVENTS
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        events = []
        torn = 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                events.append(RunEvent.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                torn += 1
        self.torn_event_lines = torn
        return events


def open_session(path: Path) -> Session:
    """Open the session in directory ``path``; SessionFormatError if it cannot be read."""
    return Session(path=Path(path), manifest=fmt.read_manifest(Path(path)))


def list_sessions(root: Path) -> list[SessionInfo]:
    """Every session under ``root``, oldest first; unreadable ones carry a ``problem``."""
    root = Path(root)
    if not root.is_dir():
        return []
    infos = []
    for path in sorted(root.iterdir()):
        if not fmt.looks_like_session(path):
            continue
        try:
            infos.append(open_session(path).info())
        except fmt.SessionFormatError as exc:
            infos.append(SessionInfo(session_id=path.name, path=path, problem=str(exc)))
        except (OSError, pa.ArrowException) as exc:
            infos.append(SessionInfo(session_id=path.name, path=path, problem=f"{exc}"))
    return sorted(infos, key=lambda info: (info.start or math.inf, info.session_id))


def find_session(root: Path, session_id: str) -> Path:
    """The directory of session ``session_id`` under ``root`` (a unique prefix will do)."""
    root = Path(root)
    wanted = session_id.strip().rstrip("/")
    if wanted and "/" not in wanted and fmt.looks_like_session(root / wanted):
        return root / wanted
    matches = (
        sorted(p for p in root.iterdir() if p.name.startswith(wanted) and fmt.looks_like_session(p))
        if wanted and root.is_dir()
        else []
    )
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join(p.name for p in matches[:5])
        raise SessionNotFound(
            f"session id {session_id!r} matches {len(matches)} sessions in {root} ({names}); "
            f"give more of the id"
        )
    raise SessionNotFound(
        f"no session {session_id!r} in {root}; `flowdeck sessions list` shows the ids "
        f"(--sessions-dir or FLOWDECK_SESSIONS_DIR choose another directory)"
    )


def open_session_by_id(root: Path, session_id: str) -> Session:
    """Find and open a session, with operator-facing errors for unknown or unreadable ids."""
    path = find_session(root, session_id)
    try:
        return open_session(path)
    except fmt.SessionFormatError as exc:
        raise SessionUnreadable(str(exc)) from None


def delete_session(root: Path, session_id: str) -> Deleted:
    """Delete a session directory; refuses one that is still being recorded."""
    path = find_session(root, session_id)
    try:
        manifest: fmt.Manifest | None = fmt.read_manifest(path)
    except fmt.SessionFormatError:
        manifest = None  # an unreadable session can still be deleted
    if manifest is not None and resolve_outcome(manifest) == fmt.OUTCOME_RUNNING:
        raise FlowdeckError(
            f"session {path.name} is still being recorded by process {manifest.recorder_pid}; "
            f"stop that run first"
        )
    files = [p for p in path.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    shutil.rmtree(path)
    return Deleted(path=path, files=len(files), size_bytes=size)


def export_csv(session: Session, out_dir: Path) -> list[Path]:
    """Write the session as CSV files (one per table, the per-second series, the events)
    plus a copy of the manifest into ``out_dir``; returns the files written.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def write(name: str, table: pa.Table) -> None:
        path = out_dir / name
        pacsv.write_csv(table, path)
        written.append(path)

    manifest_path = out_dir / "manifest.json"
    manifest_path.write_text(json.dumps(session.manifest.to_json(), indent=2) + "\n")
    written.append(manifest_path)
    for name in fmt.TABLES:
        write(f"{name}.csv", session.table(name))
    write("client_per_second.csv", session.client_per_second())
    write("events.csv", _events_table(session))
    return written


def _events_table(session: Session) -> pa.Table:
    start = session.manifest.start
    events = session.events
    return pa.table(
        {
            "ts": pa.array([round(e.at * 1_000_000) for e in events], type=fmt.TIMESTAMP),
            "elapsed_s": pa.array([e.at - start for e in events], type=pa.float64()),
            "kind": pa.array([e.kind.value for e in events], type=pa.string()),
            "change_id": pa.array([e.change_id for e in events], type=pa.int64()),
            "message": pa.array([e.message for e in events], type=pa.string()),
            "detail": pa.array(
                [json.dumps(dict(e.detail), sort_keys=True) for e in events], type=pa.string()
            ),
        }
    )


def _peak(series: pa.Table, column: str) -> float | None:
    if series.num_rows == 0:
        return None
    value = pc.max(series.column(column)).as_py()
    return None if value is None else float(value)
