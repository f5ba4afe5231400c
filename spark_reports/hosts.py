"""Per-host figures of a run whose workers ran on several hosts (pure, no Spark).

A run placed by Spark (``flowdeck run --spark-master ... --workers N``) records where each
worker ran in its event log: a ``worker N connected from HOST (pid P)`` event per worker
(``detail``: ``worker``, ``host``, ``pid``) and, for a worker whose link dropped before
its report, a ``worker N on HOST ... lost`` event (``detail.worker_lost``). The client and
latency rows carry the worker number, so each joins to its host here.

Per host: its workers' counts summed; its msg/s on the basis of every other rate of the
report (``figures.active``): its rows' messages over the part of the run's active
time those rows cover, averaged over the host's workers (a lost worker covers the run up
to its last snapshot); its e2e latency percentiles merged exactly from its workers'
histogram buckets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowdeck.figures import active
from flowdeck.figures.latency import latency_percentiles
from flowdeck.figures.phases import Phase

Row = dict[str, Any]
#: The latency the per-host table shows (the sweep tables' consumer-side latency).
HOST_LATENCY = ("e2e", "actual")


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one worker of the run ran."""

    worker: int
    host: str
    pid: int | None
    lost: bool = False


def placements(events: Iterable[Mapping[str, Any]]) -> dict[int, Placement]:
    """Per worker number, where it ran: from the run's connect and lost events. Empty for
    a run whose workers were local processes (no connect events)."""
    found: dict[int, Placement] = {}
    lost: set[int] = set()
    for event in events:
        detail = event.get("detail") or {}
        if not isinstance(detail, Mapping):
            continue
        worker, host = detail.get("worker"), detail.get("host")
        if "worker_lost" in detail and isinstance(detail["worker_lost"], int):
            lost.add(detail["worker_lost"])
        elif isinstance(worker, int) and isinstance(host, str) and "pid" in detail:
            pid = detail.get("pid")
            found[worker] = Placement(worker, host, pid if isinstance(pid, int) else None)
    return {
        worker: Placement(p.worker, p.host, p.pid, worker in lost)
        for worker, p in sorted(found.items())
    }


def host_figures(
    client: Sequence[Row],
    buckets: Iterable[Row],
    where: Mapping[int, Placement],
    run_start_us: int,
    phases: Sequence[Phase],
    spans: active.ActiveSpans,
) -> list[Row]:
    """One row per host, in host-name order: ``host``, ``workers`` (their numbers),
    ``lost`` (the lost ones), the counts and ``*_s``/``*_rate_mean`` of
    :func:`active.whole_throughput`, and ``p50``/``p99`` (µs) of its e2e latency.

    ``client``: the session's client rows (``worker``, ``t_us``, ``interval_s``, counts);
    ``buckets``: its e2e actual latency buckets per worker (``worker``, ``value_us``,
    ``count``). Rows of a worker that never said where it ran are left out."""
    by_host: dict[str, list[Row]] = defaultdict(list)
    for row in client:
        place = where.get(row["worker"])
        if place is not None:
            by_host[place.host].append(row)
    host_buckets = [
        {**row, "host": where[row["worker"]].host, "kind": "e2e", "basis": "actual"}
        for row in buckets
        if row["worker"] in where
    ]
    latency = {row["host"]: row for row in latency_percentiles(host_buckets, ["host"])}
    result = []
    for host in sorted({p.host for p in where.values()}):
        mine = [p for p in where.values() if p.host == host]
        per_phase = active.phase_throughput(by_host.get(host, []), run_start_us, phases, spans)
        figures: Row = {
            "host": host,
            "workers": tuple(p.worker for p in mine),
            "lost": tuple(p.worker for p in mine if p.lost),
            **active.whole_throughput(per_phase.values()),
        }
        merged = latency.get(host, {})
        figures["p50"] = merged.get("p50")
        figures["p99"] = merged.get("p99")
        result.append(figures)
    return result
