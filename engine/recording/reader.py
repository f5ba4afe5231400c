"""Reading sessions back: the list, one session's tables and events, totals, CSV export,
and the run's ticks and broker samples as the live screen had them (for replay).

Everything here reads through ``engine.recording.format`` (the same contract the Spark
report uses), so a session reads the same whichever tool opens it. Sessions from older
format versions read (missing columns are filled, see :func:`format.conform`); a newer
major version is refused with a message saying to upgrade.

:meth:`Session.ticks` does not re-derive a second its own way: it turns the client rows
back into the workers' snapshots and feeds them, in the order the controller received
them, through the engine's :class:`~engine.aggregate.SnapshotAggregator`, at the times the
controller ticked. What the session does not hold, and so what a replayed tick may differ
in from the live one, is said there.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from hdrh.histogram import HdrHistogram

from flowdeck.collectors import UnreadableFile, read_file_bytes
from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample, SourceName
from flowdeck.engine.aggregate import SnapshotAggregator, assemble_tick
from flowdeck.engine.change import Change, Setting, apply_change
from flowdeck.engine.errors import FlowdeckError, SpecError, did_you_mean
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import (
    HIGHEST_US,
    LOWEST_US,
    LatencyKey,
    LatencyKind,
    SendBasis,
    encode,
)
from flowdeck.engine.progress import PendingChange, Tick
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.rows import SETTING_COLUMNS, t_us
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec, ScheduleStep, settings_of, spec_from_mapping
from flowdeck.figures import RunFigures, RunInputs, run_figures
from flowdeck.figures.latency import Percentiles, percentiles_of
from flowdeck.figures.phases import HALF_SECOND_US, Phase, split_phases
from flowdeck.figures.trend import sustained_peak

#: Counter columns of the client table, summed into totals and per-second series.
COUNTER_COLUMNS = tuple(Counters.__dataclass_fields__)
#: Gauge columns of the client table, summed over workers per second (last value each).
GAUGE_COLUMNS = ("pending_confirms", "unacked", "connections", "blocked_connections")


#: The name of the one node a broker sample of a session before format 1.3 reads back
#: with. Those sessions hold only the cluster's figures (memory summed, smallest disk free,
#: alarms of any node), not one row per node, so node names are not on disk; this name says
#: so wherever it shows.
RECORDED_NODES = "(nodes not recorded)"
#: The longest event log read (a day's run with a change a second writes ~20 MiB).
EVENT_LOG_LIMIT = 256 * 1024 * 1024


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
    #: The sustained peaks (``figures.trend.sustained_peak``: the best 5 s held, not the
    #: best second), msg/s: what "peak" means wherever flowdeck shows one.
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
    _figures: tuple[tuple[float | None, bool], RunFigures] | None = field(default=None, repr=False)

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
        """Phases the run went through (``figures.phases.split_phases``)."""
        return len(self.run_phases())

    def run_phases(self) -> tuple[Phase, ...]:
        """The run's phases, as every place that shows them splits them."""
        events = [event.to_json() for event in self.events]
        return tuple(split_phases(events, self.manifest.start, self.manifest.end))

    def figures(self, max_p99_ms: float | None = None, latency: bool = True) -> RunFigures:
        """Every figure of the run (``figures.run``): the per-phase table, verdicts, sweeps
        and recommendations, computed from the recorded rows as the report computes them.
        ``latency`` False leaves the latency tables unread (figures without percentiles)."""
        if self._figures is not None and self._figures[0] == (max_p99_ms, latency):
            return self._figures[1]
        phases = self.run_phases()
        start_us = t_us(self.manifest.start)
        found = run_figures(
            RunInputs(
                key=self.session_id,
                start_us=start_us,
                phases=phases,
                client_rows=_rows(self.table(fmt.CLIENT_DIR)),
                polls=_rows(self.table(fmt.BROKER_DIR)),
                latency=self._phase_buckets(phases, start_us) if latency else {},
                queue_latency=(
                    self._phase_buckets(phases, start_us, fmt.QUEUE_LATENCY_DIR, ("queue",))
                    if latency
                    else {}
                ),
                summary=self.manifest.summary,
                settings=[setting.name for setting in self.manifest.settings],
                sweep_settings=[s.name for s in self.manifest.settings if s.sweep],
                stream=self.manifest.spec.get("queue_type") == "stream",
            ),
            max_p99_ms,
        )
        self._figures = ((max_p99_ms, latency), found)
        return found

    def _phase_buckets(
        self,
        phases: Sequence[Phase],
        start_us: int,
        table: str = fmt.LATENCY_DIR,
        keys: tuple[str, ...] = ("kind", "basis"),
    ) -> dict[tuple[Any, ...], dict[int, int]]:
        """A latency table's bucket counts per phase and ``keys`` (kind and basis; the
        queue for the per-queue table): each row in the phase in force at the middle of
        its run second (the figures' rule)."""
        latency = self.table(table)
        if latency.num_rows == 0:
            return {}
        ts = latency.column("ts").cast(pa.int64()).to_numpy()
        middles = start_us + ((ts - start_us - HALF_SECOND_US) // 1_000_000) * 1_000_000
        middles = middles + HALF_SECOND_US
        ends = np.asarray([p.end_us for p in phases[:-1]], dtype=np.int64)
        positions = np.searchsorted(ends, middles, side="right")
        indexes = [phases[i].index for i in range(len(phases))]
        buckets: dict[tuple[Any, ...], dict[int, int]] = {}
        columns = zip(
            positions.tolist(),
            zip(*(latency.column(key).to_pylist() for key in keys), strict=True),
            latency.column("value_us").to_pylist(),
            latency.column("count").to_pylist(),
            strict=True,
        )
        for position, key, value_us, count in columns:
            counts = buckets.setdefault((indexes[position], *key), {})
            counts[value_us] = counts.get(value_us, 0) + count
        return buckets

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

        return percentiles_of(merged)

    def client_snapshots(self) -> list[ClientSnapshot]:
        """The workers' snapshots, in the order the controller received them (the order
        the recorder wrote them), as the engine's aggregation takes them.

        Counters are cumulative again (running sums of the recorded deltas); ``at`` is the
        recorded ``elapsed_s`` plus the manifest's start, which gives back the snapshot's
        own time exactly (the recorder subtracted that same start). Latency histograms are
        the recorded 2-significant-digit buckets (see ``format.LATENCY_SIGNIFICANT_DIGITS``),
        not the live 3-digit ones. Not on disk, so left empty: the workers' error texts
        (only their number is recorded), blocked reasons, and the read hold.
        """
        client = self.table(fmt.CLIENT_DIR)
        if client.num_rows == 0:
            return []
        start = self.manifest.start
        latency = self._latency_blobs()
        columns = {name: client.column(name).to_pylist() for name in client.column_names}
        cumulative: dict[int, Counters] = {}
        snapshots = []
        # The settings this flowdeck knows (one the run had and this process has not is
        # left out; one this process has and the run had not takes its default).
        known = [name for name in SETTING_COLUMNS if name in columns]
        for i in range(client.num_rows):
            worker = int(columns["worker"][i])
            elapsed = float(columns["elapsed_s"][i])
            counters = cumulative.get(worker, Counters()) + Counters(
                *(int(columns[name][i] or 0) for name in COUNTER_COLUMNS)  # null before 1.8
            )
            cumulative[worker] = counters
            snapshots.append(
                ClientSnapshot(
                    worker=worker,
                    at=start + elapsed,
                    interval=float(columns["interval_s"][i]),
                    counters=counters,
                    pending_confirms=int(columns["pending_confirms"][i]),
                    unacked=int(columns["unacked"][i]),
                    connections=int(columns["connections"][i]),
                    blocked=int(columns["blocked_connections"][i]),
                    settings=Settings(
                        {name: columns[name][i] for name in known},
                        paused=bool(columns["paused"][i]),
                    ),
                    target_rate=float(columns["target_rate"][i]),
                    latency=latency.get((worker, elapsed), {}),
                )
            )
        return snapshots

    def ticks(self) -> list[Tick]:
        """The run's ticks as the live screen had them, one a second and a last one at the end.

        The recorded snapshots go through :class:`SnapshotAggregator` as they reached the
        controller, and it ticks at the controller's tick times; settings, pending changes,
        phase and schedule come from the manifest's spec and the event log, as the
        controller kept them. From format 1.3 the ticks table says when the controller
        ticked and how many snapshots it had by then, so each tick aggregates exactly the
        snapshots the live one did. Older sessions did not record it: their ticks are
        taken at ``start + 1 s, + 2 s ...`` until publishing stopped (the drain event) and
        at the manifest's end, while the live ones came a few milliseconds later, so a
        snapshot taken in those milliseconds (or still on its way to the controller) counts
        one tick later there. Latency percentiles come from the recorded 2-digit
        buckets: counts are exact, values within one 2-digit bucket (under 1%) of the live
        3-digit ones. A pending change's ``workers_done`` is 0 (the workers' own apply
        times are not recorded), and the last tick's totals are the workers' last
        snapshots (the controller used their end-of-run reports, which the manifest's
        summary holds without ``acked``).
        """
        snapshots = self.client_snapshots()
        times, taken = self._tick_times(snapshots)
        if not times:
            return []
        start = self.manifest.start
        spec = self._recorded_spec()
        settings = _start_settings(spec, snapshots)
        duration = spec.duration if spec is not None else float(self.duration or 0.0)
        schedule: Sequence[ScheduleStep] = spec.schedule if spec is not None else ()
        events = _as_controller_saw(self.events, start, schedule)
        hosts = self._worker_hosts(snapshots)
        aggregator = SnapshotAggregator()
        requested: dict[int, PendingChange] = {}
        failed: set[int] = set()
        scheduled = 0
        phase, phase_index, phases = "start", 0, 0
        ticks = []
        next_snapshot = next_event = 0
        for number, at in enumerate(times):
            last = number == len(times) - 1 and self.manifest.end is not None
            while next_snapshot < len(snapshots) and (
                next_snapshot < taken[number]
                if taken
                else last or snapshots[next_snapshot].at <= at
            ):
                aggregator.add(snapshots[next_snapshot])
                next_snapshot += 1
            while next_event < len(events) and events[next_event][0] <= at:
                event = events[next_event][1]
                next_event += 1
                detail = event.detail
                if event.kind is EventKind.CHANGE_REQUESTED and event.change_id is not None:
                    change = _recorded_change(detail)
                    if change is not None:
                        requested[event.change_id] = PendingChange(
                            change_id=event.change_id,
                            change=change,
                            requested_at=event.at,
                            source=str(detail.get("source", "")),
                            workers_done=0,
                            workers_total=len(hosts - failed),
                        )
                    scheduled += detail.get("source") == "schedule"
                elif event.kind is EventKind.CHANGE_APPLIED:
                    requested.pop(event.change_id or 0, None)
                    change = _recorded_change(detail)
                    if change is not None:
                        settings = apply_change(settings, change)
                elif event.kind is EventKind.PHASE:
                    phases += 1
                    phase_index = int(detail.get("index", phases - 1))
                    phase = str(detail.get("label") or event.message)
                elif event.kind is EventKind.ERROR and isinstance(detail.get("worker"), int):
                    failed.add(int(detail["worker"]))
            fired = max(scheduled, sum(1 for s in schedule if start + s.at <= at))
            ticks.append(
                assemble_tick(
                    aggregator.tick(at),
                    at=at,
                    started_at=start,
                    duration=duration,
                    settings=settings,
                    pending=[requested[c] for c in sorted(requested)],
                    phase=phase,
                    phase_index=phase_index,
                    next_step=schedule[fired] if fired < len(schedule) else None,
                    # Every worker has reported (or failed) by the run's last tick.
                    workers=0 if last else len(hosts - failed),
                )
            )
        return ticks

    def broker_samples(self) -> list[BrokerSample]:
        """Every broker poll as the BrokerSample the live screen had, with its queues.

        Sample, queue and node figures read back as they were (nodes from the nodes table,
        format 1.3). Sessions before 1.3 hold the nodes' figures only as the cluster's
        (memory summed, smallest disk free, largest disk limit, alarms of any node), so
        they read back as one node named :data:`RECORDED_NODES`. The broker and Erlang
        versions are in the manifest, not on each sample.
        """
        broker = self.table(fmt.BROKER_DIR)
        if broker.num_rows == 0:
            return []
        start = self.manifest.start
        queues_at: dict[tuple[float, str], list[QueueSample]] = defaultdict(list)
        for row in self.table(fmt.QUEUES_DIR).to_pylist():
            queues_at[(float(row["elapsed_s"]), str(row["source"]))].append(
                QueueSample(
                    name=row["queue"],
                    vhost=row["vhost"],
                    type=row["type"],
                    ready=row["ready"],
                    unacked=row["unacked"],
                    consumers=row["consumers"],
                    publish_rate=row["publish_rate"],
                    deliver_rate=row["deliver_rate"],
                    leader=row["leader"] or "",
                    members=tuple(row["members"] or ()),
                    online=tuple(row["online"] or ()),
                    synchronised=tuple(row["synchronised"] or ()),
                    state=row["state"] or "",
                )
            )
        nodes_at = self._recorded_nodes()
        samples = []
        for row in broker.to_pylist():
            elapsed = float(row["elapsed_s"])
            source: SourceName = "prometheus" if row["source"] == "prometheus" else "management"
            taken_at = start + elapsed
            node_figures: dict[str, Any] = {
                name: row[name]
                for name in ("mem_used", "mem_limit", "disk_free", "disk_free_limit")
            }
            alarms: dict[str, Any] = {
                "mem_alarm": bool(row["mem_alarm"]),
                "disk_alarm": bool(row["disk_alarm"]),
            }
            nodes: tuple[NodeSample, ...] = (
                (NodeSample(RECORDED_NODES, **node_figures, **alarms),)
                if any(v is not None for v in node_figures.values()) or any(alarms.values())
                else ()
            )
            if nodes_at is not None:
                nodes = tuple(nodes_at.get((elapsed, str(row["source"])), ()))
            samples.append(
                BrokerSample(
                    source=source,
                    taken_at=taken_at,
                    figures_at=taken_at - float(row["age_s"]),
                    statistics_interval=float(row["statistics_interval_s"]),
                    nodes=nodes,
                    queues=tuple(queues_at.get((elapsed, str(row["source"])), ())),
                    publish_rate=row["publish_rate"],
                    confirm_rate=row["confirm_rate"],
                    deliver_rate=row["deliver_rate"],
                    ack_rate=row["ack_rate"],
                    redeliver_rate=row["redeliver_rate"],
                    unconfirmed=row["unconfirmed"],
                    unacked=row["unacked"],
                    connections=row["connections"],
                    connections_blocked=row["connections_blocked"],
                    connections_blocking=row["connections_blocking"],
                    connections_flow=row["connections_flow"],
                    channels=row["channels"],
                    channels_flow=row["channels_flow"],
                    run_publishers=row["run_publishers"],
                    run_publishers_flow=row["run_publishers_flow"],
                    publishers_in_flow=tuple(row["publishers_in_flow"] or ()),
                    run_accepted=row["run_accepted"],
                    run_accept_rate=row["run_accept_rate"],
                    run_unconfirmed=row["run_unconfirmed"],
                    run_delivered=row["run_delivered"],
                    run_deliver_rate=row["run_deliver_rate"],
                    run_acked=row["run_acked"],
                    run_ack_rate=row["run_ack_rate"],
                    run_unacked=row["run_unacked"],
                    stream_connections=row["stream_connections"],
                    stream_consumers=row["stream_consumers"],
                    stream_offset_lag=row["stream_offset_lag"],
                    stream_offset_lag_max=row["stream_offset_lag_max"],
                    stream_publishers=row["stream_publishers"],
                    stream_errored=row["stream_errored"],
                    stale_reason=row["stale_reason"],
                )
            )
        return samples

    def _recorded_nodes(self) -> dict[tuple[float, str], list[NodeSample]] | None:
        """Each poll's nodes keyed like its broker row (elapsed_s, source); None for a
        session that did not record nodes (before format 1.3)."""
        if _older_than(self.manifest.schema_version, (1, 3)):
            return None
        nodes_at: dict[tuple[float, str], list[NodeSample]] = defaultdict(list)
        for row in self.table(fmt.NODES_DIR).to_pylist():
            figures_elapsed = row["figures_elapsed_s"]
            nodes_at[(float(row["elapsed_s"]), str(row["source"]))].append(
                NodeSample(
                    name=row["node"],
                    mem_used=row["mem_used"],
                    mem_limit=row["mem_limit"],
                    mem_alarm=bool(row["mem_alarm"]),
                    disk_free=row["disk_free"],
                    disk_free_limit=row["disk_free_limit"],
                    disk_alarm=bool(row["disk_alarm"]),
                    fd_used=row["fd_used"],
                    fd_total=row["fd_total"],
                    sockets_used=row["sockets_used"],
                    sockets_total=row["sockets_total"],
                    running=bool(row["running"]),
                    figures_at=None
                    if figures_elapsed is None
                    else self.manifest.start + figures_elapsed,
                    partitions=tuple(row["partitions"] or ()),
                    raft_term_total=row["raft_term_total"],
                    raft_commit_latency=row["raft_commit_latency"],
                    connections_running=row["connections_running"],
                    connections_flow=row["connections_flow"],
                    connections_blocking=row["connections_blocking"],
                    connections_blocked=row["connections_blocked"],
                    channels_running=row["channels_running"],
                    channels_flow=row["channels_flow"],
                )
            )
        return nodes_at

    def _latency_blobs(self) -> dict[tuple[int, float], dict[LatencyKey, bytes]]:
        """Each snapshot's recorded latency buckets as encoded histograms, keyed like the
        client rows (worker, elapsed_s), as the aggregator takes them."""
        latency = self.table(fmt.LATENCY_DIR)
        if latency.num_rows == 0:
            return {}
        histograms: dict[tuple[int, float], dict[LatencyKey, HdrHistogram]] = defaultdict(dict)
        columns = [
            latency.column(name).to_pylist()
            for name in ("worker", "elapsed_s", "kind", "basis", "value_us", "count")
        ]
        for worker, elapsed, kind, basis, value_us, count in zip(*columns, strict=True):
            per_key = histograms[(int(worker), float(elapsed))]
            key = (LatencyKind(kind), SendBasis(basis))
            histogram = per_key.get(key)
            if histogram is None:
                histogram = HdrHistogram(LOWEST_US, HIGHEST_US, fmt.LATENCY_SIGNIFICANT_DIGITS)
                per_key[key] = histogram
            histogram.record_value(min(max(int(value_us), LOWEST_US), HIGHEST_US), int(count))
        return {
            where: {key: encode(histogram) for key, histogram in per_key.items()}
            for where, per_key in histograms.items()
        }

    def _tick_times(self, snapshots: Sequence[ClientSnapshot]) -> tuple[list[float], list[int]]:
        """When the controller ticked, and how many client rows each tick had taken in.

        From the ticks table (format 1.3) as recorded. Older sessions did not record it: then
        each whole second after start while publishing went on (as the controller's loop:
        ``start + 1``, ``+ 2`` ...) and once more at the end, with no counts (the caller
        takes the snapshots taken by each time).
        """
        start = self.manifest.start
        recorded = self.table(fmt.TICKS_DIR)
        if recorded.num_rows:
            return (
                [start + float(e) for e in recorded.column("elapsed_s").to_pylist()],
                [int(n) for n in recorded.column("snapshots").to_pylist()],
            )
        end = self.manifest.end
        drain = next((e.at for e in self.events if e.kind is EventKind.DRAIN), None)
        last_snapshot = max((s.at for s in snapshots), default=None)
        load_end = drain if drain is not None else end if end is not None else last_snapshot
        if load_end is None:
            return [], []
        times = [start + second for second in range(1, int(load_end - start) + 1)]
        while times and times[-1] > load_end:
            times.pop()
        if end is not None and (not times or end > times[-1]):
            times.append(end)
        return times, []

    def _recorded_spec(self) -> RunSpec | None:
        """The run's spec from the manifest; None when this flowdeck cannot read it back."""
        # A setting the run had that this process has not is no spec field here: its
        # values stay in the client table, the spec is read without it.
        recorded = {s.name for s in self.manifest.settings} - set(SETTING_COLUMNS)
        try:
            return spec_from_mapping(
                {k: v for k, v in self.manifest.spec.items() if k not in recorded}
            )
        except (SpecError, TypeError, ValueError):
            return None

    def _worker_hosts(self, snapshots: Sequence[ClientSnapshot]) -> set[int]:
        """The run's workers: as many as the run-started event says (0 = one in-process),
        else those that reported."""
        started = next((e for e in self.events if e.kind is EventKind.RUN_STARTED), None)
        workers = started.detail.get("workers") if started is not None else None
        if isinstance(workers, int) and not isinstance(workers, bool):
            return set(range(max(1, workers)))
        return {s.worker for s in snapshots}

    def info(self) -> SessionInfo:
        """The session as one line of the sessions list."""
        seconds = self.figures(latency=False).seconds
        return SessionInfo(
            session_id=self.session_id,
            path=self.path,
            name=self.manifest.name,
            start=self.manifest.start,
            end=self.manifest.end,
            duration=self.duration,
            outcome=self.outcome,
            phases=self.phases,
            peak_publish_rate=sustained_peak([r["publish_rate"] for r in seconds]),
            peak_consume_rate=sustained_peak([r["consume_rate"] for r in seconds]),
            schema_version=self.manifest.schema_version,
        )

    def _read_table(self, name: str) -> pa.Table:
        schema = self.manifest.schema(name)
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
        if not os.path.lexists(path):
            return []
        try:
            data = read_file_bytes(path, what="event log", limit=EVENT_LOG_LIMIT)
        except UnreadableFile as exc:
            self.problems.append(exc.message)
            return []
        text = data.decode("utf-8", errors="replace")
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


def _older_than(version: str, than: tuple[int, int]) -> bool:
    """True for a format version before ``than`` (an unreadable one counts as older)."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return True
    return (major, minor) < than


def _recorded_change(detail: dict[str, Any] | Any) -> Change | None:
    """The change a change event's detail names (as the controller writes it); None when
    the detail does not say (an older or hand-made event)."""
    try:
        value = detail.get("value")
        return Change(
            Setting(str(detail["setting"])),
            None if value is None else float(value),
            label=str(detail.get("label") or ""),
        )
    except (AttributeError, KeyError, TypeError, ValueError, SpecError):
        return None


def _as_controller_saw(
    events: Sequence[RunEvent], start: float, schedule: Sequence[ScheduleStep]
) -> list[tuple[float, RunEvent]]:
    """Events with the time the controller's tick saw them, in that order.

    A schedule step is fired in the controller's loop just before the tick of the same
    pass, so its request counts from the step's time, although the event's own time (taken
    as it was sent) is a little later than that tick.
    """
    timed = []
    scheduled = 0
    for event in events:
        at = event.at
        if event.kind is EventKind.CHANGE_REQUESTED and event.detail.get("source") == "schedule":
            if scheduled < len(schedule):
                at = min(at, start + schedule[scheduled].at)
            scheduled += 1
        timed.append((at, event))
    return sorted(timed, key=lambda pair: pair[0])


def _start_settings(spec: RunSpec | None, snapshots: Sequence[ClientSnapshot]) -> Settings:
    """The settings the controller started with: the spec's, else the first snapshot's."""
    if spec is not None:
        return settings_of(spec)
    if snapshots:
        return snapshots[0].settings
    return Settings.of(inflight=0, prefetch=0, rate=0.0, publishers=0, consumers=0)


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
    known = [p.name for p in root.iterdir() if fmt.looks_like_session(p)] if root.is_dir() else []
    raise SessionNotFound(
        f"no session {session_id!r} in {root}{did_you_mean(wanted, known)}; "
        "`flowdeck sessions list` shows the ids "
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
        for index, column in enumerate(table.schema):
            if pa.types.is_list(column.type):  # a queue's members: "n1;n2;n3" in one cell
                listed = table.column(index).cast(pa.list_(pa.string()))  # publisher ids too
                joined = pc.binary_join(listed, ";")
                table = table.set_column(index, column.name, joined)
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


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """A recorded table's rows as the figures take them: ``ts`` as ``t_us``."""
    rows: list[dict[str, Any]] = table.drop_columns(["ts"]).to_pylist()
    for row, ts in zip(rows, table.column("ts").cast(pa.int64()).to_pylist(), strict=True):
        row["t_us"] = ts
    return rows
