"""A snapshot or a broker poll as the row the session records: one builder for every reader.

The recorder writes these rows; the live per-phase figures (``engine.phase_figures``) keep
the same rows and hand them to ``figures.run``, as the replay, ``flowdeck sessions show``
and the Spark report hand the rows they read back. So a phase's figures are computed from
identical rows wherever they are shown. Column names are the session format's
(``format.CLIENT_SCHEMA``, ``format.BROKER_SCHEMA``); ``t_us`` is ``ts`` as integer
microseconds since the epoch, the figures' clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.recording.format import RecordedSetting, client_schema
from flowdeck.engine.settings import STEERABLE
from flowdeck.engine.snapshot import ClientSnapshot, Counters

Row = dict[str, Any]

#: The client table's count columns, in schema order, and the ``Counters`` field of each.
COUNT_COLUMNS: tuple[str, ...] = (
    "published", "confirmed", "nacked", "returned", "consumed", "acked", "redelivered",
    "duplicates", "rejected", "requeued", "dead_lettered",
)  # fmt: skip
#: The steerable settings as this flowdeck records them: one per registry row, in its order
#: (the manifest lists them; each is a client-table column).
RECORDED_SETTINGS: tuple[RecordedSetting, ...] = tuple(
    RecordedSetting(
        row.field, "int" if row.kind is int else "float", row.heading, row.short_tag, row.sweep
    )
    for row in STEERABLE
)
#: The setting columns every client row carries.
SETTING_COLUMNS: tuple[str, ...] = tuple(setting.name for setting in RECORDED_SETTINGS)
#: The settings a run at two or more values of sweeps (the figures judge and recommend).
SWEEP_COLUMNS: tuple[str, ...] = tuple(s.name for s in RECORDED_SETTINGS if s.sweep)
#: The client table this flowdeck writes.
CLIENT_SCHEMA: pa.Schema = client_schema(RECORDED_SETTINGS)


def t_us(at: float) -> int:
    """Unix seconds as the integer microseconds the rows' ``ts`` holds."""
    return round(at * 1_000_000)


def interval_delta(snap: ClientSnapshot, previous: Counters | None) -> Counters:
    """The snapshot's counts over its interval: the difference from the worker's previous
    snapshot (all of them for the first, or when the worker's counters started again)."""
    delta = snap.counters if previous is None else snap.counters - previous
    if any(getattr(delta, name) < 0 for name in Counters.__dataclass_fields__):
        return snap.counters
    return delta


def client_row(snap: ClientSnapshot, delta: Counters, started_at: float) -> Row:
    """One worker's interval as the client table records it."""
    settings = snap.settings
    row: Row = {
        "t_us": t_us(snap.at),
        "elapsed_s": snap.at - started_at,
        "worker": snap.worker,
        "interval_s": snap.interval,
        **{name: getattr(delta, name) for name in COUNT_COLUMNS},
        "errors": len(snap.errors),
        "pending_confirms": snap.pending_confirms,
        "unacked": snap.unacked,
        "connections": snap.connections,
        "blocked_connections": snap.blocked,
        "target_rate": snap.target_rate,
        **settings.values,
        "paused": settings.paused,
    }
    return row


def _sum(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _min(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _max(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def broker_row(sample: BrokerSample, started_at: float) -> Row:
    """One broker poll as the broker table records it (the nodes' figures summed: memory
    over nodes, the smallest disk free, the largest disk limit)."""
    nodes = sample.nodes
    return {
        "t_us": t_us(sample.taken_at),
        "elapsed_s": sample.taken_at - started_at,
        "source": sample.source,
        "age_s": sample.age,
        "stale_reason": sample.stale_reason,
        "statistics_interval_s": sample.statistics_interval,
        "mem_used": _sum(n.mem_used for n in nodes),
        "mem_limit": _sum(n.mem_limit for n in nodes),
        "mem_alarm": sample.memory_alarm,
        "disk_free": _min(n.disk_free for n in nodes),
        "disk_free_limit": _max(n.disk_free_limit for n in nodes),
        "disk_alarm": sample.disk_alarm,
        "publish_rate": sample.publish_rate,
        "confirm_rate": sample.confirm_rate,
        "deliver_rate": sample.deliver_rate,
        "ack_rate": sample.ack_rate,
        "redeliver_rate": sample.redeliver_rate,
        "unconfirmed": sample.unconfirmed,
        "unacked": sample.unacked,
        "queue_ready": sample.queue_ready,
        "queue_unacked": sample.queue_unacked,
        "connections": sample.connections,
        "connections_blocked": sample.connections_blocked,
        "connections_blocking": sample.connections_blocking,
        "connections_flow": sample.connections_flow,
        "channels": sample.channels,
        "channels_flow": sample.channels_flow,
        "run_publishers": sample.run_publishers,
        "run_publishers_flow": sample.run_publishers_flow,
        "publishers_in_flow": list(sample.publishers_in_flow),
        "run_accepted": sample.run_accepted,
        "run_accept_rate": sample.run_accept_rate,
        "run_unconfirmed": sample.run_unconfirmed,
        "run_delivered": sample.run_delivered,
        "run_deliver_rate": sample.run_deliver_rate,
        "run_acked": sample.run_acked,
        "run_ack_rate": sample.run_ack_rate,
        "run_unacked": sample.run_unacked,
        "stream_connections": sample.stream_connections,
        "stream_consumers": sample.stream_consumers,
        "stream_offset_lag": sample.stream_offset_lag,
        "stream_offset_lag_max": sample.stream_offset_lag_max,
        "stream_publishers": sample.stream_publishers,
        "stream_errored": sample.stream_errored,
    }
