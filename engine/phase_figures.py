"""The per-phase table of a run, as the run ends: the figures the report computes, live.

A script reading ``flowdeck run --json`` and a reader of the Spark report must see the same
figures for a phase, so this module does not compute them itself: it turns the snapshots
the controller received into the rows the recorder writes and hands them to the report's
own statistics (``figures.stats`` and ``figures.active``, rules stated in
``docs/reports.md``):

* a snapshot belongs to the run second holding the middle of its interval, the second to
  the phase in force at its middle;
* msg/s (``*_rate_mean``): messages over the clients' active time in the phase — the run
  summary's basis (published / first to last send, confirmed / first send to last
  confirm, consumed / first to last delivery); until the run's summary says when the
  clients were active, the run's start and where publishing stopped stand in;
* per second: per worker messages / interval length, leaving out intervals shorter than
  half a second (the run's cut-short last one), summed over workers; per phase their
  population standard deviation and minimum (how steady);
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
from flowdeck.engine.progress import Percentiles, RunSummary
from flowdeck.engine.sinks import NullSink, RunStarted
from flowdeck.engine.snapshot import ActiveTimes, ClientSnapshot, Counters
from flowdeck.figures import active, stats
from flowdeck.figures.phases import (
    AFTER_EVERYTHING_US,
    BEFORE_EVERYTHING_US,
    Phase,
    middle_of,
    phase_at,
    second_of,
    to_us,
)

#: Seconds a snapshot's latency waits before it is merged into a phase: a change's phase
#: event comes once every worker said it is in force, which can be after snapshots taken
#: later than the boundary arrived.
HOLD_S = 5.0
DRAIN_LABEL = "drain"
#: A kept snapshot's fields: the client table's columns the report's statistics read.
ROW_COLUMNS: tuple[str, ...] = (
    "worker", "t_us", "interval_s", "published", "confirmed", "consumed", "nacked",
    "returned", "pending_confirms", "unacked", "blocked_connections", "target_rate", "paused",
    *stats.SETTINGS,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PhaseFigures:
    """One phase of a run: when it was, what was asked and achieved, its latency.

    ``*_rate_mean``: msg/s on the run summary's basis, messages over the clients' active
    time in the phase (``published`` over ``publish_s`` ...); ``*_rate_sd`` and
    ``*_rate_min``: the population standard deviation and minimum of the phase's
    per-second rates (how steady). Times in seconds since the run started;
    ``target_rate`` is None when publishers had no rate limit (or were paused
    throughout); ``drain`` marks the seconds after publishing stopped.
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
    published: int = 0
    confirmed: int = 0
    consumed: int = 0
    #: The clients' active time in the phase, the rates' denominators.
    publish_s: float = 0.0
    confirm_s: float = 0.0
    consume_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["latency_ms"] = {
            f"{kind.value}_{basis.value}": asdict(p) for (kind, basis), p in self.latency.items()
        }
        del out["latency"]
        return out


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
        #: The client rows, as tuples in :data:`ROW_COLUMNS` order (a long run keeps many).
        self._rows: list[tuple[Any, ...]] = []
        self._last: dict[int, Counters] = {}
        self._boundaries: list[_Boundary] = []
        self._drained = False
        self._held: deque[ClientSnapshot] = deque()
        self._latency: dict[int, dict[LatencyKey, HdrHistogram]] = {}
        self._active: ActiveTimes | None = None

    # -- as a sink ---------------------------------------------------------------------------

    def on_start(self, run: RunStarted) -> None:
        self.begin(run.started_at)

    def on_snapshot(self, snapshot: ClientSnapshot) -> None:
        self.add_snapshot(snapshot)

    def on_event(self, event: RunEvent) -> None:
        self.add_event(event)

    def on_finish(self, summary: RunSummary) -> None:
        self.end(summary.active)

    def begin(self, started_at: float) -> None:
        """The run's time origin (a sink gets it with the run's start; a view fed from
        ticks takes it from the first one)."""
        self._started_at = started_at

    def end(self, active: ActiveTimes) -> None:
        """When the clients were active (the summary's): from now on each phase's msg/s
        divides by those spans, as the report and the JSON summary do."""
        self._active = active

    # -- feeding -----------------------------------------------------------------------------

    def add_snapshot(self, snap: ClientSnapshot) -> None:
        """Keep the snapshot as the recorder writes it: a client row of its interval."""
        previous = self._last.get(snap.worker)
        delta = snap.counters if previous is None else snap.counters - previous
        if any(getattr(delta, name) < 0 for name in Counters.__dataclass_fields__):
            delta = snap.counters  # the worker's counters started again from zero
        self._last[snap.worker] = snap.counters
        settings = snap.settings
        self._rows.append(
            (
                snap.worker,
                to_us(snap.at),
                snap.interval,
                delta.published,
                delta.confirmed,
                delta.consumed,
                delta.nacked,
                delta.returned,
                snap.pending_confirms,
                snap.unacked,
                snap.blocked,
                snap.target_rate,
                settings.paused,
                *(getattr(settings, name) for name in stats.SETTINGS),
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
        end_of_run = (
            ended if ended is not None else max((r[1] / 1e6 for r in self._rows), default=start)
        )
        rows = [dict(zip(ROW_COLUMNS, row, strict=True)) for row in self._rows]
        phases = _phases(bounds, start, ended)
        start_us = to_us(start)
        seconds = stats.client_seconds(rows, "", start_us, phases)
        throughput = active.phase_throughput(
            rows,
            start_us,
            phases,
            self._spans(start_us, bounds, ended),
            paused_seconds={row["sec"] for row in seconds if row["paused"]},
        )
        client = {
            row["phase"]: row
            for row in stats.phase_client_stats(
                seconds, {("", index): row for index, row in throughput.items()}
            )
        }
        out = []
        for position, boundary in enumerate(bounds):
            finish = bounds[position + 1].at if position + 1 < len(bounds) else end_of_run
            out.append(
                _figures(
                    boundary,
                    client.get(position, {}),
                    start_s=round(max(boundary.at, start) - start, 3),
                    end_s=round(finish - start, 3),
                    latency=latency_percentiles(self._latency.get(position, {})),
                )
            )
        return out

    # -- inside --------------------------------------------------------------------------------

    def _spans(
        self, start_us: int, bounds: list[_Boundary], ended: float | None
    ) -> active.ActiveSpans:
        """The summary's active times once the run said them; until then the run's start
        and where publishing stopped (the report's rule for a session without them)."""
        if self._active is not None:
            a = self._active
            return active.ActiveSpans.from_times(
                a.first_publish, a.last_publish, a.last_confirm, a.first_consume, a.last_consume
            )
        drain = next((to_us(b.at) for b in bounds if b.drain), None)
        return active.ActiveSpans.of_session(
            None, start_us, drain, None if ended is None else to_us(ended)
        )

    def _phase_bounds(self) -> list[_Boundary]:
        start = self._started_at or 0.0
        bounds = sorted(self._boundaries, key=lambda b: b.at)
        if not bounds or bounds[0].at > start + 0.5:
            bounds.insert(0, _Boundary(0, "start", start))
        return bounds

    def _merge_held(self, older_than: float) -> None:
        if self._started_at is None:
            return
        start_us = to_us(self._started_at)
        phases = _phases(self._phase_bounds(), self._started_at, None)
        while self._held and self._held[0].at < older_than:
            snap = self._held.popleft()
            second = second_of(to_us(snap.at), start_us)
            position = phase_at(phases, middle_of(second, start_us)).index
            merged = self._latency.get(position)
            self._latency[position] = merge_latency([snap], merged)


def _phases(bounds: list[_Boundary], start: float, ended: float | None) -> list[Phase]:
    """The boundaries as the report's phases (indexed by position): ``[start, end)``, the
    first open to the past and the last to the future."""
    starts = [to_us(max(b.at, start)) for b in bounds]
    phases = []
    for position, boundary in enumerate(bounds):
        last = position == len(bounds) - 1
        phases.append(
            Phase(
                index=position,
                label=boundary.label,
                start_us=BEFORE_EVERYTHING_US if position == 0 else starts[position],
                end_us=AFTER_EVERYTHING_US if last else starts[position + 1],
                begin_us=starts[position],
                finish_us=(None if ended is None else to_us(ended))
                if last
                else starts[position + 1],
                drain=boundary.drain,
            )
        )
    return phases


def _number(row: stats.Row, name: str) -> float:
    value = row.get(name)
    return 0.0 if value is None else float(value)


def _figures(
    boundary: _Boundary,
    row: stats.Row,
    *,
    start_s: float,
    end_s: float,
    latency: Mapping[LatencyKey, Percentiles],
) -> PhaseFigures:
    """One phase's figures from the report's statistics of it (an empty ``row``: none)."""
    target = row.get("target_rate")
    return PhaseFigures(
        index=boundary.index,
        label=boundary.label,
        start_s=start_s,
        end_s=end_s,
        drain=boundary.drain,
        seconds=int(row.get("seconds") or 0),
        target_rate=None if target is None or boundary.drain else float(target),
        publish_rate_mean=_number(row, "publish_rate_mean"),
        publish_rate_sd=_number(row, "publish_rate_sd"),
        publish_rate_min=_number(row, "publish_rate_min"),
        confirm_rate_mean=_number(row, "confirm_rate_mean"),
        confirm_rate_sd=_number(row, "confirm_rate_sd"),
        confirm_rate_min=_number(row, "confirm_rate_min"),
        consume_rate_mean=_number(row, "consume_rate_mean"),
        consume_rate_sd=_number(row, "consume_rate_sd"),
        consume_rate_min=_number(row, "consume_rate_min"),
        pending_confirms_mean=_number(row, "pending_confirms_mean"),
        pending_confirms_max=int(row.get("pending_confirms_max") or 0),
        unacked_mean=_number(row, "unacked_mean"),
        unacked_max=int(row.get("unacked_max") or 0),
        blocked_s=int(row.get("blocked_s") or 0),
        paused_s=int(row.get("paused_s") or 0),
        latency=latency,
        published=int(row.get("published") or 0),
        confirmed=int(row.get("confirmed") or 0),
        consumed=int(row.get("consumed") or 0),
        publish_s=_number(row, "publish_s"),
        confirm_s=_number(row, "confirm_s"),
        consume_s=_number(row, "consume_s"),
    )
