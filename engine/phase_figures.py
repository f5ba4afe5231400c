"""A running run's per-phase figures: the rows the recorder writes, kept, and ``figures.run``.

A script reading ``flowdeck run --json``, the cockpit's per-setting table, the autopilot and
a reader of the Spark report must see the same figures for a phase, so nothing is computed
here: :class:`PhaseTable` follows a run as a sink and keeps what the session records — a
client row per snapshot (``engine.recording.rows``), a row per broker poll, the run's events
and each snapshot's latency buckets at the recording's precision — and hands them to
:func:`figures.run.run_figures`, the one computation (rules in ``docs/reports.md``).

Latency buckets are merged into their phase once no phase boundary can still arrive for
them (:data:`HOLD_S`: a change's phase event comes once every worker said it is in force,
which can be after snapshots taken later than the boundary arrived), so memory does not
grow with the run's seconds; client rows and polls are a few numbers each.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Collection, Mapping
from typing import Any

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.events import RunEvent
from flowdeck.engine.latency import LATENCY_KEYS, BucketDecoder, LatencyKey, recorded_buckets
from flowdeck.engine.progress import RunSummary
from flowdeck.engine.recording.rows import (
    SETTING_COLUMNS,
    SWEEP_COLUMNS,
    Row,
    broker_row,
    client_row,
    interval_delta,
    t_us,
)
from flowdeck.engine.sinks import NullSink, RunStarted
from flowdeck.engine.snapshot import ClientSnapshot, Counters
from flowdeck.figures.latency import merge_buckets
from flowdeck.figures.phases import Phase, middle_of, phase_at, second_of, split_phases
from flowdeck.figures.run import PhaseFigures, RunFigures, RunInputs, run_figures

#: Seconds a snapshot's latency waits before it is merged into a phase.
HOLD_S = 5.0
__all__ = ["HOLD_S", "PhaseFigures", "PhaseTable", "RunFigures"]


class PhaseTable(NullSink):
    """Follows a run as a sink and says, whenever asked, the figures of each of its phases.

    ``latency_keys``: the latency kinds to keep (the cockpit keeps e2e only: decoding every
    worker's four histograms a second time would cost its loop); all by default.
    """

    def __init__(self, latency_keys: Collection[LatencyKey] = LATENCY_KEYS) -> None:
        self._started_at: float | None = None
        self._ended_at: float | None = None
        self._summary: Mapping[str, Any] | None = None
        self._stream = False
        self._rows: list[Row] = []
        self._polls: list[Row] = []
        self._events: list[dict[str, Any]] = []
        self._last: dict[int, Counters] = {}
        #: Each worker's latest snapshot time (unix s).
        self._latest: dict[int, float] = {}
        self._keys = tuple(latency_keys)
        self._decoder = BucketDecoder()
        #: Snapshots' buckets not yet merged: (snapshot time, {key: (values, counts)},
        #: {queue: (values, counts)}).
        self._held: deque[
            tuple[float, dict[LatencyKey, tuple[Any, Any]], dict[str, tuple[Any, Any]]]
        ] = deque()
        self._latency: dict[tuple[int, str, str], Counter[int]] = {}
        self._queue_latency: dict[tuple[int, str], Counter[int]] = {}

    # -- as a sink ---------------------------------------------------------------------------

    def on_start(self, run: RunStarted) -> None:
        self._stream = run.spec.queue_type == "stream"
        self.begin(run.started_at)

    def on_snapshot(self, snapshot: ClientSnapshot) -> None:
        self.add_snapshot(snapshot)

    def on_event(self, event: RunEvent) -> None:
        self.add_event(event)

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self.add_poll(sample)

    def on_finish(self, summary: RunSummary) -> None:
        self.end(summary.ended, summary.to_json())

    def begin(self, started_at: float) -> None:
        """The run's time origin (a sink gets it with the run's start; a view fed from
        ticks takes it from the first one)."""
        self._started_at = started_at

    def end(self, ended_at: float | None, summary: Mapping[str, Any] | None) -> None:
        """The run ended: its end time, and its summary document (when the clients were
        active): from now on each phase's msg/s divides by those spans, as the report and
        the JSON summary do."""
        self._ended_at = ended_at
        self._summary = summary

    @property
    def started_at(self) -> float | None:
        return self._started_at

    @property
    def snapshots(self) -> int:
        """How many snapshots the table has taken in."""
        return len(self._rows)

    @property
    def published(self) -> int:
        """Messages published so far, by each worker's latest snapshot."""
        return sum(counters.published for counters in self._last.values())

    # -- feeding -----------------------------------------------------------------------------

    def add_snapshot(self, snap: ClientSnapshot) -> None:
        """Keep the snapshot as the recorder writes it: a client row and its buckets."""
        if self._started_at is None:
            self._started_at = snap.at - snap.interval
        delta = interval_delta(snap, self._last.get(snap.worker))
        self._last[snap.worker] = snap.counters
        self._latest[snap.worker] = max(snap.at, self._latest.get(snap.worker, snap.at))
        self._rows.append(client_row(snap, delta, self._started_at))
        buckets = {
            key: recorded_buckets(blob, self._decoder)
            for key, blob in snap.latency.items()
            if blob and key in self._keys
        }
        queues = {
            queue: recorded_buckets(blob, self._decoder)
            for queue, blob in snap.queue_latency.items()
            if blob
        }
        self._held.append((snap.at, buckets, queues))
        self._merge_held(older_than=snap.at - HOLD_S)

    def add_event(self, event: RunEvent) -> None:
        self._events.append(event.to_json())

    def add_poll(self, sample: BrokerSample) -> None:
        if self._started_at is not None:
            self._polls.append(broker_row(sample, self._started_at))

    # -- reading -----------------------------------------------------------------------------

    def complete_before(self, at: float) -> bool:
        """Whether every row of the seconds before ``at`` is in: each worker has sent a
        snapshot whose run second is in force after ``at`` (its middle at or after it),
        and a broker poll taken after it is in when the run has polls. A phase ended at
        ``at`` (by a change or a mark) then has its final figures: later rows belong to the
        phases after it (``figures.phases.second_of``)."""
        if self._started_at is None or not self._latest:
            return False
        start_us = t_us(self._started_at)
        boundary_us = t_us(at)
        workers_past = all(
            middle_of(second_of(t_us(latest), start_us), start_us) >= boundary_us
            for latest in self._latest.values()
        )
        polls_past = not self._polls or self._polls[-1]["t_us"] >= boundary_us
        return workers_past and polls_past

    def phases(self, ended: float | None = None) -> tuple[Phase, ...]:
        """The run's phases so far (``figures.phases.split_phases`` over its events)."""
        if self._started_at is None:
            return ()
        end = ended if ended is not None else self._ended_at
        return tuple(split_phases(self._events, self._started_at, end))

    def figures(
        self, ended: float | None = None, max_p99_ms: float | None = None
    ) -> RunFigures | None:
        """Every figure of the run so far (None before it started); ``ended``: when the
        run ended, if the table was not told."""
        if self._started_at is None:
            return None
        phases = self.phases(ended)
        self._merge_held(older_than=float("inf"), phases=phases)
        inputs = RunInputs(
            key="",
            start_us=t_us(self._started_at),
            phases=phases,
            client_rows=self._rows,
            polls=self._polls,
            latency=self._latency,
            summary=self._summary,
            settings=SETTING_COLUMNS,
            sweep_settings=SWEEP_COLUMNS,
            queue_latency=self._queue_latency,
            stream=self._stream,
        )
        return run_figures(inputs, max_p99_ms)

    def phase_figures(self, ended: float | None = None) -> list[PhaseFigures]:
        """The phases' figures (none before the run started)."""
        found = self.figures(ended)
        return [] if found is None else list(found.phases)

    # -- inside --------------------------------------------------------------------------------

    def _merge_held(self, older_than: float, phases: tuple[Phase, ...] | None = None) -> None:
        if self._started_at is None:
            return
        phases = phases if phases is not None else self.phases()
        if not phases:
            return
        start_us = t_us(self._started_at)
        while self._held and self._held[0][0] < older_than:
            at, buckets, queues = self._held.popleft()
            second = second_of(t_us(at), start_us)
            index = phase_at(phases, middle_of(second, start_us)).index
            for (kind, basis), (values, counts) in buckets.items():
                merge_buckets(
                    self._latency.setdefault((index, kind.value, basis.value), Counter()),
                    values.tolist(),
                    counts.tolist(),
                )
            for queue, (values, counts) in queues.items():
                merge_buckets(
                    self._queue_latency.setdefault((index, queue), Counter()),
                    values.tolist(),
                    counts.tolist(),
                )
