"""Finding and reading sessions through the session-format contract, local or Hadoop URI.

Manifests and event logs are small: a local session reads them from the file system; any
other URI (``hdfs://``, ``s3a://``...) reads them through Spark's text reader, so the job
runs unchanged on a cluster. The Parquet tables are always read by Spark.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from flowdeck.engine.recording.format import (
    EVENTS,
    MANIFEST,
    OUTCOME_RUNNING,
    TABLES,
    Manifest,
    SessionFormatError,
    conform,
    read_manifest,
    read_part,
    readable_parts,
)
from flowdeck.figures.phases import Phase, split_phases
from flowdeck.spark_reports.inputs import is_local, local_path, normalise


@dataclass(frozen=True, slots=True)
class Session:
    """One session to report on: where it is, its manifest, events and phases.

    ``key`` is unique among the sessions of one report and safe in file names. ``parts``
    holds, for a local session, each table's part files that read (:func:`open_sessions`
    says which it left out); a remote session's tables are read whole.
    """

    uri: str
    key: str
    manifest: Manifest
    events: tuple[dict[str, Any], ...]
    phases: tuple[Phase, ...]
    parts: Mapping[str, tuple[str, ...]] | None = None

    @property
    def title(self) -> str:
        return self.manifest.name or self.manifest.session_id

    @property
    def start_us(self) -> int:
        return round(self.manifest.start * 1_000_000)

    @property
    def spec_rate(self) -> float | None:
        """The spec's per-publisher rate (msg/s), when the spec sets one."""
        value = self.manifest.spec.get("rate")
        return float(value) if isinstance(value, int | float) and value > 0 else None


def _read_text(spark: SparkSession, uri: str) -> str | None:
    try:
        rows = spark.read.text(uri, wholetext=True).collect()
    except AnalysisException:
        return None
    return "".join(str(row[0]) for row in rows)


def load_manifest(spark: SparkSession, uri: str) -> Manifest:
    if is_local(uri):
        return read_manifest(local_path(uri))
    text = _read_text(spark, f"{uri}/{MANIFEST}")
    if text is None:
        raise SessionFormatError(f"{uri}: not a session (no {MANIFEST})")
    # read_manifest is the one place that checks a manifest: give it a local copy.
    with tempfile.TemporaryDirectory(prefix="flowdeck-manifest-") as copy:
        (Path(copy) / MANIFEST).write_text(text, encoding="utf-8")
        return read_manifest(Path(copy))


def load_events(spark: SparkSession, uri: str) -> list[dict[str, Any]]:
    """The event log; a torn last line (a crash mid-write) is skipped, not fatal."""
    if is_local(uri):
        path = local_path(uri) / EVENTS
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    else:
        text = _read_text(spark, f"{uri}/{EVENTS}") or ""
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "at" in event and "kind" in event:
            events.append(event)
    events.sort(key=lambda e: float(e["at"]))
    return events


def _slug(text: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in text.strip())
    return "-".join(part for part in cleaned.split("-") if part)[:60] or "session"


def _local_parts(uri: str, manifest: Manifest) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Each table's part files that read, and one line per part that does not: Spark fails
    the whole job on one unreadable file, so a broken part must not reach it."""
    parts: dict[str, tuple[str, ...]] = {}
    problems: list[str] = []
    for table in TABLES:
        good, bad = readable_parts(local_path(uri) / table, manifest.schema(table))
        parts[table] = tuple(str(path) for path in good)
        problems += bad
    return parts, problems


def open_sessions(spark: SparkSession, uris: Sequence[str]) -> tuple[list[Session], list[str]]:
    """Read the manifests and events of the given sessions and split them into phases.

    Returns the sessions and one line for each session or part left out: a session whose
    manifest does not read is skipped, so one broken session does not stop the report on
    the others (SessionFormatError when none reads).
    """
    sessions: list[Session] = []
    skipped: list[str] = []
    used: set[str] = set()
    for raw in uris:
        uri = normalise(raw)
        try:
            manifest = load_manifest(spark, uri)
        except SessionFormatError as exc:
            skipped.append(f"skipped session {raw!r}: {exc}")
            continue
        events = load_events(spark, uri)
        parts: dict[str, tuple[str, ...]] | None = None
        if is_local(uri):
            parts, problems = _local_parts(uri, manifest)
            skipped += problems
        end = manifest.end
        if manifest.outcome == OUTCOME_RUNNING:
            end = None  # unfinished: its end is where its data ends
        phases = split_phases(events, manifest.start, end)
        key = _slug(manifest.name or manifest.session_id)
        if key in used:
            key = _slug(f"{key}-{manifest.session_id}")
        while key in used:
            key = f"{key}-{len(used)}"
        used.add(key)
        sessions.append(
            Session(
                uri=uri,
                key=key,
                manifest=manifest,
                events=tuple(events),
                phases=tuple(phases),
                parts=parts,
            )
        )
    if not sessions:
        raise SessionFormatError("no session could be read: " + "; ".join(skipped))
    return sessions, skipped


_SPARK_TYPES: dict[str, T.DataType] = {
    "timestamp[us, tz=UTC]": T.TimestampType(),
    "double": T.DoubleType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    "string": T.StringType(),
    "bool": T.BooleanType(),
}


def spark_schema(table: str, manifest: Manifest) -> T.StructType:
    """The Spark schema of one of a session's tables, from its pyarrow schema."""
    fields = []
    for arrow_field in manifest.schema(table):
        spark_type = _SPARK_TYPES.get(str(arrow_field.type))
        if spark_type is None:
            raise SessionFormatError(
                f"table {table!r} column {arrow_field.name!r} has type {arrow_field.type}, "
                "which the report job does not know; update spark_reports.sessions"
            )
        fields.append(T.StructField(arrow_field.name, spark_type, True))
    return T.StructType(fields)


def read_table(
    spark: SparkSession,
    sessions: Sequence[Session],
    table: str,
    each: Callable[[Session, DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """One of the format's tables for all sessions, with a ``session`` key column;
    ``each`` adds a session's own columns to its rows before the sessions are put
    together (constants of the session, not a lookup per row)."""
    frames: list[DataFrame] = []

    def add(session: Session, frame: DataFrame) -> DataFrame:
        keyed = frame.withColumn("session", F.lit(session.key))
        return keyed if each is None else each(session, keyed)

    for session in sessions:
        uri = f"{session.uri}/{table}"
        schema = spark_schema(table, session.manifest)
        if session.parts is not None:
            if not session.parts[table]:
                continue
            frame = spark.read.schema(schema).parquet(*session.parts[table])
        else:
            try:
                frame = spark.read.schema(schema).parquet(uri)
            except AnalysisException:
                continue  # no such directory on a remote file system: the table is empty
        frames.append(add(session, frame))
    if not frames:
        empty = spark.createDataFrame([], spark_schema(table, sessions[0].manifest))
        return add(sessions[0], empty)
    result = frames[0]
    for frame in frames[1:]:
        # Sessions that recorded different settings have different client columns.
        result = result.unionByName(frame, allowMissingColumns=True)
    return result


def small_table(spark: SparkSession, session: Session, table: str) -> pa.Table:
    """One of a session's small tables (a row per worker-second or per poll) whole, for the
    driver: a local session's readable parts straight from disk, a remote one's through
    Spark's reader and Arrow. Either way in the format's schema."""
    schema = session.manifest.schema(table)
    if session.parts is not None:
        parts = [read_part(Path(part), schema) for part in session.parts[table]]
        return pa.concat_tables(parts) if parts else schema.empty_table()
    try:
        frame = spark.read.schema(spark_schema(table, session.manifest)).parquet(
            f"{session.uri}/{table}"
        )
    except AnalysisException:
        return schema.empty_table()  # no such directory on a remote file system
    return conform(frame.toArrow(), schema, f"{session.uri}/{table}")
