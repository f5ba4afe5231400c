"""From per-worker snapshots to the run's Tick: rates, totals and latency percentiles.

Workers report once a second on their own clocks, so the controller's one-second tick does
not line up with them: a tick may see no new snapshot from a worker, or two. Rates are
therefore computed per worker from the difference of its two latest cumulative snapshots
over that snapshot's own interval, and summed; a worker silent for longer than
``STALE_AFTER`` seconds contributes no rate (its totals still count). Latency histograms
cover each snapshot's interval only: a tick merges the ones that arrived since the last
tick, and the run keeps a merged histogram of everything for the summary.

A tick covers the run up to its own time: the snapshots taken after it wait for the next
tick. The controller ticks once per run second and names the second; when its loop wakes
late on a loaded machine it ticks each missed second in turn at that second's end, and
each of them shows that second's snapshots, not all of them on the first and none on the
others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hdrh.histogram import HdrHistogram

from flowdeck.engine.latency import (
    LATENCY_KEYS,
    LatencyKey,
    decode,
    new_histogram,
    values_at_percentiles,
)
from flowdeck.engine.progress import PendingChange, Tick
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings
from flowdeck.figures.latency import QUANTILES, Percentiles

if TYPE_CHECKING:
    from flowdeck.engine.spec import ScheduleStep

#: Seconds after which a worker's last snapshot no longer gives a current rate.
STALE_AFTER = 2.5


@dataclass(frozen=True, slots=True)
class Rates:
    """Messages per second over the latest interval, summed over workers."""

    publish: float = 0.0
    confirm: float = 0.0
    consume: float = 0.0
    nack: float = 0.0
    ret: float = 0.0


def rates_between(previous: Counters, current: Counters, seconds: float) -> Rates:
    """Rates from two cumulative counters ``seconds`` apart (zero when no time passed)."""
    if seconds <= 0:
        return Rates()
    delta = current - previous
    return Rates(
        publish=delta.published / seconds,
        confirm=delta.confirmed / seconds,
        consume=delta.consumed / seconds,
        nack=delta.nacked / seconds,
        ret=delta.returned / seconds,
    )


def add_rates(rates: Iterable[Rates]) -> Rates:
    total = Rates()
    for r in rates:
        total = Rates(
            total.publish + r.publish,
            total.confirm + r.confirm,
            total.consume + r.consume,
            total.nack + r.nack,
            total.ret + r.ret,
        )
    return total


def percentiles(histogram: HdrHistogram) -> Percentiles | None:
    """p50/p75/p95/p99/max in milliseconds of a microsecond histogram; None when empty."""
    count = int(histogram.get_total_count())
    if count == 0:
        return None
    values = values_at_percentiles(histogram, QUANTILES)
    p50, p75, p95, p99, p999 = (values[q] / 1000.0 for q in QUANTILES)
    return Percentiles(
        count=count,
        p50=p50,
        p75=p75,
        p95=p95,
        p99=p99,
        p999=p999,
        max=histogram.get_max_value() / 1000.0,
    )


def merge_latency(
    snapshots: Iterable[ClientSnapshot], into: Mapping[LatencyKey, HdrHistogram] | None = None
) -> dict[LatencyKey, HdrHistogram]:
    """Merge the snapshots' encoded interval histograms per (kind, basis)."""
    merged = dict(into) if into is not None else {key: new_histogram() for key in LATENCY_KEYS}
    for snap in snapshots:
        for key, blob in snap.latency.items():
            if blob:
                merged.setdefault(key, new_histogram()).add(decode(blob))
    return merged


def latency_percentiles(
    histograms: Mapping[LatencyKey, HdrHistogram],
) -> dict[LatencyKey, Percentiles]:
    out: dict[LatencyKey, Percentiles] = {}
    for key, histogram in histograms.items():
        p = percentiles(histogram)
        if p is not None:
            out[key] = p
    return out


@dataclass(frozen=True, slots=True)
class Aggregate:
    """What all workers say right now (one tick's worth), before the controller adds the
    settings, phase and schedule it alone knows."""

    rates: Rates
    totals: Counters
    target_rate: float
    pending_confirms: int
    unacked: int
    connections: int
    blocked: int
    latency: dict[LatencyKey, Percentiles]
    errors: tuple[str, ...]
    #: The snapshots this tick took in, in time order (``Tick.snapshots``).
    snapshots: tuple[ClientSnapshot, ...] = field(default=(), compare=False, repr=False)


class SnapshotAggregator:
    """Keeps each worker's latest snapshots and the run-wide latency histograms."""

    def __init__(self) -> None:
        self._latest: dict[int, ClientSnapshot] = {}
        self._rates: dict[int, Rates] = {}
        self._since_tick: list[ClientSnapshot] = []
        self._waiting: list[ClientSnapshot] = []  # taken after the last tick's time
        self._run_latency: dict[LatencyKey, HdrHistogram] = {
            key: new_histogram() for key in LATENCY_KEYS
        }

    def add(self, snap: ClientSnapshot) -> None:
        """A snapshot as it arrives: it counts in the first tick at or after its time (and
        in the run's latency at once)."""
        self._waiting.append(snap)
        merge_latency([snap], self._run_latency)

    def _apply(self, snap: ClientSnapshot) -> None:
        previous = self._latest.get(snap.worker)
        if previous is not None and snap.at < previous.at:
            return  # a late duplicate; counters are cumulative, the newer one already counts
        base = previous.counters if previous is not None else Counters()
        seconds = snap.at - previous.at if previous is not None else snap.interval
        self._rates[snap.worker] = rates_between(base, snap.counters, seconds)
        self._latest[snap.worker] = snap
        self._since_tick.append(snap)

    def last_snapshot(self, worker: int) -> ClientSnapshot | None:
        """The newest snapshot ``worker`` sent so far, ticked or still waiting for its tick."""
        known = [s for s in self._waiting if s.worker == worker]
        if (latest := self._latest.get(worker)) is not None:
            known.append(latest)
        return max(known, key=lambda s: s.at, default=None)

    @property
    def totals(self) -> Counters:
        total = Counters()
        for snap in self._latest.values():
            total = total + snap.counters
        return total

    def tick(self, now: float) -> Aggregate:
        """Aggregate over workers at ``now`` (the snapshots taken by then); starts a new
        latency window."""
        due = sorted((s for s in self._waiting if s.at <= now), key=lambda s: s.at)
        self._waiting = [s for s in self._waiting if s.at > now]
        for snap in due:
            self._apply(snap)
        live = [w for w, s in self._latest.items() if now - s.at <= STALE_AFTER]
        window = merge_latency(self._since_tick)
        errors = tuple(e for s in self._since_tick for e in s.errors)
        self._since_tick = []
        latest = list(self._latest.values())
        return Aggregate(
            rates=add_rates(self._rates[w] for w in live),
            totals=self.totals,
            target_rate=sum(s.target_rate for s in latest),
            pending_confirms=sum(s.pending_confirms for s in latest),
            unacked=sum(s.unacked for s in latest),
            connections=sum(s.connections for s in latest),
            blocked=sum(s.blocked for s in latest),
            latency=latency_percentiles(window),
            errors=errors,
            snapshots=tuple(due),
        )

    def run_latency(self) -> dict[LatencyKey, Percentiles]:
        """Percentiles over every latency measured in the run so far."""
        return latency_percentiles(self._run_latency)


def assemble_tick(
    agg: Aggregate,
    *,
    at: float,
    started_at: float,
    duration: float,
    settings: Settings,
    pending: Sequence[PendingChange],
    phase: str,
    phase_index: int,
    next_step: ScheduleStep | None,
    workers: int,
    final: Counters | None = None,
    second: int = 0,
    stalled: float = 0.0,
) -> Tick:
    """The Tick the screen shows, from one tick's aggregate and what the controller keeps.

    The one place a Tick is put together, for the live run (the controller) and for a
    recorded one read back (the session reader), so both show the same. Before anything is
    published the workers' targets are not in yet, so the rate asked for (spec rate times
    publishers) stands in. ``final`` replaces the totals with the workers' end-of-run
    reports (later than their last snapshots).
    """
    target = agg.target_rate
    if not agg.totals.published and target == 0 and not settings.paused:
        target = settings.rate * settings.publishers
    return Tick(
        at=at,
        elapsed=at - started_at,
        duration=duration,
        target_rate=target,
        publish_rate=agg.rates.publish,
        confirm_rate=agg.rates.confirm,
        consume_rate=agg.rates.consume,
        nack_rate=agg.rates.nack,
        return_rate=agg.rates.ret,
        totals=final if final is not None else agg.totals,
        pending_confirms=agg.pending_confirms,
        unacked=agg.unacked,
        connections=agg.connections,
        blocked=agg.blocked,
        settings=settings,
        pending=tuple(pending),
        latency=agg.latency,
        phase=phase,
        phase_index=phase_index,
        next_step_at=next_step.at if next_step else None,
        next_step=next_step.change if next_step else None,
        workers=workers,
        second=second,
        stalled=stalled,
        snapshots=agg.snapshots,
    )
