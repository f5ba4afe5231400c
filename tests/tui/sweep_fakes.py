"""A scripted in-flight sweep with a clear knee, as Ticks, broker samples and events.

Each phase holds steady figures (after a transition of a second or two), and every tick carries
the worker's snapshot of its second, so what the cockpit's per-setting table shows and
what the run's figures (``figures.run`` through ``engine.phase_figures.PhaseTable``, fed
the same snapshots) make of the same phases can be compared number for number.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis, encode, new_histogram, record
from flowdeck.engine.phase_figures import PhaseTable
from flowdeck.engine.progress import Percentiles, Tick
from flowdeck.engine.sinks import RunStarted
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec
from flowdeck.figures import RunFigures
from tests.tui.fakes import T0

#: Four publishers at 500 msg/s each.
TARGET = 2000.0
SETTINGS = Settings.of(inflight=5, prefetch=100, ack_every=1, rate=500.0, publishers=4, consumers=4)
SECONDS_PER_PHASE = 12
QUEUE_DEPTH = 120


@dataclass(frozen=True, slots=True)
class SweepPhase:
    """One phase's steady figures: msg/s, e2e ms, pending confirms."""

    label: str
    inflight: int
    publish: float
    consume: float
    p50: float
    p99: float
    pending: int
    paused: bool = False
    #: The rate limit per publisher (None: SETTINGS'; 0: no limit, as a capacity probe).
    rate: float | None = None


def knee_sweep() -> tuple[SweepPhase, ...]:
    """In-flight 5 and 20 hold publishers back; 50 reaches the target; 100 and 200 only
    add latency: the report recommends inflight=50."""
    return (
        SweepPhase("start", 5, 400.0, 400.0, 1.5, 4.0, 19),
        SweepPhase("inflight=20", 20, 1500.0, 1500.0, 2.0, 6.0, 76),
        SweepPhase("inflight=50", 50, 2000.0, 1999.0, 3.0, 9.0, 120),
        SweepPhase("inflight=100", 100, 2000.0, 2000.0, 6.0, 21.0, 240),
        SweepPhase("inflight=200", 200, 2000.0, 1998.0, 12.0, 48.0, 480),
    )


def _histogram(p50: float, p99: float) -> bytes:
    """A second's e2e histogram (encoded, as a worker sends it) whose p50 and p99 are these
    (ms, to HDR's precision): 98 samples at p50, 2 at p99."""
    histogram = new_histogram()
    for value, count in ((p50, 98), (p99, 2)):
        for _ in range(count):
            record(histogram, round(value * 1000))
    return encode(histogram)


def _percentiles(p50: float, p99: float) -> Percentiles:
    return Percentiles(
        count=2000, p50=p50, p75=p50 * 1.4, p95=p99 * 0.7, p99=p99, p999=p99 * 1.5, max=p99 * 2
    )


def sample_at(at: float, depth: int = QUEUE_DEPTH, *, mem_alarm: bool = False) -> BrokerSample:
    return BrokerSample(
        source="management",
        taken_at=at,
        figures_at=at - 1.0,
        statistics_interval=1.0,
        nodes=(
            NodeSample(
                name="rabbit@sweep",
                mem_used=900_000_000,
                mem_limit=3_276_000_000,
                mem_alarm=mem_alarm,
                disk_free=41_000_000_000,
                disk_free_limit=50_000_000,
            ),
        ),
        queues=(
            QueueSample(
                name="sweep-1", vhost="/", type="quorum", ready=depth, unacked=4, consumers=4
            ),
        ),
        connections=8,
        connections_blocked=4 if mem_alarm else 0,
        broker_version="3.13.7",
    )


Update = Tick | BrokerSample | RunEvent


def sweep_updates(
    phases: tuple[SweepPhase, ...] = (),
    *,
    stall_at: float | None = None,
    transition: int = 2,
) -> Iterator[Update]:
    """The run second by second: a PHASE event at each boundary, a tick a second (the first
    ``transition`` seconds of a phase at half its steady rate: a transition the report's
    msg/s counts and the table's settled figure leaves out),
    a broker sample every two seconds. ``stall_at``: publishers are blocked by a memory
    alarm for 2 s from that second and then catch up at three times the target for 1 s.

    Each tick carries the one worker's snapshot of its second (taken 0.1 s before it, as
    a live tick does), so the table computes the report's msg/s from them."""
    phases = phases or knee_sweep()
    elapsed = 0.0
    totals = Counters()
    for index, phase in enumerate(phases):
        rate = SETTINGS.rate if phase.rate is None else phase.rate
        settings = SETTINGS.changed(inflight=phase.inflight, paused=phase.paused, rate=rate)
        target = 0.0 if phase.paused else rate * SETTINGS.publishers
        if index:
            yield RunEvent(
                T0 + elapsed,
                EventKind.PHASE,
                f"phase {index}: {phase.label}",
                detail={"index": index, "label": phase.label},
            )
        for second in range(SECONDS_PER_PHASE):
            elapsed += 1
            share = 0.5 if second < transition else 1.0
            publish, consume = phase.publish * share, phase.consume * share
            blocked = 0
            if stall_at is not None and stall_at <= elapsed < stall_at + 2:
                publish = consume = 0.0
                blocked = 4
            elif stall_at is not None and elapsed == stall_at + 2:
                publish = consume = TARGET * 3
            totals = Counters(
                published=totals.published + int(publish),
                confirmed=totals.confirmed + int(publish),
                consumed=totals.consumed + int(consume),
            )
            latency = {
                (LatencyKind.END_TO_END, SendBasis.ACTUAL): _percentiles(phase.p50, phase.p99),
                (LatencyKind.END_TO_END, SendBasis.INTENDED): _percentiles(
                    phase.p50 * 2, phase.p99 * 2
                ),
            }
            snapshot = ClientSnapshot(
                worker=0,
                at=T0 + elapsed - 0.1,
                interval=1.0,
                counters=totals,
                pending_confirms=phase.pending,
                unacked=40,
                connections=8,
                blocked=blocked,
                settings=settings,
                target_rate=target,
                latency={
                    (LatencyKind.END_TO_END, SendBasis.ACTUAL): _histogram(phase.p50, phase.p99)
                },
            )
            yield Tick(
                at=T0 + elapsed,
                elapsed=elapsed,
                duration=600.0,
                target_rate=target,
                publish_rate=publish,
                confirm_rate=publish,
                consume_rate=consume,
                nack_rate=0.0,
                return_rate=0.0,
                totals=totals,
                pending_confirms=phase.pending,
                unacked=40,
                connections=8,
                blocked=blocked,
                settings=settings,
                latency=latency,
                phase=phase.label,
                phase_index=index,
                workers=1,
                snapshots=(snapshot,),
            )
            if second % 2 == 1:
                yield sample_at(T0 + elapsed, mem_alarm=blocked > 0)


def report_figures(updates: Iterable[Update]) -> RunFigures:
    """The run's figures (``figures.run``) from the same updates, as ``flowdeck run --json``
    computes them: ``PhaseTable`` fed the snapshots the ticks carry, the broker samples and
    the events."""
    table = PhaseTable()
    table.on_start(RunStarted(RunSpec(), T0, 1))
    for update in updates:
        if isinstance(update, Tick):
            for snapshot in update.snapshots:
                table.add_snapshot(snapshot)
        elif isinstance(update, RunEvent):
            table.add_event(update)
        else:
            table.add_poll(update)
    found = table.figures()
    assert found is not None
    return found


def mark_change(label: str) -> Change:
    return Change(Setting.MARK, label=label)
