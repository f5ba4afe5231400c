"""ClientSnapshot: what one worker reports once a second, and the end-of-run report.

Counters are cumulative since the worker started (a lost or late snapshot loses no
counts; rates are differences of consecutive snapshots). Latency histograms cover only
the interval since the worker's previous snapshot, HDR-encoded (see ``engine.latency``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from flowdeck.engine.latency_kinds import LatencyKind, SendBasis
from flowdeck.engine.settings import BY_FIELD, BY_SETTING, STEERABLE, Setting


@dataclass(frozen=True, slots=True)
class Counters:
    """Cumulative message counts of one worker (or of all workers, summed)."""

    published: int = 0
    confirmed: int = 0
    nacked: int = 0
    returned: int = 0
    consumed: int = 0
    acked: int = 0
    redelivered: int = 0
    duplicates: int = 0
    #: Deliveries the consumers rejected (basic.nack), of them sent back to the queue, and
    #: messages flowdeck took off the run's dead-letter queue.
    rejected: int = 0
    requeued: int = 0
    dead_lettered: int = 0

    def __add__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, n) + getattr(other, n) for n in self.__dataclass_fields__))

    def __sub__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, n) - getattr(other, n) for n in self.__dataclass_fields__))


def _defaults() -> dict[str, int | float]:
    return {row.field: row.convert(row.default) for row in STEERABLE}


@dataclass(frozen=True, slots=True)
class Settings:
    """The steerable settings as a worker has them in force right now: one value per
    ``engine.settings.STEERABLE`` row (by its field; a row not given has its default), plus
    what pause/resume set. The engine's own rows read as attributes (``settings.prefetch``);
    every row, added ones too, as ``settings.value(setting)``."""

    values: Mapping[str, int | float] = field(default_factory=_defaults)
    paused: bool = False
    #: How long a small read is held so the next brings more (fewer wake-ups); the engine
    #: switches it on only under load. 0 = off.
    read_hold_ms: float = 0.0

    def __post_init__(self) -> None:
        unknown = set(self.values) - BY_FIELD.keys()
        if unknown:
            raise ValueError(f"no such setting: {', '.join(sorted(unknown))}")
        if len(self.values) < len(BY_FIELD) or any(
            type(self.values[name]) is not row.kind for name, row in BY_FIELD.items()
        ):
            given = {**_defaults(), **self.values}
            object.__setattr__(
                self, "values", {name: row.convert(given[name]) for name, row in BY_FIELD.items()}
            )

    @classmethod
    def of(cls, *, paused: bool = False, read_hold_ms: float = 0.0, **values: float) -> Settings:
        """Settings with the values given by field (``Settings.of(inflight=100)``)."""
        return cls(values, paused, read_hold_ms)

    def __hash__(self) -> int:
        return hash((tuple(self.values.items()), self.paused, self.read_hold_ms))

    def value(self, setting: Setting | str) -> int | float:
        """The value of a numeric setting (a :class:`Setting` or its field)."""
        return self.values[setting if isinstance(setting, str) else BY_SETTING[setting].field]

    def with_value(self, setting: Setting, value: float) -> Settings:
        """These settings with one numeric setting changed."""
        row = BY_SETTING[setting]
        return Settings(
            {**self.values, row.field: row.convert(value)}, self.paused, self.read_hold_ms
        )

    def changed(
        self, *, paused: bool | None = None, read_hold_ms: float | None = None, **values: float
    ) -> Settings:
        """These settings with the values given by field (``changed(inflight=100)``) and
        ``paused`` or ``read_hold_ms`` when given."""
        return Settings(
            {**self.values, **values} if values else self.values,
            self.paused if paused is None else paused,
            self.read_hold_ms if read_hold_ms is None else read_hold_ms,
        )

    @property
    def inflight(self) -> int:
        return int(self.values["inflight"])

    @property
    def prefetch(self) -> int:
        return int(self.values["prefetch"])

    @property
    def ack_every(self) -> int:
        return int(self.values["ack_every"])

    @property
    def rate(self) -> float:
        return float(self.values["rate"])

    @property
    def publishers(self) -> int:
        return int(self.values["publishers"])

    @property
    def consumers(self) -> int:
        return int(self.values["consumers"])


def setting_value(settings: Settings, setting: Setting) -> float:
    """The value of a numeric setting in ``settings``."""
    return float(settings.value(setting))


@dataclass(frozen=True, slots=True)
class ClientSnapshot:
    """One worker's state at ``at`` (unix seconds); counters cumulative, latency per interval.

    ``interval`` is the seconds since this worker's previous snapshot. ``target_rate`` is the
    sum of the worker's publishers' target rates (0 = as fast as possible). ``blocked`` counts
    this worker's connections the broker has blocked (connection.blocked) right now;
    ``blocked_reasons`` carries the broker's reasons (e.g. ``low on memory``).
    """

    worker: int
    at: float
    interval: float
    counters: Counters
    pending_confirms: int
    unacked: int
    connections: int
    blocked: int
    settings: Settings
    target_rate: float
    latency: Mapping[tuple[LatencyKind, SendBasis], bytes] = field(default_factory=dict)
    #: End-to-end latency from the actual send per queue consumed from, this interval
    #: (HDR-encoded; a queue with no delivery in the interval is absent).
    queue_latency: Mapping[str, bytes] = field(default_factory=dict)
    blocked_reasons: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    #: CPU seconds (user + system) the worker's process had used when the snapshot left it,
    #: stamped by what carries it out of that process (``engine.process``'s pipe, the remote
    #: link's ``frame``): the per-host rows' live CPU is the difference of two. None: not
    #: known (a worker in the controller's own process, a snapshot read from a session).
    cpu_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class SequenceRanges:
    """Sequence numbers of one publisher as sorted, non-overlapping ``[start, end)`` ranges.

    Compact for the usual case (confirms and deliveries mostly in order), exact always.
    """

    publisher: int
    ranges: tuple[tuple[int, int], ...]

    def count(self) -> int:
        return sum(end - start for start, end in self.ranges)


@dataclass(frozen=True, slots=True)
class ActiveTimes:
    """When clients really published, got confirms and consumed, by the workers' own
    clocks (unix seconds; None: it never happened).

    The run's mean rates divide by these spans, not by the planned duration: a stop that
    reaches a worker late makes it publish longer, and a mean over the planned seconds would
    then read above the target.
    """

    first_publish: float | None = None
    last_publish: float | None = None
    last_confirm: float | None = None
    first_consume: float | None = None
    last_consume: float | None = None

    @property
    def publish_seconds(self) -> float:
        """First send to last send."""
        return _span(self.first_publish, self.last_publish)

    @property
    def confirm_seconds(self) -> float:
        """First send to last confirm."""
        return _span(self.first_publish, self.last_confirm)

    @property
    def consume_seconds(self) -> float:
        """First delivery to last delivery."""
        return _span(self.first_consume, self.last_consume)

    def __or__(self, other: ActiveTimes) -> ActiveTimes:
        """Both workers' times together: the earliest first, the latest last."""
        return ActiveTimes(
            first_publish=_first(self.first_publish, other.first_publish),
            last_publish=_last(self.last_publish, other.last_publish),
            last_confirm=_last(self.last_confirm, other.last_confirm),
            first_consume=_first(self.first_consume, other.first_consume),
            last_consume=_last(self.last_consume, other.last_consume),
        )


def _span(first: float | None, last: float | None) -> float:
    return max(0.0, last - first) if first is not None and last is not None else 0.0


def _first(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _last(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def at_ns(ns: int) -> float | None:
    """Unix seconds of a nanosecond stamp; None for 0 (never happened)."""
    return ns / 1e9 if ns else None


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What a worker knows at the end of a run, for the data-safety accounting.

    ``confirmed`` and ``nacked`` hold, per publisher this worker ran, the sequences the broker
    confirmed or nacked; ``consumed`` holds, per publisher id seen by this worker's consumers,
    the distinct sequences consumed. The controller merges all workers' reports: confirmed
    minus consumed across every worker is what was lost.
    """

    worker: int
    counters: Counters
    confirmed: tuple[SequenceRanges, ...] = ()
    nacked: tuple[SequenceRanges, ...] = ()
    published_unconfirmed: int = 0
    consumed: tuple[SequenceRanges, ...] = ()
    errors: tuple[str, ...] = ()
    active: ActiveTimes = field(default_factory=ActiveTimes)
    #: Per publisher, the sequences this worker's consumers rejected for good (without
    #: requeue, or poison under a delivery limit) and those it took off the run's
    #: dead-letter queue.
    discarded: tuple[SequenceRanges, ...] = ()
    dead_lettered: tuple[SequenceRanges, ...] = ()
    #: Stream messages this worker's consumers read again (another reader, or a re-read
    #: from an offset): a stream keeps its messages, so these are not duplicates.
    replayed: int = 0
