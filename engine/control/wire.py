"""The run's updates as JSON and back: what the control API sends and a remote cockpit reads.

A Tick, a BrokerSample, a RunEvent and the RunSummary cross the wire as plain JSON objects,
so any HTTP client (curl, a CI script, ``flowdeck attach``) can read them. Changes travel
as the operator's own words (``inflight=200``), read back with the same parser the
cockpit's prompt uses. Latency percentiles are keyed ``<kind>_<basis>`` (``e2e_actual``),
as the JSON summary of ``flowdeck run`` has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, TypeVar

from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
from flowdeck.engine.change import Change, parse_change
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.progress import DataSafety, PendingChange, RunSummary, Tick
from flowdeck.engine.snapshot import Counters, Settings
from flowdeck.figures.latency import Percentiles

#: Latency keys as JSON names them, and back.
LATENCY_NAMES: dict[tuple[LatencyKind, SendBasis], str] = {
    (kind, basis): f"{kind.value}_{basis.value}" for kind in LatencyKind for basis in SendBasis
}
_LATENCY_KEYS = {name: key for key, name in LATENCY_NAMES.items()}

_Value = TypeVar("_Value")


def _known(cls: type[_Value], raw: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``raw`` that are fields of dataclass ``cls`` (a newer peer may send
    more; what this side does not know it leaves out)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return {key: value for key, value in raw.items() if key in names}


def change_from_json(text: str) -> Change:
    """A change as its words travel (``Change.describe``), read back."""
    return parse_change(text)


def latency_to_json(
    latency: Mapping[tuple[LatencyKind, SendBasis], Percentiles],
) -> dict[str, dict[str, Any]]:
    return {LATENCY_NAMES[key]: asdict(p) for key, p in latency.items()}


def latency_from_json(
    raw: Mapping[str, Any],
) -> dict[tuple[LatencyKind, SendBasis], Percentiles]:
    return {
        _LATENCY_KEYS[name]: Percentiles(**_known(Percentiles, p))
        for name, p in raw.items()
        if name in _LATENCY_KEYS
    }


def settings_to_json(settings: Settings) -> dict[str, Any]:
    return asdict(settings)


def settings_from_json(raw: Mapping[str, Any]) -> Settings:
    return Settings(**_known(Settings, raw))


def pending_to_json(pending: PendingChange) -> dict[str, Any]:
    return {
        "id": pending.change_id,
        "change": pending.change.describe(),
        "requested_at": pending.requested_at,
        "source": pending.source,
        "workers_done": pending.workers_done,
        "workers_total": pending.workers_total,
    }


def pending_from_json(raw: Mapping[str, Any]) -> PendingChange:
    return PendingChange(
        change_id=int(raw["id"]),
        change=change_from_json(str(raw["change"])),
        requested_at=float(raw["requested_at"]),
        source=str(raw["source"]),
        workers_done=int(raw["workers_done"]),
        workers_total=int(raw["workers_total"]),
    )


def tick_to_json(tick: Tick) -> dict[str, Any]:
    return {
        "at": tick.at,
        "elapsed": tick.elapsed,
        "duration": tick.duration,
        "target_rate": tick.target_rate,
        "publish_rate": tick.publish_rate,
        "confirm_rate": tick.confirm_rate,
        "consume_rate": tick.consume_rate,
        "nack_rate": tick.nack_rate,
        "return_rate": tick.return_rate,
        "totals": asdict(tick.totals),
        "pending_confirms": tick.pending_confirms,
        "unacked": tick.unacked,
        "connections": tick.connections,
        "blocked": tick.blocked,
        "settings": settings_to_json(tick.settings),
        "pending": [pending_to_json(p) for p in tick.pending],
        "latency_ms": latency_to_json(tick.latency),
        "phase": tick.phase,
        "phase_index": tick.phase_index,
        "next_step_at": tick.next_step_at,
        "next_step": tick.next_step.describe() if tick.next_step is not None else None,
        "workers": tick.workers,
    }


def tick_from_json(raw: Mapping[str, Any]) -> Tick:
    next_step = raw.get("next_step")
    return Tick(
        at=float(raw["at"]),
        elapsed=float(raw["elapsed"]),
        duration=float(raw["duration"]),
        target_rate=float(raw["target_rate"]),
        publish_rate=float(raw["publish_rate"]),
        confirm_rate=float(raw["confirm_rate"]),
        consume_rate=float(raw["consume_rate"]),
        nack_rate=float(raw["nack_rate"]),
        return_rate=float(raw["return_rate"]),
        totals=Counters(**_known(Counters, raw["totals"])),
        pending_confirms=int(raw["pending_confirms"]),
        unacked=int(raw["unacked"]),
        connections=int(raw["connections"]),
        blocked=int(raw["blocked"]),
        settings=settings_from_json(raw["settings"]),
        pending=tuple(pending_from_json(p) for p in raw.get("pending", ())),
        latency=latency_from_json(raw.get("latency_ms", {})),
        phase=str(raw.get("phase", "")),
        phase_index=int(raw.get("phase_index", 0)),
        next_step_at=raw.get("next_step_at"),
        next_step=change_from_json(next_step) if next_step else None,
        workers=int(raw.get("workers", 0)),
    )


def broker_sample_to_json(sample: BrokerSample) -> dict[str, Any]:
    return asdict(sample)


def broker_sample_from_json(raw: Mapping[str, Any]) -> BrokerSample:
    values = _known(BrokerSample, raw)
    values["nodes"] = tuple(NodeSample(**_known(NodeSample, n)) for n in raw.get("nodes", ()))
    values["queues"] = tuple(QueueSample(**_known(QueueSample, q)) for q in raw.get("queues", ()))
    return BrokerSample(**values)


def summary_from_json(raw: Mapping[str, Any]) -> RunSummary:
    """A summary as ``RunSummary.to_json`` wrote it, read back."""
    return RunSummary(
        name=str(raw["name"]),
        started=float(raw["started"]),
        ended=float(raw["ended"]),
        outcome=str(raw["outcome"]),
        stop_reason=str(raw["stop_reason"]),
        safety=DataSafety(**_known(DataSafety, raw["safety"])),
        publish_rate=float(raw["publish_rate"]),
        confirm_rate=float(raw["confirm_rate"]),
        consume_rate=float(raw["consume_rate"]),
        latency=latency_from_json(raw.get("latency_ms", {})),
        phases=int(raw.get("phases", 1)),
        session_dir=raw.get("session_dir"),
        recording_error=str(raw.get("recording_error", "")),
        errors=tuple(str(e) for e in raw.get("errors", ())),
    )
