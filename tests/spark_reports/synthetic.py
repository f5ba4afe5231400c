"""Synthetic sessions written straight with pyarrow in the session format, for the report
job's tests and benchmark. Every row written is also returned, so a test can compute what
each figure of the report must be without going through Spark."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flowdeck.engine.latency import new_histogram
from flowdeck.engine.recording.format import (
    BROKER_DIR,
    BROKER_SCHEMA,
    CLIENT_DIR,
    CLIENT_SCHEMA,
    EVENTS,
    LATENCY_DIR,
    LATENCY_SCHEMA,
    MANIFEST,
    OUTCOME_COMPLETED,
    PART_PATTERN,
    SCHEMA_VERSION,
    Manifest,
)

START = 1_700_000_000.0
KINDS = (("e2e", "actual"), ("e2e", "intended"), ("confirm", "actual"), ("confirm", "intended"))


@dataclass(frozen=True)
class PhasePlan:
    """One phase: settings and what each worker does each second."""

    seconds: int
    inflight: int
    prefetch: int = 100
    ack_every: int = 10
    rate: float = 100.0  # per publisher; each worker runs one publisher and one consumer
    publish_share: float = 1.0  # achieved share of the target rate
    consume_share: float = 1.0  # consumed share of what was published
    pending_share: float = 0.3  # pending confirms as share of the in-flight window
    depth_growth: float = 0.0  # queue depth change per second (broker side)
    mem_alarm_polls: int = 0  # polls at the end of the phase with the memory alarm on
    blocked_seconds: int = 0  # seconds at the end of the phase with a blocked connection
    latency_us: int = 2_000  # typical e2e latency
    label: str = ""
    paused_seconds: int = 0  # seconds at the start of the phase paused: no publishing, target 0


@dataclass
class SyntheticSession:
    path: Path
    start: float
    end: float
    boundaries: list[float]  # unix seconds where phases 1.. start (the drain included)
    client: list[dict[str, Any]] = field(default_factory=list)
    latency: list[dict[str, Any]] = field(default_factory=list)
    broker: list[dict[str, Any]] = field(default_factory=list)


def _ts(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, tz=UTC)


def _write(directory: Path, rows: list[dict[str, Any]], schema: pa.Schema, per_part: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for part, begin in enumerate(range(0, max(len(rows), 1), per_part)):
        chunk = rows[begin : begin + per_part]
        if not chunk:
            break
        pq.write_table(
            pa.Table.from_pylist(chunk, schema=schema), directory / PART_PATTERN.format(part)
        )


def write_session(
    root: Path,
    name: str,
    plans: list[PhasePlan],
    *,
    workers: int = 2,
    seed: int = 1,
    start: float = START,
    samples_per_second: int = 40,
    exact_histograms: bool = True,
    queue_type: str = "quorum",
    drain_seconds: int = 0,
    drain_event: bool = True,
    worker_offset_s: float = 0.0,
    boundary_offset_s: float = 0.0,
    extra_events: list[dict[str, Any]] | None = None,
    summary: dict[str, Any] | None = None,
    worker_ends: dict[int, int] | None = None,
    interval: int | None = None,
) -> SyntheticSession:
    """Write a session of ``len(plans)`` phases; rows are at whole seconds after ``start``.

    ``exact_histograms`` records every latency in a real HDR histogram (slow, exact
    buckets); otherwise values are mapped to HDR bucket values directly (fast).
    ``drain_seconds`` adds the seconds after publishing stopped, as the engine records them:
    target 0, nothing published, consumers taking the backlog; with ``drain_event`` the
    ``drain`` event of format 1.2 marks where they begin (without it, a 1.1 session).
    ``worker_offset_s``: worker ``w`` snapshots ``w × worker_offset_s`` after worker 0, as
    real workers do at offsets of their own; ``boundary_offset_s`` moves every change's
    events that far after the whole second (between two workers' snapshots when it is
    below the worker offset). The second after a paused one publishes half its rate: its
    interval began paused, as the engine records a resume. Every worker records the run's
    whole count of publishers and consumers (one each per worker), as the engine does.
    ``extra_events`` (``at`` in seconds since ``start``) and ``summary`` (the manifest's
    end-of-run summary) add faults and data-safety figures. ``worker_ends``: worker →
    its last second (a worker lost then: no rows of it after that second). ``interval``:
    the spec's latency interval in seconds (none: a session recorded before runs had one).
    """
    rng = random.Random(seed)
    path = root / name
    path.mkdir(parents=True)
    load_seconds = sum(p.seconds for p in plans)
    total_seconds = load_seconds + drain_seconds
    end = start + total_seconds
    session = SyntheticSession(path=path, start=start, end=end, boundaries=[])
    mapper = new_histogram()
    depth = 0.0
    second = 0
    previous_paused = False
    events: list[dict[str, Any]] = [
        {"at": start, "kind": "run_started", "message": "run started", "change_id": None,
         "detail": {}},
        {"at": start, "kind": "phase", "message": plans[0].label or f"inflight={plans[0].inflight}",
         "change_id": None, "detail": {}},
    ]  # fmt: skip
    steps = [(index, plan, False) for index, plan in enumerate(plans)]
    if drain_seconds:
        # The drain: the last phase's settings, publishers stopped, consumers still taking.
        drained = replace(
            plans[-1], seconds=drain_seconds, publish_share=0.0, paused_seconds=0,
            blocked_seconds=0, mem_alarm_polls=0, depth_growth=0.0,
        )  # fmt: skip
        steps.append((len(plans), drained, True))
    for index, plan, draining in steps:
        if draining and drain_event:
            at = start + load_seconds
            session.boundaries.append(at)
            events.append({"at": at, "kind": "drain", "message": "publishing stopped (completed)",
                           "change_id": None, "detail": {"drain_seconds": 30.0}})  # fmt: skip
        elif index and not draining:
            at = start + second + boundary_offset_s
            session.boundaries.append(at)
            label = plan.label or f"inflight={plan.inflight}"
            events.append(
                {
                    "at": at - 0.2,
                    "kind": "change_requested",
                    "message": label,
                    "change_id": index,
                    "detail": {"setting": "inflight"},
                }
            )
            events.append(
                {
                    "at": at,
                    "kind": "change_applied",
                    "message": label,
                    "change_id": index,
                    "detail": {"setting": "inflight", "value": plan.inflight},
                }
            )
            events.append({"at": at + 0.001, "kind": "phase", "message": label,
                           "change_id": index, "detail": {"label": label}})  # fmt: skip
        for local in range(plan.seconds):
            second += 1
            now = start + second
            tail = plan.seconds - local  # 1 on the phase's last second
            paused = local < plan.paused_seconds
            publishing = not paused and not draining
            resumed = not paused and previous_paused
            previous_paused = paused
            for worker in range(workers):
                if second > (worker_ends or {}).get(worker, total_seconds):
                    continue
                published = int(plan.rate * plan.publish_share) + rng.randint(-3, 3)
                if resumed:
                    published //= 2
                consumed = max(0, int(published * plan.consume_share) + rng.randint(-1, 1))
                pending = int(plan.inflight * plan.pending_share) + rng.randint(0, 2)
                if draining:
                    published, pending = 0, 0
                    consumed = int(plan.rate * plan.consume_share / (local + 2))
                elif paused:
                    published, consumed, pending = 0, 0, 0
                at_worker = now + worker * worker_offset_s
                session.client.append({
                    "ts": _ts(at_worker), "elapsed_s": at_worker - start, "worker": worker,
                    "interval_s": 1.0, "published": published,
                    "confirmed": max(0, published - rng.randint(0, 1)), "nacked": 0,
                    "returned": 0,
                    "consumed": consumed, "acked": consumed, "redelivered": 0, "duplicates": 0,
                    "pending_confirms": pending, "unacked": rng.randint(0, plan.prefetch),
                    "connections": 2,
                    "blocked_connections": 1 if tail <= plan.blocked_seconds and worker == 0 else 0,
                    "target_rate": plan.rate if publishing else 0.0, "inflight": plan.inflight,
                    "prefetch": plan.prefetch, "ack_every": plan.ack_every, "rate": plan.rate,
                    "publishers": workers, "consumers": workers, "paused": paused,
                })  # fmt: skip
                for kind, basis in KINDS:
                    scale = plan.latency_us * (0.5 if kind == "confirm" else 1.0)
                    scale *= 1.3 if basis == "intended" else 1.0
                    values = [
                        max(1, int(rng.lognormvariate(0, 0.6) * scale))
                        for _ in range(samples_per_second)
                    ]
                    if exact_histograms:
                        histogram = new_histogram()
                        for value in values:
                            histogram.record_value(value)
                        buckets = [
                            (int(i.value_iterated_to), int(i.count_added_in_this_iter_step))
                            for i in histogram.get_recorded_iterator()
                        ]
                    else:
                        buckets = sorted(
                            Counter(mapper.get_highest_equivalent_value(v) for v in values).items()
                        )
                    for value_us, count in buckets:
                        session.latency.append({
                            "ts": _ts(at_worker), "elapsed_s": at_worker - start, "worker": worker,
                            "kind": kind, "basis": basis, "value_us": value_us, "count": count,
                        })  # fmt: skip
            depth = depth / 2 if draining else max(0.0, depth + plan.depth_growth)
            alarm = tail <= plan.mem_alarm_polls
            # Broker polls land mid-second, like a real poller's.
            session.broker.append({
                "ts": _ts(now + 0.5), "elapsed_s": second + 0.5, "source": "management",
                "age_s": 0.5, "stale_reason": "", "statistics_interval_s": 1.0,
                "mem_used": 200 * 2**20 + int(depth) * 1024, "mem_limit": 1600 * 2**20,
                "mem_alarm": alarm, "disk_free": 50 * 2**30, "disk_free_limit": 2**30,
                "disk_alarm": False, "publish_rate": None, "confirm_rate": None,
                "deliver_rate": None, "ack_rate": None, "redeliver_rate": None,
                "unconfirmed": None, "unacked": None, "queue_ready": int(depth),
                "queue_unacked": 0, "connections": 2 * workers, "connections_blocked": 0,
                "connections_blocking": 0,
            })  # fmt: skip
    for extra in extra_events or []:
        events.append({"change_id": None, "detail": {}, **extra, "at": start + extra["at"]})
    events.sort(key=lambda e: float(e["at"]))
    events.append({"at": end, "kind": "run_stopped", "message": "run completed",
                   "change_id": None, "detail": {}})  # fmt: skip
    _write(path / CLIENT_DIR, session.client, CLIENT_SCHEMA, 60 * workers)
    _write(path / LATENCY_DIR, session.latency, LATENCY_SCHEMA, 60 * workers * 200)
    _write(path / BROKER_DIR, session.broker, BROKER_SCHEMA, 60)
    manifest = Manifest(
        session_id=f"20231114-{name}",
        schema_version=SCHEMA_VERSION,
        name=name,
        spec={"queue_type": queue_type, "rate": plans[0].rate, "publishers": workers,
              "consumers": workers, "password": "****",
              **({} if interval is None else {"interval": interval})},
        start=start,
        end=end,
        outcome=OUTCOME_COMPLETED,
        host="synthetic",
        versions={"flowdeck": "test"},
        summary=summary,
    )  # fmt: skip
    (path / MANIFEST).write_text(json.dumps(manifest.to_json()), encoding="utf-8")
    (path / EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return session
