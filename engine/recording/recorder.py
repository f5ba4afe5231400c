"""The Recorder: writes a run to disk as a session while the run goes.

The controller hands it every worker snapshot, broker sample and event. Rows are kept
in memory and, every ``flush_seconds``, handed to one background thread that writes
each table's rows as a new Parquet part (hidden temporary name, fsync, rename), so the
controller's loop never waits on the disk and a SIGKILL loses at most the last few
seconds. Events go to ``events.jsonl`` at once, one flushed line each.

Recording must never stop a run: a disk error (full disk, unwritable directory) sets
:attr:`Recorder.error`, stops recording and keeps every part already written. No method
raises into the caller.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import queue
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from flowdeck.collectors.broker_uri import mask_text, mask_value
from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LATENCY_KEYS, BucketDecoder, LatencyKey, recorded_buckets
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.location import SESSIONS_DIR_ENV as SESSIONS_DIR_ENV
from flowdeck.engine.recording.location import default_sessions_root as default_sessions_root
from flowdeck.engine.recording.rows import (
    CLIENT_SCHEMA,
    RECORDED_SETTINGS,
    broker_row,
    client_row,
    interval_delta,
    t_us,
)
from flowdeck.engine.sinks import PrometheusRow, RunStarted
from flowdeck.engine.snapshot import ClientSnapshot, Counters
from flowdeck.engine.spec import RunSpec

DEFAULT_FLUSH_SECONDS = 2.0
#: Space set aside at start for the final manifest, freed just before writing it, so a
#: full disk still gets told how the run ended. A hidden file: readers and Spark skip it.
MANIFEST_RESERVE = ".manifest-reserve"
MANIFEST_RESERVE_BYTES = 64 * 1024
#: How long ``close`` waits for the writer to finish the last parts before giving up.
CLOSE_TIMEOUT_SECONDS = 30.0


def new_session_id(name: str, at: float) -> str:
    """A session id that sorts by start time (UTC): ``20261122-143015-bench2-sweep-1a2b``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(at))
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40].strip("-") or "run"
    return f"{stamp}-{slug}-{secrets.token_hex(2)}"


def _describe_os_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{exc.strerror or exc} [{name}]"
    return f"{type(exc).__name__}: {exc}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` whole or not at all: hidden temp name, fsync, rename, fsync dir."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with open(temporary, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


#: Snappy (Parquet's default) costs half the CPU of zstd for parts ~40% larger; recording
#: CPU is the budget that matters (issue 4: < 2% of the engine's). Dictionary encoding
#: where values repeat: text columns and the per-histogram constants of latency rows.
#: Statistics only on the time columns, which a reader may filter on.
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "snappy",
    "use_dictionary": [
        "ts",
        "elapsed_s",
        "worker",
        "kind",
        "basis",
        "source",
        "queue",
        "vhost",
        "type",
        "metric",
        "labels",
        "stale_reason",
    ],
    "write_statistics": ["ts", "elapsed_s"],
}


def _rows_table(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    columns = list(zip(*rows, strict=True))
    return pa.Table.from_arrays(
        [pa.array(column, type=f.type) for column, f in zip(columns, schema, strict=True)],
        schema=schema,
    )


def _queue_latency_table(
    intervals: list[tuple[int, float, int, Mapping[str, bytes]]], decoder: BucketDecoder
) -> pa.Table:
    """Bucket rows of every queue's end-to-end histogram of every buffered snapshot."""
    rows: list[tuple[int, float, int, str, int, int]] = []
    for ts_us, elapsed_s, worker_id, histograms in intervals:
        for name, encoded in histograms.items():
            if not encoded:
                continue
            value_us, count = recorded_buckets(encoded, decoder)
            rows += [
                (ts_us, elapsed_s, worker_id, name, int(v), int(c))
                for v, c in zip(value_us, count, strict=True)
            ]
    if not rows:
        return fmt.QUEUE_LATENCY_SCHEMA.empty_table()
    return _rows_table(rows, fmt.QUEUE_LATENCY_SCHEMA)


def _latency_table(
    intervals: list[tuple[int, float, int, Mapping[LatencyKey, bytes]]], decoder: BucketDecoder
) -> pa.Table:
    """Bucket rows for every (kind, basis) histogram of every buffered snapshot.

    One histogram gives hundreds to thousands of rows, so the per-row columns are built
    with numpy (repeat per histogram), never a Python loop over rows.
    """
    ts: list[int] = []
    elapsed: list[float] = []
    worker: list[int] = []
    key: list[int] = []
    lengths: list[int] = []
    values: list[npt.NDArray[np.int64]] = []
    counts: list[npt.NDArray[np.int64]] = []
    for ts_us, elapsed_s, worker_id, histograms in intervals:
        for latency_key, encoded in histograms.items():
            if not encoded:
                continue
            value_us, count = recorded_buckets(encoded, decoder)
            if len(value_us) == 0:
                continue
            ts.append(ts_us)
            elapsed.append(elapsed_s)
            worker.append(worker_id)
            key.append(_KEY_INDEX[latency_key])
            lengths.append(len(value_us))
            values.append(value_us)
            counts.append(count)
    schema = fmt.LATENCY_SCHEMA
    if not values:
        return schema.empty_table()
    repeats = np.asarray(lengths)
    keys = np.repeat(np.asarray(key), repeats)
    return pa.Table.from_arrays(
        [
            pa.array(
                np.repeat(np.asarray(ts, dtype=np.int64), repeats), type=schema.field("ts").type
            ),
            pa.array(np.repeat(np.asarray(elapsed, dtype=np.float64), repeats)),
            pa.array(np.repeat(np.asarray(worker, dtype=np.int32), repeats)),
            _KINDS.take(keys),
            _BASES.take(keys),
            pa.array(np.concatenate(values)),
            pa.array(np.concatenate(counts)),
        ],
        schema=schema,
    )


#: The client and broker tables' columns in schema order, by the names their rows use.
_CLIENT_COLUMNS = tuple("t_us" if name == "ts" else name for name in CLIENT_SCHEMA.names)
_BROKER_COLUMNS = tuple("t_us" if name == "ts" else name for name in fmt.BROKER_SCHEMA.names)
_KEY_INDEX: dict[LatencyKey, int] = {key: index for index, key in enumerate(LATENCY_KEYS)}
_KINDS = pa.array([kind.value for kind, _ in LATENCY_KEYS], type=pa.string())
_BASES = pa.array([basis.value for _, basis in LATENCY_KEYS], type=pa.string())


class Recorder:
    """Records one run as a session directory under ``root`` (see ``format``).

    Call :meth:`start` once, then :meth:`snapshot`, :meth:`tick`, :meth:`broker`, :meth:`event` and
    :meth:`prometheus_range` as the run goes, and :meth:`close` once at the end. Every
    method may be called after a disk error: it then does nothing. ``error`` says why
    recording stopped; ``session_dir`` is where the session is (or would have been).
    The controller drives it as an :class:`engine.sinks.Sink` (``on_start`` ... ``on_finish``).
    """

    def __init__(
        self,
        root: Path,
        spec: RunSpec,
        *,
        versions: Mapping[str, str] = {},
        session_id: str | None = None,
        flush_seconds: float = DEFAULT_FLUSH_SECONDS,
    ) -> None:
        self.spec = spec
        self.versions = dict(versions)
        self.versions.setdefault("python", platform.python_version())
        self.versions.setdefault("flowdeck", _flowdeck_version())
        self.session_id = session_id or new_session_id(spec.name, time.time())
        self.session_dir = Path(root) / self.session_id
        self.flush_seconds = flush_seconds
        self.error: str | None = None
        self.started_at: float | None = None
        self.closed = False
        #: Worker snapshots taken (each one client row), for progress and tests.
        self.snapshots_recorded = 0

        self._events_file: IO[str] | None = None
        self._early_events: list[RunEvent] = []
        self._last_counters: dict[int, Counters] = {}
        self._client_rows: list[tuple[Any, ...]] = []
        self._latency: list[tuple[int, float, int, Mapping[LatencyKey, bytes]]] = []
        self._queue_latency: list[tuple[int, float, int, Mapping[str, bytes]]] = []
        self._broker_rows: list[tuple[Any, ...]] = []
        self._queue_rows: list[tuple[Any, ...]] = []
        self._prometheus_rows: list[tuple[float, str, str, float]] = []
        self._tick_rows: list[tuple[Any, ...]] = []
        self._node_rows: list[tuple[Any, ...]] = []
        self._next_part: dict[str, int] = dict.fromkeys(fmt.TABLES, 0)
        self._last_flush = time.monotonic()
        self._jobs: queue.Queue[tuple[Path, Callable[[], pa.Table]] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._decoder = BucketDecoder()  # used by the writer thread only

    # -- the run's calls -------------------------------------------------------------------

    def start(self, at: float) -> None:
        """Create the session directory, write the manifest (outcome ``running``)."""
        if self.started_at is not None or self.error:
            return
        self.started_at = at
        try:
            self.session_dir.mkdir(parents=True, exist_ok=False)
            for table in fmt.TABLES:
                (self.session_dir / table).mkdir()
            self._write_manifest(outcome=fmt.OUTCOME_RUNNING, summary=None, end=None)
            with open(self.session_dir / MANIFEST_RESERVE, "wb") as reserve:
                reserve.write(bytes(MANIFEST_RESERVE_BYTES))
            self._events_file = open(  # noqa: SIM115 - open for the whole run
                self.session_dir / fmt.EVENTS, "a", encoding="utf-8"
            )
        except OSError as exc:
            # Name the sessions directory the operator chose, not the session that is not there.
            self._fail(
                f"recording is off: cannot create the session under {self.session_dir.parent}: "
                f"{_describe_os_error(exc)}; choose a writable directory with --sessions-dir "
                f"or {SESSIONS_DIR_ENV}"
            )
            return
        self._writer = threading.Thread(
            target=self._write_parts, name=f"recorder {self.session_id}", daemon=True
        )
        self._writer.start()
        early, self._early_events = self._early_events, []
        for event in early:
            self.event(event)

    def snapshot(self, snap: ClientSnapshot) -> None:
        """One worker's second: counters become this interval's deltas, latency bucket rows."""
        if not self._recording():
            return
        try:
            delta = interval_delta(snap, self._last_counters.get(snap.worker))
            self._last_counters[snap.worker] = snap.counters
            row = client_row(snap, delta, self.started_at or snap.at)
            ts_us, elapsed = row["t_us"], row["elapsed_s"]
            self._client_rows.append(tuple(row[name] for name in _CLIENT_COLUMNS))
            if snap.latency:
                self._latency.append((ts_us, elapsed, snap.worker, dict(snap.latency)))
            if snap.queue_latency:
                self._queue_latency.append((ts_us, elapsed, snap.worker, dict(snap.queue_latency)))
            self.snapshots_recorded += 1
        except Exception as exc:  # a malformed snapshot must not stop the run
            self._fail(f"recording stopped: cannot record a worker snapshot: {exc!r}")
            return
        self._flush_if_due()

    def broker(self, sample: BrokerSample) -> None:
        """One poll of a broker-side source: a broker row and one row per queue."""
        if not self._recording():
            return
        # The broker's versions go into the manifest (written again at close).
        if sample.broker_version:
            self.versions.setdefault("rabbitmq", sample.broker_version)
        if sample.erlang_version:
            self.versions.setdefault("erlang", sample.erlang_version)
        try:
            row = broker_row(sample, self.started_at or sample.taken_at)
            ts_us, elapsed = row["t_us"], row["elapsed_s"]
            nodes = sample.nodes
            self._broker_rows.append(tuple(row[name] for name in _BROKER_COLUMNS))
            self._queue_rows.extend(
                (
                    ts_us,
                    elapsed,
                    sample.source,
                    q.name,
                    q.vhost,
                    q.type,
                    q.ready,
                    q.unacked,
                    q.consumers,
                    q.publish_rate,
                    q.deliver_rate,
                    q.leader,
                    list(q.members),
                    list(q.online),
                    list(q.synchronised),
                    q.state,
                )
                for q in sample.queues
            )
            self._node_rows.extend(
                (
                    ts_us,
                    elapsed,
                    sample.source,
                    n.name,
                    n.mem_used,
                    n.mem_limit,
                    n.mem_alarm,
                    n.disk_free,
                    n.disk_free_limit,
                    n.disk_alarm,
                    n.fd_used,
                    n.fd_total,
                    n.sockets_used,
                    n.sockets_total,
                    n.running,
                    None
                    if n.figures_at is None
                    else n.figures_at - (self.started_at or n.figures_at),
                    list(n.partitions),
                    n.raft_term_total,
                    n.raft_commit_latency,
                    n.connections_running,
                    n.connections_flow,
                    n.connections_blocking,
                    n.connections_blocked,
                    n.channels_running,
                    n.channels_flow,
                )
                for n in nodes
            )
        except Exception as exc:
            self._fail(f"recording stopped: cannot record a broker sample: {exc!r}")
            return
        self._flush_if_due()

    def tick(self, at: float) -> None:
        """The controller ticked at ``at`` with every snapshot recorded so far: a tick row, so
        a reader rebuilds each tick from exactly the snapshots it had."""
        if not self._recording():
            return
        elapsed = at - (self.started_at or at)
        self._tick_rows.append((t_us(at), elapsed, self.snapshots_recorded))
        self._flush_if_due()

    def event(self, event: RunEvent) -> None:
        """Append the event to ``events.jsonl`` now (URI passwords masked).

        After a disk error only the event saying recording stopped is still tried (once the
        parts fail, the event log may still take a line); it never raises.
        """
        if self.closed:
            return
        if self.error:
            if event.kind is EventKind.RECORDING_STOPPED and self._events_file is not None:
                with contextlib.suppress(OSError, TypeError, ValueError):
                    line = json.dumps(mask_value(event.to_json()), separators=(",", ":"))
                    self._events_file.write(line + "\n")
                    self._events_file.flush()
            return
        if self._events_file is None:
            self._early_events.append(event)  # before start(): written when it starts
            return
        try:
            line = json.dumps(mask_value(event.to_json()), separators=(",", ":"))
            self._events_file.write(line + "\n")
            self._events_file.flush()
        except (OSError, TypeError, ValueError) as exc:
            self._fail(
                f"recording stopped: cannot append to {self.session_dir / fmt.EVENTS}: "
                f"{_describe_os_error(exc)}"
            )

    def prometheus_range(self, rows: Iterable[tuple[float, str, str, float]]) -> None:
        """The Prometheus range query over the run: ``(unix time, metric, labels JSON, value)``."""
        if not self._recording():
            return
        try:
            self._prometheus_rows.extend(
                (float(at), str(metric), str(labels), float(value))
                for at, metric, labels, value in rows
            )
        except (TypeError, ValueError) as exc:
            self._fail(f"recording stopped: cannot record the Prometheus range query: {exc!r}")
            return
        self._flush()

    def flush(self, wait: bool = False) -> None:
        """Hand the buffered rows to the writer now; with ``wait``, until they are on disk."""
        if not self._recording():
            return
        self._flush()
        if wait:
            self._jobs.join()

    def close(
        self, outcome: str, summary: Mapping[str, Any], at: float, stop_reason: str = ""
    ) -> None:
        """Write the last parts and the final manifest (end, outcome, summary)."""
        if self.closed or self.started_at is None:
            self.closed = True
            return
        if not self.error:
            self._flush()
        self._jobs.put(None)
        if self._writer is not None:
            self._writer.join(CLOSE_TIMEOUT_SECONDS)
            if self._writer.is_alive():
                self._fail(
                    f"recording stopped: the disk did not take the last parts within "
                    f"{CLOSE_TIMEOUT_SECONDS:.0f} s"
                )
        self.closed = True
        if self._events_file is not None:
            try:
                self._events_file.flush()
                os.fsync(self._events_file.fileno())
                self._events_file.close()
            except OSError as exc:
                self._fail(
                    f"recording stopped: cannot finish {self.session_dir / fmt.EVENTS}: "
                    f"{_describe_os_error(exc)}"
                )
        # Even after a disk error, try to say how the run ended: the reserve frees room for
        # it, and it is replaced atomically, so a failed attempt leaves "running" in place.
        try:
            (self.session_dir / MANIFEST_RESERVE).unlink(missing_ok=True)
            self._write_manifest(
                outcome=outcome,
                summary=mask_value(dict(summary)),
                end=at,
                stop_reason=mask_text(stop_reason),
            )
        except OSError as exc:
            self._fail(self._write_failure(self.session_dir / fmt.MANIFEST, exc))

    # -- as the controller's sink (engine.sinks.Sink) ---------------------------------------

    def on_start(self, run: RunStarted) -> None:
        self.start(run.started_at)

    def on_snapshot(self, snapshot: ClientSnapshot) -> None:
        self.snapshot(snapshot)

    def on_tick(self, tick: Tick) -> None:
        self.tick(tick.at)

    def on_event(self, event: RunEvent) -> None:
        self.event(event)

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self.broker(sample)

    def on_prometheus_range(self, rows: Sequence[PrometheusRow]) -> None:
        self.prometheus_range(rows)

    def on_finish(self, summary: RunSummary) -> None:
        self.close(summary.outcome, summary.to_json(), summary.ended, summary.stop_reason)

    # -- inside ----------------------------------------------------------------------------

    def _recording(self) -> bool:
        return self.started_at is not None and not self.error and not self.closed

    def _fail(self, message: str) -> None:
        if self.error is None:
            self.error = message

    def _flush_if_due(self) -> None:
        if time.monotonic() - self._last_flush >= self.flush_seconds:
            self._flush()

    def _flush(self) -> None:
        self._last_flush = time.monotonic()
        if self._client_rows:
            rows, self._client_rows = self._client_rows, []
            self._queue_part(fmt.CLIENT_DIR, lambda: _rows_table(rows, CLIENT_SCHEMA))
        if self._latency:
            intervals, self._latency = self._latency, []
            self._queue_part(fmt.LATENCY_DIR, lambda: _latency_table(intervals, self._decoder))
        if self._queue_latency:
            queued, self._queue_latency = self._queue_latency, []
            self._queue_part(
                fmt.QUEUE_LATENCY_DIR, lambda: _queue_latency_table(queued, self._decoder)
            )
        if self._broker_rows:
            broker_rows, self._broker_rows = self._broker_rows, []
            self._queue_part(fmt.BROKER_DIR, lambda: _rows_table(broker_rows, fmt.BROKER_SCHEMA))
        if self._queue_rows:
            queue_rows, self._queue_rows = self._queue_rows, []
            self._queue_part(fmt.QUEUES_DIR, lambda: _rows_table(queue_rows, fmt.QUEUE_SCHEMA))
        if self._tick_rows:
            tick_rows, self._tick_rows = self._tick_rows, []
            self._queue_part(fmt.TICKS_DIR, lambda: _rows_table(tick_rows, fmt.TICK_SCHEMA))
        if self._node_rows:
            node_rows, self._node_rows = self._node_rows, []
            self._queue_part(fmt.NODES_DIR, lambda: _rows_table(node_rows, fmt.NODE_SCHEMA))
        if self._prometheus_rows:
            prometheus, self._prometheus_rows = self._prometheus_rows, []
            self._queue_part(
                fmt.PROMETHEUS_DIR,
                lambda: _rows_table(
                    [(t_us(at), m, labels, v) for at, m, labels, v in prometheus],
                    fmt.PROMETHEUS_SCHEMA,
                ),
            )

    def _queue_part(self, table: str, build: Callable[[], pa.Table]) -> None:
        number = self._next_part[table]
        self._next_part[table] = number + 1
        self._jobs.put((self.session_dir / table / fmt.PART_PATTERN.format(number), build))

    def _write_parts(self) -> None:
        """The writer thread: builds and writes each queued part; stops at ``None``."""
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self.error:
                    continue  # recording stopped: drop what was still queued
                path, build = job
                try:
                    table = build()

                    def write_table(out: IO[bytes], table: pa.Table = table) -> None:
                        pq.write_table(table, out, **_PARQUET_OPTIONS)

                    _write_atomically(path, write_table)
                    if self._events_file is not None and not self._events_file.closed:
                        os.fsync(self._events_file.fileno())
                except Exception as exc:
                    self._fail(self._write_failure(path, exc))
            finally:
                self._jobs.task_done()

    def _write_failure(self, path: Path, exc: BaseException) -> str:
        """Why a part could not be written; names the session directory only if it exists."""
        if not self.session_dir.is_dir():
            return (
                f"recording stopped: session {self.session_id} was removed from disk while the "
                f"run went on ({_describe_os_error(exc)}); nothing of it is kept"
            )
        return (
            f"recording stopped: cannot write {path}: {_describe_os_error(exc)}; "
            f"the parts written before are kept in {self.session_dir}"
        )

    def _write_manifest(
        self,
        *,
        outcome: str,
        summary: dict[str, Any] | None,
        end: float | None,
        stop_reason: str = "",
    ) -> None:
        manifest = fmt.Manifest(
            session_id=self.session_id,
            schema_version=fmt.SCHEMA_VERSION,
            name=self.spec.name,
            spec=mask_value(self.spec.redacted()),
            start=self.started_at if self.started_at is not None else time.time(),
            end=end,
            outcome=outcome,
            host=socket.gethostname(),
            versions=self.versions,
            recorder_pid=os.getpid(),
            summary=summary,
            stop_reason=stop_reason,
            recording_error=self.error or "",
            settings=RECORDED_SETTINGS,
        )
        text = json.dumps(manifest.to_json(), indent=2, sort_keys=False) + "\n"

        def write_text(out: IO[bytes]) -> None:
            out.write(text.encode("utf-8"))

        _write_atomically(self.session_dir / fmt.MANIFEST, write_text)


def _flowdeck_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("flowdeck")
    except PackageNotFoundError:
        return "unknown"
