"""Replaying a recorded session through the live dashboard's panels.

A session's tables become one :class:`ReplayFrame` per recorded second: the Tick the
dashboard would have shown, the broker samples and the events of that second. Frames are
built once (in a thread: a long session takes a moment) and a player steps through them,
so play, pause and seek never touch the disk again.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from collectors.model import BrokerSample, NodeSample, QueueSample
from engine.events import EventKind, RunEvent
from engine.latency import LatencyKind, SendBasis, percentile_from_buckets
from engine.progress import Percentiles, Tick
from engine.recording import format as fmt
from engine.recording.reader import Session
from engine.snapshot import Counters, Settings
from tui.model import RunHistory

SETTING_COLUMNS = ("inflight", "prefetch", "ack_every", "rate", "publishers", "consumers", "paused")


@dataclass(frozen=True, slots=True)
class ReplayFrame:
    """What happened in one second of the recorded run (``second`` = elapsed, 1-based)."""

    second: int
    at: float
    tick: Tick | None
    samples: tuple[BrokerSample, ...] = ()
    events: tuple[RunEvent, ...] = ()


@dataclass
class Replay:
    """All frames of a session and the history as of any position."""

    name: str
    start: float
    frames: list[ReplayFrame] = field(default_factory=list)

    def history_at(self, position: int) -> RunHistory:
        """The dashboard's history after frames ``0..position`` (inclusive)."""
        history = RunHistory()
        history.started_at = self.start
        for frame in self.frames[: position + 1]:
            apply_frame(history, frame)
        return history


def apply_frame(history: RunHistory, frame: ReplayFrame) -> None:
    history.clock = frame.at
    for event in frame.events:
        history.add_event(event)
    for sample in frame.samples:
        history.add_broker(sample)
    if frame.tick is not None:
        history.add_tick(frame.tick)


def _seconds(at: pa.ChunkedArray) -> list[float]:
    return [
        value.timestamp() if isinstance(value, datetime) else float(value)
        for value in at.to_pylist()
    ]


def _frame_second(elapsed: pa.ChunkedArray) -> pa.ChunkedArray:
    """Frame ``n`` holds what ended in second ``[n-1, n)`` (as ``client_per_second`` + 1)."""
    return pc.add(pc.cast(pc.floor(elapsed), pa.int64()), 1)


def _settings_per_second(client: pa.Table) -> dict[int, Settings]:
    if client.num_rows == 0:
        return {}
    second = _frame_second(client.column("elapsed_s"))
    per_worker = (
        client.append_column("second", second)
        .group_by(["second", "worker"])
        .aggregate([(name, "max") for name in SETTING_COLUMNS])
    )
    grouped: dict[int, list[dict[str, object]]] = defaultdict(list)
    for row in per_worker.to_pylist():
        grouped[int(row["second"])].append(row)
    out = {}
    for sec, rows in grouped.items():
        out[sec] = Settings(
            inflight=max(int(r["inflight_max"]) for r in rows),  # type: ignore[call-overload]
            prefetch=max(int(r["prefetch_max"]) for r in rows),  # type: ignore[call-overload]
            ack_every=max(int(r["ack_every_max"]) for r in rows),  # type: ignore[call-overload]
            rate=max(float(r["rate_max"]) for r in rows),  # type: ignore[arg-type]
            publishers=sum(int(r["publishers_max"]) for r in rows),  # type: ignore[call-overload]
            consumers=sum(int(r["consumers_max"]) for r in rows),  # type: ignore[call-overload]
            paused=any(bool(r["paused_max"]) for r in rows),
        )
    return out


def _latency_per_second(
    latency: pa.Table,
) -> dict[int, dict[tuple[LatencyKind, SendBasis], Percentiles]]:
    if latency.num_rows == 0:
        return {}
    second = _frame_second(latency.column("elapsed_s"))
    grouped = (
        latency.append_column("second", second)
        .group_by(["second", "kind", "basis", "value_us"])
        .aggregate([("count", "sum")])
    )
    buckets: dict[tuple[int, str, str], dict[int, int]] = defaultdict(dict)
    for row in grouped.to_pylist():
        key = (int(row["second"]), str(row["kind"]), str(row["basis"]))
        buckets[key][int(row["value_us"])] = int(row["count_sum"])
    out: dict[int, dict[tuple[LatencyKind, SendBasis], Percentiles]] = defaultdict(dict)
    for (sec, kind, basis), merged in buckets.items():

        def ms(percentile: float, merged: dict[int, int] = merged) -> float:
            value = percentile_from_buckets(merged, percentile)
            return 0.0 if value is None else value / 1000

        out[sec][(LatencyKind(kind), SendBasis(basis))] = Percentiles(
            count=sum(merged.values()),
            p50=ms(50),
            p75=ms(75),
            p95=ms(95),
            p99=ms(99),
            max=ms(100),
        )
    return out


def _broker_samples(session: Session) -> list[tuple[float, BrokerSample]]:
    broker = session.table(fmt.BROKER_DIR)
    queues = session.table(fmt.QUEUES_DIR)
    queues_at: dict[tuple[float, str], list[QueueSample]] = defaultdict(list)
    if queues.num_rows:
        for at, row in zip(_seconds(queues.column("ts")), queues.to_pylist(), strict=True):
            queues_at[(round(at, 3), str(row["source"]))].append(
                QueueSample(
                    name=row["queue"],
                    vhost=row["vhost"],
                    type=row["type"],
                    ready=row["ready"],
                    unacked=row["unacked"],
                    consumers=row["consumers"],
                    publish_rate=row["publish_rate"],
                    deliver_rate=row["deliver_rate"],
                )
            )
    samples: list[tuple[float, BrokerSample]] = []
    if broker.num_rows == 0:
        return samples
    for at, row in zip(_seconds(broker.column("ts")), broker.to_pylist(), strict=True):
        node = NodeSample(
            name="recorded",
            mem_used=row["mem_used"],
            mem_limit=row["mem_limit"],
            mem_alarm=bool(row["mem_alarm"]),
            disk_free=row["disk_free"],
            disk_free_limit=row["disk_free_limit"],
            disk_alarm=bool(row["disk_alarm"]),
        )
        samples.append(
            (
                at,
                BrokerSample(
                    source=row["source"],
                    taken_at=at,
                    figures_at=at - float(row["age_s"]),
                    statistics_interval=float(row["statistics_interval_s"]),
                    nodes=(node,),
                    queues=tuple(queues_at.get((round(at, 3), str(row["source"])), ())),
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
                    stale_reason=row["stale_reason"],
                ),
            )
        )
    return samples


def load_replay(session: Session) -> Replay:
    """Every second of the session as a frame, ready to play."""
    start = session.manifest.start
    duration = session.duration or 0.0
    client = session.table(fmt.CLIENT_DIR)
    per_second = session.client_per_second().to_pylist() if client.num_rows else []
    settings = _settings_per_second(client)
    latency = _latency_per_second(session.table(fmt.LATENCY_DIR))
    events = sorted(session.events, key=lambda e: e.at)
    phase_starts = [(e.at, e) for e in events if e.kind is EventKind.PHASE]
    last_settings: Settings | None = None
    totals = Counters()
    rows_by_second = {int(row["second"]) + 1: row for row in per_second}
    last_second = max([*rows_by_second, int(duration) + (1 if duration % 1 else 0), 1])
    samples = _broker_samples(session)
    sample_times = [at for at, _ in samples]
    event_times = [e.at for e in events]
    frames: list[ReplayFrame] = []
    for sec in range(1, last_second + 1):
        at = start + sec
        row = rows_by_second.get(sec)
        last_settings = settings.get(sec, last_settings)
        tick = None
        if row is not None and last_settings is not None:
            totals = totals + Counters(*(int(row[n]) for n in Counters.__dataclass_fields__))
            phase_index = bisect.bisect_right([p for p, _ in phase_starts], at) - 1
            phase_event = phase_starts[phase_index][1] if phase_index >= 0 else None
            tick = Tick(
                at=at,
                elapsed=float(sec),
                duration=duration,
                target_rate=float(row["target_rate"]),
                publish_rate=float(row["published_rate"]),
                confirm_rate=float(row["confirmed_rate"]),
                consume_rate=float(row["consumed_rate"]),
                nack_rate=float(row["nacked_rate"]),
                return_rate=float(row["returned_rate"]),
                totals=totals,
                pending_confirms=int(row["pending_confirms"]),
                unacked=int(row["unacked"]),
                connections=int(row["connections"]),
                blocked=int(row["blocked_connections"]),
                settings=last_settings,
                latency=latency.get(sec, {}),
                phase=_phase_label(phase_event),
                phase_index=max(0, phase_index),
                workers=int(row["workers"]),
            )
        lo = bisect.bisect_right(sample_times, at - 1)
        hi = bisect.bisect_right(sample_times, at)
        elo = bisect.bisect_right(event_times, at - 1) if sec > 1 else 0
        ehi = bisect.bisect_right(event_times, at)
        frames.append(
            ReplayFrame(
                second=sec,
                at=at,
                tick=tick,
                samples=tuple(s for _, s in samples[lo:hi]),
                events=tuple(events[elo:ehi]),
            )
        )
    if frames and events and events[-1].at > frames[-1].at:
        last = frames[-1]
        tail = tuple(e for e in events if e.at > last.at)
        frames[-1] = ReplayFrame(last.second, last.at, last.tick, last.samples, last.events + tail)
    return Replay(name=session.manifest.name, start=start, frames=frames)


def _phase_label(event: RunEvent | None) -> str:
    if event is None:
        return ""
    label = event.detail.get("label")
    return str(label) if label else event.message
