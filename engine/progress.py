"""What the controller tells its front-ends: a Tick each second and a RunSummary at the end.

The TUI dashboard and the headless progress lines read only these (and BrokerSample and
RunEvent), so both show the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from flowdeck.engine.change import Change
from flowdeck.engine.latency_kinds import LatencyKind, SendBasis
from flowdeck.engine.snapshot import ActiveTimes, ClientSnapshot, Counters, Settings
from flowdeck.figures.latency import Percentiles

if TYPE_CHECKING:
    from flowdeck.engine.queue_counts import QueueCounts

#: What every "msg/s" of a run's summary means; said wherever one is shown or written.
RATE_MEANING = (
    "mean msg/s = messages / the clients' own active time: published / first to last send, "
    "confirmed / first send to last confirm, consumed / first to last delivery"
)


def mean_rate(count: int, seconds: float) -> float:
    """``count`` messages over ``seconds`` of activity; 0 when there was no span (nothing,
    or everything in one burst)."""
    return count / seconds if seconds > 0 else 0.0


@dataclass(frozen=True, slots=True)
class PendingChange:
    """A change asked for and not yet in force in every worker."""

    change_id: int
    change: Change
    requested_at: float
    source: str  # "operator", "schedule", "api"
    workers_done: int
    workers_total: int


@dataclass(frozen=True, slots=True)
class Tick:
    """The run, aggregated over all workers, once a second.

    Rates are msg/s over the last interval; ``latency`` maps (kind, basis) to percentiles
    over the last interval (absent when nothing was measured). ``settings`` are the values
    in force (the last applied); ``pending`` the changes on their way.
    """

    at: float
    elapsed: float
    duration: float
    target_rate: float
    publish_rate: float
    confirm_rate: float
    consume_rate: float
    nack_rate: float
    return_rate: float
    totals: Counters
    pending_confirms: int
    unacked: int
    connections: int
    blocked: int
    settings: Settings
    pending: tuple[PendingChange, ...] = ()
    latency: Mapping[tuple[LatencyKind, SendBasis], Percentiles] = field(default_factory=dict)
    phase: str = ""
    phase_index: int = 0
    next_step_at: float | None = None  # elapsed seconds of the next schedule step
    next_step: Change | None = None
    workers: int = 0
    #: The run second this tick closes (1, 2, ...): what a progress line is named by. 0 for
    #: the closing tick and for ticks read back from a recording.
    second: int = 0
    #: Seconds the controller had stalled (its process stopped, its loop held) when it made
    #: this tick late; its figures come from the workers' snapshots of that second. 0: live.
    stalled: float = 0.0
    #: The workers' snapshots this tick took in (taken by its time, in time order): what a
    #: front-end needs to compute a phase's msg/s as the report does
    #: (``engine.phase_figures.PhaseTable``). Not sent over the control API (an attached
    #: cockpit gets ticks without them).
    snapshots: tuple[ClientSnapshot, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class DataSafety:
    """End-of-run accounting of every message, merged across all workers.

    ``lost`` = confirmed by the broker but never consumed, dead-lettered or rejected for
    good; ``unconfirmed`` = published but
    neither confirmed nor nacked when the run ended (e.g. in flight when a node died).
    Without publisher confirms (``confirms`` false) the broker vouches for nothing: loss
    cannot be assessed and ``unconfirmed`` is 0, as no confirm was awaited. ``complete`` is
    false when a worker's report never came (``RunSummary.incomplete`` says which figures
    miss what, and ``lost`` is then at most what the broker's counters allow).
    """

    published: int
    confirmed: int
    nacked: int
    returned: int
    consumed: int
    redelivered: int
    duplicates: int
    unconfirmed: int
    lost: int
    confirms: bool = True
    complete: bool = True
    #: Deliveries the consumers rejected, of them requeued; messages the broker
    #: dead-lettered into the run's dead-letter queue (flowdeck took them off it); and
    #: messages rejected for good that reached no dead-letter queue flowdeck read (the
    #: broker dropped them). Neither of the last two counts as lost.
    rejected: int = 0
    requeued: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    #: Stream messages read again (another consumer, or a re-read from an offset): a
    #: stream keeps its messages, so these are replays, not duplicates (format 1.9).
    replayed: int = 0

    def to_json(self) -> dict[str, int | bool]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The end of a run: what ran, how it ended, what it achieved, what was lost."""

    name: str
    started: float
    ended: float
    outcome: str
    stop_reason: str
    safety: DataSafety
    #: Mean msg/s, each over its own active time (see RATE_MEANING and ``active``).
    publish_rate: float
    confirm_rate: float
    consume_rate: float
    latency: Mapping[tuple[LatencyKind, SendBasis], Percentiles] = field(default_factory=dict)
    phases: int = 1
    session_dir: str | None = None
    recording_error: str = ""
    errors: tuple[str, ...] = ()
    #: When the workers really sent, got confirms and consumed: the rates' denominators.
    active: ActiveTimes = field(default_factory=ActiveTimes)
    #: The spec's target publish rate at the start, msg/s (0 = no rate limit).
    target_rate: float = 0.0
    #: Which figures are incomplete and why, one line each (empty: every worker reported).
    incomplete: tuple[str, ...] = ()
    #: The broker's counts over the run's queues, read when the figures are incomplete.
    broker_queues: QueueCounts | None = None
    #: Where the messages went when the consumers took far fewer than were published and
    #: the rest did not wait in the run's queues ('' when delivered; engine.delivery).
    undelivered: str = ""

    @property
    def duration(self) -> float:
        return self.ended - self.started

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "started": self.started,
            "ended": self.ended,
            "duration_s": round(self.duration, 3),
            "outcome": self.outcome,
            "stop_reason": self.stop_reason,
            "safety": self.safety.to_json(),
            "target_rate": self.target_rate,
            "publish_rate": self.publish_rate,
            "confirm_rate": self.confirm_rate,
            "consume_rate": self.consume_rate,
            "publish_seconds": round(self.active.publish_seconds, 6),
            "confirm_seconds": round(self.active.confirm_seconds, 6),
            "consume_seconds": round(self.active.consume_seconds, 6),
            "rate_meaning": RATE_MEANING,
            # The spans' ends (unix seconds): the report splits them over the phases.
            "active": asdict(self.active),
            "latency_ms": {
                f"{kind.value}_{basis.value}": asdict(p)
                for (kind, basis), p in self.latency.items()
            },
            "phases": self.phases,
            "session_dir": self.session_dir,
            "recording_error": self.recording_error,
            "errors": list(self.errors),
            "incomplete": list(self.incomplete),
            "broker_queues": self.broker_queues.to_json() if self.broker_queues else None,
            "undelivered": self.undelivered,
        }
