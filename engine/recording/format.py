"""The session format: the one contract between recording and reporting.

A session is a directory (documented column by column in ``docs/session-format.md``)::

    <root>/<session id>/
        manifest.json          spec (passwords masked), versions, host, times, outcome
        events.jsonl           one RunEvent per line, appended and flushed as they happen
        client/part-NNNNN.parquet     per worker per second (CLIENT_SCHEMA)
        latency/part-NNNNN.parquet    per worker per second histogram buckets (LATENCY_SCHEMA)
        queue_latency/part-NNNNN.parquet  the same, e2e per queue (QUEUE_LATENCY_SCHEMA)
        broker/part-NNNNN.parquet     per broker poll (BROKER_SCHEMA)
        queues/part-NNNNN.parquet     per broker poll per queue (QUEUE_SCHEMA)
        prometheus/part-NNNNN.parquet the run window's Prometheus range query (PROMETHEUS_SCHEMA)
        ticks/part-NNNNN.parquet      per controller tick, with the client rows it had (TICK_SCHEMA)
        nodes/part-NNNNN.parquet      per broker poll per node (NODE_SCHEMA)

Parts are written to a hidden temporary name (``.part-NNNNN.parquet.tmp``, which Spark and
:func:`part_files` skip), synced and renamed into place, so every part file that exists
reads; a session whose manifest still says ``running`` and whose recorder is gone is
incomplete.

Versions: a reader reads every older version and newer minor versions (extra columns are
dropped by :func:`conform`); it refuses a newer major version. 1.1 added the client
table's ``errors`` column (null in 1.0 sessions) and the manifest's ``recording_error``;
1.2 the ``drain`` event, where publishing stopped and the consumers' drain began; 1.3 the
``ticks`` table (when the controller ticked and which snapshots each tick had) and the
``nodes`` table (each broker node's own figures). Sessions before 1.3 have neither: the
tables read empty and readers fall back (ticks on whole seconds, one summed node). 1.4
added where queues live and nodes' partitions and Raft figures; 1.5 flow control (the
broker's connections and channels by state, per node and summed, and the run's publishers
in flow) and the run's messages on the broker's side (accepted, unconfirmed, delivered,
unacked, acked), null before. 1.6 the manifest's ``settings``: the steerable settings the
run had (the registry's rows, added ones too), each a client-table column; a session
before it has the six of :data:`SETTINGS_BEFORE_1_6`. 1.7 the ``queue_latency`` table:
end-to-end latency from the actual send per queue consumed from (empty before). 1.8 the
client table's ``rejected``, ``requeued`` and ``dead_lettered`` counts (consumers that
reject, the run's dead-letter queue), null before. 1.9 the
clients' wire protocol and its settings in the manifest's spec (``protocol``,
``stream_offset``, the stream retention fields, ``sub_entry_size``, ``compression``,
``dedup``, ``settle_mode``, ``outcome``; a session before has none: AMQP 0.9.1) and the
summary's ``replayed`` (stream messages read again: by another consumer or from an offset;
0 before). 1.10 the manifest's spec carries priorities and connection allocation
(``max_priority``, ``message_priority``, ``priority_distribution``, ``priority_share``,
``consumer_priority``, ``connection_allocation``, ``allocation_seed``; none before). 1.11
the broker table's stream figures (``stream_connections``,
``stream_consumers``, ``stream_offset_lag``, ``stream_offset_lag_max``,
``stream_publishers``, ``stream_errored``), polled live for runs to streams; null before.
This module imports only pyarrow, the standard library and the collectors' bounded file
reader (``collectors.untrusted``: a manifest linked to /dev/zero is one unreadable session,
not the end of a listing): the Spark report job may use it and nothing else of flowdeck.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flowdeck.collectors import MANIFEST_LIMIT, UnreadableFile, read_file_json

SCHEMA_VERSION = "1.11"
SCHEMA_MAJOR = 1

MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
CLIENT_DIR = "client"
LATENCY_DIR = "latency"
QUEUE_LATENCY_DIR = "queue_latency"
BROKER_DIR = "broker"
QUEUES_DIR = "queues"
PROMETHEUS_DIR = "prometheus"
TICKS_DIR = "ticks"
NODES_DIR = "nodes"
PART_PATTERN = "part-{:05d}.parquet"

# Outcomes in the manifest.
OUTCOME_RUNNING = "running"  # written at start; still there after a crash or SIGKILL
OUTCOME_COMPLETED = "completed"  # ran its full duration
OUTCOME_STOPPED = "stopped"  # stopped early by the operator (Ctrl-C, stop key, SIGTERM)
OUTCOME_FAILED = "failed"  # ended by an error
OUTCOME_INCOMPLETE = "incomplete"  # what readers report for "running" with no live recorder

TIMESTAMP = pa.timestamp("us", tz="UTC")
#: Manifest times are Unix seconds within what every reader can show: 1970 to the end of
#: year 9999 (Python's and Spark's dates end there), less a day for the local time zone.
LATEST_TIME = 253_402_214_400.0


@dataclass(frozen=True, slots=True)
class RecordedSetting:
    """A steerable setting as a session records it (format 1.6: the manifest's ``settings``
    list, from the registry rows the run had): its client-table column and the column's
    kind, the report's heading, the cockpit's tag, and whether a run at two or more values
    of it is a sweep."""

    name: str
    kind: str  # "int" | "float"
    title: str
    tag: str
    sweep: bool = False

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.int32() if self.kind == "int" else pa.float64()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "title": self.title, "tag": self.tag,
                "sweep": self.sweep}  # fmt: skip

    @classmethod
    def from_json(cls, raw: Any, where: str) -> RecordedSetting:
        if (
            not isinstance(raw, dict)
            or not isinstance(raw.get("name"), str)
            or not raw["name"].isidentifier()
            or raw.get("kind") not in ("int", "float")
        ):
            raise SessionFormatError(f"{where}: a manifest setting must name a column and its "
                                     f"kind (int or float), got {str(raw)[:60]!r}")  # fmt: skip
        return cls(raw["name"], raw["kind"], str(raw.get("title") or raw["name"]),
                   str(raw.get("tag") or raw["name"]), bool(raw.get("sweep", False)))  # fmt: skip


#: The settings every session before format 1.6 recorded (its manifest lists none), in
#: their column order: a fact about those sessions, kept so they read as they always did.
SETTINGS_BEFORE_1_6: tuple[RecordedSetting, ...] = (
    RecordedSetting("inflight", "int", "In-flight limit", "if", sweep=True),
    RecordedSetting("prefetch", "int", "Prefetch", "pf", sweep=True),
    RecordedSetting("ack_every", "int", "Ack every", "ack", sweep=True),
    RecordedSetting("rate", "float", "Rate per publisher", "rate"),
    RecordedSetting("publishers", "int", "Publishers", "pub"),
    RecordedSetting("consumers", "int", "Consumers", "con"),
)

_CLIENT_FIELDS = [
    pa.field("ts", TIMESTAMP, nullable=False),  # end of the interval
    pa.field("elapsed_s", pa.float64(), nullable=False),  # since run start
    pa.field("worker", pa.int32(), nullable=False),
    pa.field("interval_s", pa.float64(), nullable=False),
    # messages in this interval (differences of the cumulative counters)
    pa.field("published", pa.int64(), nullable=False),
    pa.field("confirmed", pa.int64(), nullable=False),
    pa.field("nacked", pa.int64(), nullable=False),
    pa.field("returned", pa.int64(), nullable=False),
    pa.field("consumed", pa.int64(), nullable=False),
    pa.field("acked", pa.int64(), nullable=False),
    pa.field("redelivered", pa.int64(), nullable=False),
    pa.field("duplicates", pa.int64(), nullable=False),
    # deliveries rejected, of them requeued, and messages taken off the run's dead-letter
    # queue; null before format 1.8
    pa.field("rejected", pa.int64()),
    pa.field("requeued", pa.int64()),
    pa.field("dead_lettered", pa.int64()),
    pa.field("errors", pa.int64()),  # errors the worker reported; null before format 1.1
    # gauges at the end of the interval
    pa.field("pending_confirms", pa.int64(), nullable=False),
    pa.field("unacked", pa.int64(), nullable=False),
    pa.field("connections", pa.int32(), nullable=False),
    pa.field("blocked_connections", pa.int32(), nullable=False),
    pa.field("target_rate", pa.float64(), nullable=False),  # msg/s, 0 = unlimited
]


def client_schema(settings: Sequence[RecordedSetting] = SETTINGS_BEFORE_1_6) -> pa.Schema:
    """The client table's schema: the counts and gauges, then the settings in force at the
    end of the interval (one column per recorded setting, in order), then ``paused``."""
    return pa.schema(
        [
            *_CLIENT_FIELDS,
            *(pa.field(setting.name, setting.arrow_type, nullable=False) for setting in settings),
            pa.field("paused", pa.bool_(), nullable=False),
        ]
    )


#: The client table of a session before format 1.6 (and the columns every session has).
CLIENT_SCHEMA = client_schema()
_BASE_CLIENT_COLUMNS = (*(f.name for f in _CLIENT_FIELDS), "paused")

#: Latency bucket rows are recorded at 2 significant digits (bucket width under 1% of the
#: value), coarser than the engine's live 3-digit histograms: a 3-digit histogram of one
#: worker-second at 10,000 msg/s has thousands of buckets, which would make recording cost
#: per-message work. 3-digit buckets nest in 2-digit ones, so the recorded rows are exactly
#: HDR's 2-digit histogram of the same latencies, and percentiles merged from them are
#: HDR's percentiles at that precision.
LATENCY_SIGNIFICANT_DIGITS = 2

LATENCY_SCHEMA = pa.schema(
    [
        pa.field("ts", TIMESTAMP, nullable=False),
        pa.field("elapsed_s", pa.float64(), nullable=False),
        pa.field("worker", pa.int32(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # "e2e" | "confirm"
        pa.field("basis", pa.string(), nullable=False),  # "actual" | "intended"
        # the bucket's highest equivalent value at LATENCY_SIGNIFICANT_DIGITS
        pa.field("value_us", pa.int64(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
    ]
)

#: End-to-end latency from the actual send per queue (format 1.7), bucket rows as
#: LATENCY_SCHEMA's: each queue's percentiles merge exactly over workers and seconds.
QUEUE_LATENCY_SCHEMA = pa.schema(
    [
        pa.field("ts", TIMESTAMP, nullable=False),
        pa.field("elapsed_s", pa.float64(), nullable=False),
        pa.field("worker", pa.int32(), nullable=False),
        pa.field("queue", pa.string(), nullable=False),
        pa.field("value_us", pa.int64(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
    ]
)

BROKER_SCHEMA = pa.schema(
    [
        pa.field("ts", TIMESTAMP, nullable=False),  # when the poll finished
        pa.field("elapsed_s", pa.float64(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # "management" | "prometheus"
        pa.field("age_s", pa.float64(), nullable=False),
        pa.field("stale_reason", pa.string(), nullable=False),  # "" when fresh
        pa.field("statistics_interval_s", pa.float64(), nullable=False),
        pa.field("mem_used", pa.int64()),  # bytes, summed over nodes
        pa.field("mem_limit", pa.int64()),
        pa.field("mem_alarm", pa.bool_(), nullable=False),
        pa.field("disk_free", pa.int64()),  # bytes, smallest over nodes
        pa.field("disk_free_limit", pa.int64()),
        pa.field("disk_alarm", pa.bool_(), nullable=False),
        pa.field("publish_rate", pa.float64()),  # msg/s broker-wide
        pa.field("confirm_rate", pa.float64()),
        pa.field("deliver_rate", pa.float64()),
        pa.field("ack_rate", pa.float64()),
        pa.field("redeliver_rate", pa.float64()),
        pa.field("unconfirmed", pa.int64()),
        pa.field("unacked", pa.int64()),
        pa.field("queue_ready", pa.int64()),  # summed over the run's queues
        pa.field("queue_unacked", pa.int64()),
        pa.field("connections", pa.int64()),
        pa.field("connections_blocked", pa.int64()),
        pa.field("connections_blocking", pa.int64()),
        # format 1.5 (null before): flow control summed over the nodes, and the run's own
        # clients told by their connection names (management API only)
        pa.field("connections_flow", pa.int64()),
        pa.field("channels", pa.int64()),
        pa.field("channels_flow", pa.int64()),
        pa.field("run_publishers", pa.int64()),
        pa.field("run_publishers_flow", pa.int64()),
        pa.field("publishers_in_flow", pa.list_(pa.int64())),
        pa.field("run_accepted", pa.int64()),
        pa.field("run_accept_rate", pa.float64()),
        pa.field("run_unconfirmed", pa.int64()),
        pa.field("run_delivered", pa.int64()),
        pa.field("run_deliver_rate", pa.float64()),
        pa.field("run_acked", pa.int64()),
        pa.field("run_ack_rate", pa.float64()),
        pa.field("run_unacked", pa.int64()),
        # format 1.11 (null before, and in runs without streams): the stream plugin's
        # figures of the run's streams (management API only)
        pa.field("stream_connections", pa.int64()),
        pa.field("stream_consumers", pa.int64()),
        pa.field("stream_offset_lag", pa.int64()),  # messages, summed over the consumers
        pa.field("stream_offset_lag_max", pa.int64()),
        pa.field("stream_publishers", pa.int64()),
        pa.field("stream_errored", pa.int64()),
    ]
)

QUEUE_SCHEMA = pa.schema(
    [
        pa.field("ts", TIMESTAMP, nullable=False),
        pa.field("elapsed_s", pa.float64(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("queue", pa.string(), nullable=False),
        pa.field("vhost", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("ready", pa.int64(), nullable=False),
        pa.field("unacked", pa.int64(), nullable=False),
        pa.field("consumers", pa.int64(), nullable=False),
        pa.field("publish_rate", pa.float64()),
        pa.field("deliver_rate", pa.float64()),
        # where the queue lives in a cluster (format 1.4; null before): its leader (a classic
        # queue's master), every member (leader first), those online, a classic queue's
        # synchronised mirrors, and its state as the broker says it
        pa.field("leader", pa.string()),
        pa.field("members", pa.list_(pa.string())),
        pa.field("online", pa.list_(pa.string())),
        pa.field("synchronised", pa.list_(pa.string())),
        pa.field("state", pa.string()),
    ]
)

PROMETHEUS_SCHEMA = pa.schema(
    [
        pa.field("ts", TIMESTAMP, nullable=False),
        pa.field("metric", pa.string(), nullable=False),  # the PromQL expression's name
        pa.field("labels", pa.string(), nullable=False),  # JSON object of the series' labels
        pa.field("value", pa.float64(), nullable=False),
    ]
)

#: One row per tick of the controller (format 1.3): the screen's ticks are the workers'
#: snapshots aggregated at these times, so a reader that replays the first ``snapshots``
#: client rows (in writing order) into each tick rebuilds the live tick exactly.
TICK_SCHEMA = pa.schema(
    [
        pa.field("ts", TIMESTAMP, nullable=False),  # when the controller ticked
        pa.field("elapsed_s", pa.float64(), nullable=False),  # since run start
        # client rows the controller had received by this tick, counted from the run's start
        pa.field("snapshots", pa.int64(), nullable=False),
    ]
)

#: One row per node per broker poll (format 1.3); the broker table keeps the cluster's sums.
NODE_SCHEMA = pa.schema(
    [
        pa.field("ts", TIMESTAMP, nullable=False),  # the poll's, as its broker row
        pa.field("elapsed_s", pa.float64(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("mem_used", pa.int64()),  # bytes
        pa.field("mem_limit", pa.int64()),
        pa.field("mem_alarm", pa.bool_(), nullable=False),
        pa.field("disk_free", pa.int64()),
        pa.field("disk_free_limit", pa.int64()),
        pa.field("disk_alarm", pa.bool_(), nullable=False),
        pa.field("fd_used", pa.int64()),
        pa.field("fd_total", pa.int64()),
        pa.field("sockets_used", pa.int64()),
        pa.field("sockets_total", pa.int64()),
        pa.field("running", pa.bool_(), nullable=False),
        # when the node computed its figures, since run start (may be negative); null if unsaid
        pa.field("figures_elapsed_s", pa.float64()),
        # format 1.4 (null before): the nodes it cannot reach (a partition), and the quorum
        # queues' Raft term total and commit latency (seconds) from Prometheus
        pa.field("partitions", pa.list_(pa.string())),
        pa.field("raft_term_total", pa.int64()),
        pa.field("raft_commit_latency", pa.float64()),
        # format 1.5 (null before): the node's connections and channels by state
        pa.field("connections_running", pa.int64()),
        pa.field("connections_flow", pa.int64()),
        pa.field("connections_blocking", pa.int64()),
        pa.field("connections_blocked", pa.int64()),
        pa.field("channels_running", pa.int64()),
        pa.field("channels_flow", pa.int64()),
    ]
)

TABLES: dict[str, pa.Schema] = {
    CLIENT_DIR: CLIENT_SCHEMA,
    LATENCY_DIR: LATENCY_SCHEMA,
    QUEUE_LATENCY_DIR: QUEUE_LATENCY_SCHEMA,
    BROKER_DIR: BROKER_SCHEMA,
    QUEUES_DIR: QUEUE_SCHEMA,
    PROMETHEUS_DIR: PROMETHEUS_SCHEMA,
    TICKS_DIR: TICK_SCHEMA,
    NODES_DIR: NODE_SCHEMA,
}


class SessionFormatError(Exception):
    """A session that this version of flowdeck cannot read; the message says why."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """The manifest's fields. ``spec`` is the RunSpec as plain values with passwords masked.

    ``end`` and ``summary`` are None until the run ends; ``outcome`` is one of the OUTCOME_*
    values. ``versions`` holds flowdeck, RabbitMQ, Erlang and Python versions.
    """

    session_id: str
    schema_version: str
    name: str
    spec: dict[str, Any]
    start: float
    end: float | None
    outcome: str
    host: str
    versions: dict[str, str]
    recorder_pid: int | None = None
    summary: dict[str, Any] | None = None
    stop_reason: str = ""
    recording_error: str = ""  # why recording stopped early; "" when it did not
    #: The steerable settings the run had, each a client-table column (format 1.6; a
    #: session before it: :data:`SETTINGS_BEFORE_1_6`).
    settings: tuple[RecordedSetting, ...] = SETTINGS_BEFORE_1_6

    def schema(self, table: str) -> pa.Schema:
        """Table ``table``'s schema in this session (the client table has its settings)."""
        if table == CLIENT_DIR:
            return client_schema(self.settings)
        return TABLES[table]

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "schema_version": self.schema_version,
            "name": self.name,
            "spec": self.spec,
            "start": self.start,
            "end": self.end,
            "outcome": self.outcome,
            "host": self.host,
            "versions": self.versions,
            "recorder_pid": self.recorder_pid,
            "summary": self.summary,
            "stop_reason": self.stop_reason,
            "recording_error": self.recording_error,
            "settings": [setting.to_json() for setting in self.settings],
        }


def check_schema_version(version: str, where: str) -> None:
    """Refuse sessions written by a newer major version of the format."""
    try:
        major = int(str(version).split(".")[0])
    except ValueError:
        raise SessionFormatError(
            f"{where}: schema_version {version!r} is not a version number"
        ) from None
    if major > SCHEMA_MAJOR:
        raise SessionFormatError(
            f"{where}: written with session format {version}, newer than this flowdeck reads "
            f"({SCHEMA_VERSION}); upgrade flowdeck to read it"
        )


def looks_like_session(path: Path) -> bool:
    """True for a directory that holds a session's files, even one whose manifest is gone
    (so listings show it as broken instead of hiding it)."""
    if not path.is_dir():
        return False
    return (
        (path / MANIFEST).exists()
        or (path / EVENTS).exists()
        or any((path / table).is_dir() for table in TABLES)
    )


def read_manifest(session_dir: Path) -> Manifest:
    """Read and check a manifest; older minor and major versions read, newer majors refuse."""
    path = session_dir / MANIFEST
    if not os.path.lexists(path):
        if looks_like_session(session_dir):
            raise SessionFormatError(
                f"{session_dir}: {MANIFEST} is missing, so the session's other files cannot "
                "be read; `flowdeck sessions delete` removes it"
            )
        raise SessionFormatError(f"{session_dir}: not a session (no {MANIFEST})")
    try:
        raw = read_file_json(path, what="file", limit=MANIFEST_LIMIT)
    except UnreadableFile as exc:
        raise SessionFormatError(f"unreadable manifest: {exc.message}") from None
    if not isinstance(raw, dict):
        raise SessionFormatError(f"{path}: manifest is not a JSON object")
    check_schema_version(raw.get("schema_version", "0"), str(path))
    for key in ("session_id", "schema_version", "start"):
        if key not in raw:
            raise SessionFormatError(f"{path}: manifest field {key!r} is missing")
    end = raw.get("end")
    return Manifest(
        session_id=str(raw["session_id"]),
        schema_version=str(raw["schema_version"]),
        name=str(raw.get("name", "")),
        spec=_object(raw, "spec", path),
        start=_time(raw, "start", path),
        end=None if end is None else _time(raw, "end", path),
        outcome=str(raw.get("outcome", OUTCOME_RUNNING)),
        host=str(raw.get("host", "")),
        versions={str(k): str(v) for k, v in _object(raw, "versions", path).items()},
        recorder_pid=_pid(raw, path),
        summary=_summary(raw, path),
        stop_reason=str(raw.get("stop_reason", "")),
        recording_error=str(raw.get("recording_error") or ""),
        settings=_settings(raw, path),
    )


def _settings(raw: dict[str, Any], path: Path) -> tuple[RecordedSetting, ...]:
    listed = raw.get("settings")
    if listed is None:
        return SETTINGS_BEFORE_1_6
    if not isinstance(listed, list) or not listed:
        raise _wrong(path, "settings", "a list of settings", listed)
    settings = tuple(RecordedSetting.from_json(item, str(path)) for item in listed)
    names = [setting.name for setting in settings]
    if len(set(names)) < len(names) or set(names) & set(_BASE_CLIENT_COLUMNS):
        raise SessionFormatError(f"{path}: manifest settings repeat a column: {names}")
    return settings


def _wrong(path: Path, key: str, expected: str, value: Any) -> SessionFormatError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else f"{shown[:57]}..."
    return SessionFormatError(f"{path}: manifest field {key!r} must be {expected}, got {shown}")


def _object(raw: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = raw.get(key) or {}
    if not isinstance(value, dict):
        raise _wrong(path, key, "an object", value)
    return value


def _time(raw: dict[str, Any], key: str, path: Path) -> float:
    value = raw[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= LATEST_TIME
    ):
        raise _wrong(path, key, "a Unix time in seconds (1970 to 9999)", value)
    return float(value)


def _pid(raw: dict[str, Any], path: Path) -> int | None:
    value = raw.get("recorder_pid")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise _wrong(path, "recorder_pid", "a process id", value)
    return value


def _summary(raw: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """The summary as the recorder wrote it; its ``safety`` values must be numbers (or
    true/false), as every reader shows them with thousands separators."""
    summary = raw.get("summary")
    if summary is None:
        return None
    if not isinstance(summary, dict):
        raise _wrong(path, "summary", "an object", summary)
    safety = summary.get("safety")
    if safety is None:
        return summary
    if not isinstance(safety, dict):
        raise _wrong(path, "summary.safety", "an object of counts", safety)
    for name, count in safety.items():
        if not isinstance(count, int | float):  # counts, and the ``confirms`` flag
            raise _wrong(path, f"summary.safety.{name}", "a count", count)
    return summary


def part_files(table_dir: Path) -> list[Path]:
    """A table's part files in writing order; temporary and hidden files are not parts."""
    if not table_dir.is_dir():
        return []
    return sorted(
        path
        for path in table_dir.iterdir()
        if path.suffix == ".parquet" and not path.name.startswith((".", "_"))
    )


def read_part(part: Path, schema: pa.Schema) -> pa.Table:
    """One part file in ``schema`` (see :func:`conform`); SessionFormatError saying why for a
    part that does not read (truncated, garbage, a column of the wrong type)."""
    try:
        return conform(pq.read_table(part), schema, str(part))
    # UnicodeDecodeError: garbled bytes in a column name that Parquet still parsed
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())
        raise SessionFormatError(f"{part}: unreadable part, left out: {reason}") from None


def readable_parts(table_dir: Path, schema: pa.Schema) -> tuple[list[Path], list[str]]:
    """A table's parts that read in ``schema``, and one line for each that does not: what
    the Spark job gives Spark, so one broken part leaves only itself out of a report."""
    good: list[Path] = []
    problems: list[str] = []
    for part in part_files(table_dir):
        try:
            read_part(part, schema)
        except SessionFormatError as exc:
            problems.append(str(exc))
        else:
            good.append(part)
    return good, problems


def conform(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """``table`` in exactly ``schema``'s columns and types, whatever version wrote it.

    A column an older version did not write is added as nulls when the schema allows
    nulls (as 1.0's missing ``errors``); a column a newer minor version added is dropped.
    A missing required column or a type that does not convert raises SessionFormatError.
    """
    columns = []
    for schema_field in schema:
        if schema_field.name in table.column_names:
            column = table.column(schema_field.name)
            if column.type != schema_field.type:
                try:
                    column = column.cast(schema_field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SessionFormatError(
                        f"{where}: column {schema_field.name!r} is {column.type}, "
                        f"expected {schema_field.type}: {exc}"
                    ) from None
            columns.append(column)
        elif schema_field.nullable:
            columns.append(pa.nulls(table.num_rows, schema_field.type))
        else:
            raise SessionFormatError(f"{where}: required column {schema_field.name!r} is missing")
    return pa.Table.from_arrays(columns, schema=schema)
