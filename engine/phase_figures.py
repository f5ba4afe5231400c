"""The per-phase table of a run, as the run ends: the figures the report computes, live.

A script reading ``flowdeck run --json`` and a reader of the Spark report must see the same
figures for a phase, so this module follows the report's rules (``spark_reports.measure``,
stated in ``docs/reports.md``) on the snapshots the controller received:

* a snapshot belongs to the phase in which its interval ended (``start < at <= end``) and
  to the run second ``floor(at - run start)``;
* rates: per worker and second, messages / interval length, leaving out intervals shorter
  than :data:`MIN_INTERVAL_S` (the run's cut-short last one); summed over workers per
  second; per phase the mean, population standard deviation and minimum over seconds;
* target: per second the summed ``target_rate`` (none when a worker had 0); per phase the
  mean over its seconds not paused, when each of them has one;
* gauges (pending confirms, unacked, blocked): per worker the second's last value, summed;
  per phase the mean and max over seconds;
* latency: every interval histogram of the phase merged.

Phases come from the controller's own ``phase`` events (the change ledger's) and the
``drain`` event: the seconds after publishing stopped are a phase of their own, marked
``drain``. Counts and gauges of every snapshot are kept (a few numbers each); latency
histograms are merged into their phase once no phase boundary can still arrive for them
(:data:`HOLD_S`), so memory does not grow with the run.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from flowdeck.engine.aggregate import latency_percentiles, merge_latency
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKey
from flowdeck.engine.progress import Percentiles
from flowdeck.engine.sinks import NullSink, RunStarted
from flowdeck.engine.snapshot import ClientSnapshot, Counters

#: Client intervals shorter than this are left out of rates and gauges (as in the report).
MIN_INTERVAL_S = 0.5
#: Seconds a snapshot's latency waits before it is merged into a phase: a change's phase
#: event comes once every worker said it is in force, which can be after snapshots taken
#: later than the boundary arrived.
HOLD_S = 5.0
DRAIN_LABEL = "drain"


@dataclass(frozen=True, slots=True)
class PhaseFigures:
    """One phase of a run: when it was, what was asked and achieved, its latency.

    Rates in msg/s (mean, population sd and minimum over the phase's seconds), times in
    seconds since the run started; ``target_rate`` is None when publishers had no rate limit
    (or were paused throughout); ``drain`` marks the seconds after publishing stopped.
    """

    index: int
    label: str
    start_s: float
    end_s: float
    drain: bool
    seconds: int
    target_rate: float | None
    publish_rate_mean: float
    publish_rate_sd: float
    publish_rate_min: float
    confirm_rate_mean: float
    confirm_rate_sd: float
    confirm_rate_min: float
    consume_rate_mean: float
    consume_rate_sd: float
    consume_rate_min: float
    pending_confirms_mean: float
    pending_confirms_max: int
    unacked_mean: float
    unacked_max: int
    blocked_s: int
    paused_s: int
    latency: Mapping[LatencyKey, Percentiles] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["latency_ms"] = {
            f"{kind.value}_{basis.value}": asdict(p) for (kind, basis), p in self.latency.items()
        }
        del out["latency"]
        return out


@dataclass(frozen=True, slots=True)
class _Row:
    """What the table keeps of one snapshot: its interval's deltas and gauges."""

    worker: int
    at: float
    interval: float
    delta: Counters
    pending_confirms: int
    unacked: int
    blocked: int
    target_rate: float
    paused: bool


@dataclass(frozen=True, slots=True)
class _Boundary:
    index: int
    label: str
    at: float
    drain: bool = False


class PhaseTable(NullSink):
    """Follows a run as a sink and says, at its end, the figures of each of its phases."""

    def __init__(self) -> None:
        self._started_at: float | None = None
        self._rows: list[_Row] = []
        self._last: dict[int, Counters] = {}
        self._boundaries: list[_Boundary] = []
        self._drained = False
        self._held: deque[ClientSnapshot] = deque()
        self._latency: dict[int, dict[LatencyKey, HdrHistogram]] = {}

    # -- as a sink ---------------------------------------------------------------------------

    def on_start(self, run: RunStarted) -> None:
        self._started_at = run.started_at

    def on_snapshot(self, snapshot: ClientSnapshot) -> None:
        self.add_snapshot(snapshot)

    def on_event(self, event: RunEvent) -> None:
        self.add_event(event)

    # -- feeding -----------------------------------------------------------------------------

    def add_snapshot(self, snap: ClientSnapshot) -> None:
        previous = self._last.get(snap.worker)
        delta = snap.counters if previous is None else snap.counters - previous
        if any(getattr(delta, name) < 0 for name in Counters.__dataclass_fields__):
            delta = snap.counters  # the worker's counters started again from zero
        self._last[snap.worker] = snap.counters
        self._rows.append(
            _Row(
                worker=snap.worker,
                at=snap.at,
                interval=snap.interval,
                delta=delta,
                pending_confirms=snap.pending_confirms,
                unacked=snap.unacked,
                blocked=snap.blocked,
                target_rate=snap.target_rate,
                paused=snap.settings.paused,
            )
        )
        self._held.append(snap)
        self._merge_held(older_than=snap.at - HOLD_S)

    def add_event(self, event: RunEvent) -> None:
        """Phase events open a phase, the drain event the drain (changes after it none)."""
        if event.kind is EventKind.PHASE and not self._drained:
            index = event.detail.get("index", len(self._boundaries))
            label = event.detail.get("label") or event.message
            self._boundaries.append(_Boundary(int(index), str(label), event.at))
        elif event.kind is EventKind.DRAIN and not self._drained:
            self._drained = True
            index = self._boundaries[-1].index + 1 if self._boundaries else 1
            self._boundaries.append(_Boundary(index, DRAIN_LABEL, event.at, drain=True))

    # -- reading -----------------------------------------------------------------------------

    def figures(self, ended: float | None = None) -> list[PhaseFigures]:
        """Every phase's figures; ``ended``: when the run ended (the last phase's end)."""
        self._merge_held(older_than=math.inf)
        start = self._started_at
        if start is None:
            return []
        bounds = self._phase_bounds()
        end_of_run = ended if ended is not None else max((r.at for r in self._rows), default=start)
        out = []
        for position, boundary in enumerate(bounds):
            rows = [r for r in self._rows if self._phase_of(r.at, bounds) == position]
            finish = bounds[position + 1].at if position + 1 < len(bounds) else end_of_run
            histograms = self._latency.get(position, {})
            out.append(
                _figures(
                    boundary,
                    rows,
                    start=start,
                    begin=max(boundary.at, start),
                    finish=finish,
                    latency=latency_percentiles(histograms),
                )
            )
        return out

    # -- inside --------------------------------------------------------------------------------

    def _phase_bounds(self) -> list[_Boundary]:
        start = self._started_at or 0.0
        bounds = sorted(self._boundaries, key=lambda b: b.at)
        if not bounds or bounds[0].at > start + 0.5:
            bounds.insert(0, _Boundary(0, "start", start))
        return bounds

    @staticmethod
    def _phase_of(at: float, bounds: list[_Boundary]) -> int:
        """Position of the phase whose (start, end] holds ``at``; the first and last phase
        are open at the run's ends."""
        position = 0
        for i in range(1, len(bounds)):
            if at > bounds[i].at:
                position = i
        return position

    def _merge_held(self, older_than: float) -> None:
        if self._started_at is None:
            return
        bounds = self._phase_bounds()
        while self._held and self._held[0].at < older_than:
            snap = self._held.popleft()
            position = self._phase_of(snap.at, bounds)
            merged = self._latency.get(position)
            self._latency[position] = merge_latency([snap], merged)


def _figures(
    boundary: _Boundary,
    rows: list[_Row],
    *,
    start: float,
    begin: float,
    finish: float,
    latency: Mapping[LatencyKey, Percentiles],
) -> PhaseFigures:
    """One phase's figures from its rows, by the report's rules (module docstring)."""
    # (second, worker) -> the rows of that worker ending in that second
    cells: dict[tuple[int, int], list[_Row]] = {}
    for row in rows:
        if row.interval >= MIN_INTERVAL_S:
            cells.setdefault((math.floor(row.at - start), row.worker), []).append(row)
    seconds: dict[int, dict[str, Any]] = {}
    for (second, _worker), cell in sorted(cells.items()):
        interval = sum(r.interval for r in cell)
        last = max(cell, key=lambda r: r.at)
        figures = seconds.setdefault(
            second,
            {
                "publish": 0.0,
                "confirm": 0.0,
                "consume": 0.0,
                "pending": 0,
                "unacked": 0,
                "blocked": 0,
                "target": 0.0,
                "min_target": math.inf,
                "paused": False,
            },
        )
        figures["publish"] += sum(r.delta.published for r in cell) / interval
        figures["confirm"] += sum(r.delta.confirmed for r in cell) / interval
        figures["consume"] += sum(r.delta.consumed for r in cell) / interval
        figures["pending"] += last.pending_confirms
        figures["unacked"] += last.unacked
        figures["blocked"] += last.blocked
        figures["target"] += last.target_rate
        figures["min_target"] = min(figures["min_target"], last.target_rate)
        figures["paused"] = figures["paused"] or last.paused
    per_second = list(seconds.values())

    def stats(name: str) -> tuple[float, float, float]:
        values = [s[name] for s in per_second]
        if not values:
            return 0.0, 0.0, 0.0
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        return mean, sd, min(values)

    running = [s for s in per_second if not s["paused"]]
    targets = [s["target"] for s in running if s["min_target"] > 0]
    target = (
        sum(targets) / len(targets)
        if running and len(targets) == len(running) and not boundary.drain
        else None
    )
    publish, confirm, consume = stats("publish"), stats("confirm"), stats("consume")
    pending = [s["pending"] for s in per_second]
    unacked = [s["unacked"] for s in per_second]
    return PhaseFigures(
        index=boundary.index,
        label=boundary.label,
        start_s=round(begin - start, 3),
        end_s=round(finish - start, 3),
        drain=boundary.drain,
        seconds=len(per_second),
        target_rate=target,
        publish_rate_mean=publish[0],
        publish_rate_sd=publish[1],
        publish_rate_min=publish[2],
        confirm_rate_mean=confirm[0],
        confirm_rate_sd=confirm[1],
        confirm_rate_min=confirm[2],
        consume_rate_mean=consume[0],
        consume_rate_sd=consume[1],
        consume_rate_min=consume[2],
        pending_confirms_mean=sum(pending) / len(pending) if pending else 0.0,
        pending_confirms_max=max(pending, default=0),
        unacked_mean=sum(unacked) / len(unacked) if unacked else 0.0,
        unacked_max=max(unacked, default=0),
        blocked_s=sum(1 for s in per_second if s["blocked"] > 0),
        paused_s=sum(1 for s in per_second if s["paused"]),
        latency=latency,
    )
