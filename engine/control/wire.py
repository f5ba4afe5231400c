"""The control API's wire format, described once: what every request and answer holds.

Each body is a msgspec type here. The server decodes what it is sent with them (a bad
body is refused with msgspec's one-line reason), builds its answers and stream updates
as them, the remote cockpit reads them back through them, and the OpenAPI document
(``openapi.py``) takes its schemas from them: a field added here is validated, sent,
read and described at once, and cannot drift between the four.

Changes travel as the operator's own words (``inflight=200``), read back with the parser
the cockpit's prompt uses. Latency percentiles are keyed ``<kind>_<basis>``
(``e2e_actual``), as the JSON summary of ``flowdeck run`` has them. The engine's own
dataclasses (Settings, Counters, Percentiles, DataSafety, ActiveTimes, BrokerSample) are
used as they are; a newer peer's extra fields are ignored when read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.change import Change, parse_change
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.progress import DataSafety, PendingChange, RunSummary, Tick
from flowdeck.engine.settings import STEERABLE
from flowdeck.engine.snapshot import ActiveTimes, Counters, Settings
from flowdeck.figures.latency import Percentiles

#: Longest change text the API takes (a mark's label included).
MAX_CHANGE_LENGTH = 500
#: Most changes one POST /changes takes.
MAX_CHANGES = 1000
#: Longest a POST /changes may wait for its changes to be in force, in seconds.
MAX_WAIT_SECONDS = 30.0
DEFAULT_WAIT_SECONDS = 10.0

ChangeText = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_CHANGE_LENGTH,
        pattern=r"\S",
        description="a change as typed at the cockpit's = prompt: inflight=200, pause, ...",
    ),
]
WaitSeconds = Annotated[
    float,
    Meta(
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=f"seconds to wait for the changes to be in force (default "
        f"{DEFAULT_WAIT_SECONDS:g}); 0 answers at once",
    ),
]
ChangeId = Annotated[int, Meta(ge=1, description="a change's id in the run's event log")]
RunState = Literal["starting", "running", "stopping", "ended"]

#: Latency keys as JSON names them, and back.
LATENCY_NAMES: dict[tuple[LatencyKind, SendBasis], str] = {
    (kind, basis): f"{kind.value}_{basis.value}" for kind in LatencyKind for basis in SendBasis
}
_LATENCY_KEYS = {name: key for key, name in LATENCY_NAMES.items()}


#: The settings as the wire carries them: one field per registry row (its RunSpec field,
#: e.g. ``inflight``), and ``paused``; made from the registry, so an added row is sent,
#: read back and described with the rest. A field a peer lacks takes the row's default.
_SETTINGS_WIRE = msgspec.defstruct(
    "Settings",
    [(row.field, row.kind, row.convert(row.default)) for row in STEERABLE]
    + [("paused", bool, False)],
    kw_only=True,
)
if TYPE_CHECKING:
    SettingsWire = Any
else:
    SettingsWire = _SETTINGS_WIRE


def settings_wire(settings: Settings) -> Any:
    """Settings as the wire carries them (flat: ``{"inflight": 200, ..., "paused": false}``)."""
    return _SETTINGS_WIRE(**settings.values, paused=settings.paused)


def settings_from_wire(wire: Any) -> Settings:
    return Settings({row.field: getattr(wire, row.field) for row in STEERABLE}, paused=wire.paused)


# -- requests ---------------------------------------------------------------------------------


class ChangeRequest(Struct, forbid_unknown_fields=True):
    """POST /changes: one change, or several at once (all checked before the first is
    asked); exactly one of the two."""

    change: ChangeText | UnsetType = UNSET
    changes: Annotated[list[ChangeText], Meta(min_length=1, max_length=MAX_CHANGES)] | UnsetType = (
        UNSET
    )

    def __post_init__(self) -> None:
        if (self.change is UNSET) == (self.changes is UNSET):
            raise ValueError(
                'the body needs a change, e.g. {"change": "inflight=200"}, or a list of them, '
                'e.g. {"changes": ["inflight=200", "prefetch=50"]}'
            )

    @property
    def texts(self) -> list[str]:
        return [self.change] if isinstance(self.change, str) else list(self.changes or ())


class AutotuneRequest(Struct, forbid_unknown_fields=True):
    """POST /autotune: start the autopilot on the running run (as the cockpit's ``o`` and
    ``flowdeck run --autotune`` do), from where the run is now."""

    setting: Annotated[
        str,
        Meta(
            max_length=40,
            description="inflight, prefetch or ack_every (the best value), or rate (the "
            "highest rate this broker sustains for the spec)",
        ),
    ]
    max_p99_ms: Annotated[float, Meta(gt=0, description="stop at a step above this p99")] | None = (
        None
    )
    max_backlog: Annotated[int, Meta(ge=0, description="stop when more are ready")] | None = None
    hold_s: Annotated[float, Meta(gt=0, le=3600, description="least hold of a step")] | None = None
    then: Annotated[
        Literal["stay", "stop"],
        Meta(description="when done: stay at the choice, or stop the run there"),
    ] = "stay"


# -- answers ----------------------------------------------------------------------------------


class AutotuneState(Struct, omit_defaults=True):
    """The autopilot of this run: what it searches, where it is, what it said last and,
    once done, its choice and the report's reasoning behind it."""

    setting: str
    state: Literal["armed", "waiting", "searching", "confirming", "done", "stopped"]
    active: bool
    steps: int
    said: list[str] = []
    chosen: float | None = None
    reasoning: list[str] = []


class Error(Struct):
    """Every refusal: why, in one line."""

    error: str


class ChangeState(Struct, omit_defaults=True):
    """A change as the run took it, and whether it is in force in every worker yet."""

    id: int
    change: str
    in_force: bool
    in_force_after_ms: int | UnsetType = UNSET
    message: str | UnsetType = UNSET
    workers_done: int | UnsetType = UNSET
    workers_total: int | UnsetType = UNSET


class ChangeBatch(Struct):
    """The answer to several changes asked at once, one state each, in the asked order."""

    changes: list[ChangeState]


class State(Struct):
    state: RunState


class Pending(Struct):
    """A change asked for and not yet in force in every worker."""

    id: int
    change: str
    requested_at: float
    source: str
    workers_done: int
    workers_total: int


class SettingsPair(Struct):
    in_force: SettingsWire
    requested: SettingsWire


class Phase(Struct):
    index: int
    label: str


class NextStep(Struct):
    at: float
    change: str


class Schedule(Struct):
    steps: int
    held: bool
    next: NextStep | None


class TickWire(Struct):
    """A Tick, once a second: rates in msg/s, latency percentiles in ms."""

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
    settings: SettingsWire
    pending: list[Pending] = []
    latency_ms: dict[str, Percentiles] = {}
    phase: str = ""
    phase_index: int = 0
    next_step_at: float | None = None
    next_step: str | None = None
    workers: int = 0


class SummaryWire(Struct):
    """The run's end, as ``RunSummary.to_json`` (and ``flowdeck run --json``) writes it."""

    name: str
    started: float
    ended: float
    outcome: str
    stop_reason: str
    safety: DataSafety
    publish_rate: float
    confirm_rate: float
    consume_rate: float
    duration_s: float = 0.0
    target_rate: float = 0.0
    publish_seconds: float = 0.0
    confirm_seconds: float = 0.0
    consume_seconds: float = 0.0
    rate_meaning: str = ""
    active: ActiveTimes = ActiveTimes()
    latency_ms: dict[str, Percentiles] = {}
    phases: int = 1
    session_dir: str | None = None
    recording_error: str = ""
    errors: list[str] = []


class Status(Struct):
    """GET /status, and the first update of a stream: the run now."""

    run_id: str
    name: str
    state: RunState
    started_at: float | None
    session_dir: str | None
    spec: Annotated[dict[str, Any], Meta(description="the run's spec, passwords masked")]
    settings: SettingsPair
    pending: list[Pending]
    phase: Phase
    schedule: Schedule
    tick: TickWire | None = None
    broker: BrokerSample | None = None
    summary: SummaryWire | None = None


#: Every body type, named in the OpenAPI document's components.
SCHEMAS: tuple[Any, ...] = (
    Error,
    ChangeRequest,
    ChangeState,
    ChangeBatch,
    State,
    Status,
    AutotuneRequest,
    AutotuneState,
)

_ENCODER = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """A wire value (or plain JSON data) as JSON bytes."""
    return _ENCODER.encode(value)


def decode_autotune_request(body: bytes) -> AutotuneRequest:
    """A POST /autotune body (msgspec's one-line error when it is not one)."""
    return msgspec.json.decode(body, type=AutotuneRequest)


def decode_change_request(body: bytes) -> ChangeRequest:
    """A POST /changes body; msgspec.ValidationError or DecodeError, in one line, when it
    is not one."""
    return msgspec.json.decode(body, type=ChangeRequest)


# -- the engine's values on the wire and back -------------------------------------------------


def change_from_json(text: str) -> Change:
    """A change as its words travel (``Change.describe``), read back."""
    return parse_change(text)


def latency_to_json(
    latency: Mapping[tuple[LatencyKind, SendBasis], Percentiles],
) -> dict[str, Percentiles]:
    return {LATENCY_NAMES[key]: p for key, p in latency.items()}


def latency_from_json(
    raw: Mapping[str, Percentiles],
) -> dict[tuple[LatencyKind, SendBasis], Percentiles]:
    return {_LATENCY_KEYS[name]: p for name, p in raw.items() if name in _LATENCY_KEYS}


def pending_wire(pending: PendingChange) -> Pending:
    return Pending(
        pending.change_id,
        pending.change.describe(),
        pending.requested_at,
        pending.source,
        pending.workers_done,
        pending.workers_total,
    )


def pending_from_wire(wire: Pending) -> PendingChange:
    return PendingChange(
        change_id=wire.id,
        change=change_from_json(wire.change),
        requested_at=wire.requested_at,
        source=wire.source,
        workers_done=wire.workers_done,
        workers_total=wire.workers_total,
    )


_TICK_FIELDS = tuple(
    name
    for name in TickWire.__struct_fields__
    if name not in ("pending", "latency_ms", "next_step", "settings")
)


def tick_wire(tick: Tick) -> TickWire:
    return TickWire(
        **{name: getattr(tick, name) for name in _TICK_FIELDS},
        settings=settings_wire(tick.settings),
        pending=[pending_wire(p) for p in tick.pending],
        latency_ms=latency_to_json(tick.latency),
        next_step=tick.next_step.describe() if tick.next_step is not None else None,
    )


def tick_from_json(raw: Any) -> Tick:
    wire = msgspec.convert(raw, TickWire)
    return Tick(
        **{name: getattr(wire, name) for name in _TICK_FIELDS},
        settings=settings_from_wire(wire.settings),
        pending=tuple(pending_from_wire(p) for p in wire.pending),
        latency=latency_from_json(wire.latency_ms),
        next_step=change_from_json(wire.next_step) if wire.next_step else None,
    )


def summary_wire(summary: RunSummary) -> SummaryWire:
    """The summary as it crosses the wire: ``RunSummary.to_json``, checked against the
    description on the way out (a field the description lacks is an error here, not a
    surprise in a client)."""
    return msgspec.convert(summary.to_json(), SummaryWire)


def summary_from_json(raw: Any) -> RunSummary:
    """A summary as ``RunSummary.to_json`` wrote it, read back."""
    wire = msgspec.convert(raw, SummaryWire)
    return RunSummary(
        name=wire.name,
        started=wire.started,
        ended=wire.ended,
        outcome=wire.outcome,
        stop_reason=wire.stop_reason,
        safety=wire.safety,
        publish_rate=wire.publish_rate,
        confirm_rate=wire.confirm_rate,
        consume_rate=wire.consume_rate,
        latency=latency_from_json(wire.latency_ms),
        phases=wire.phases,
        session_dir=wire.session_dir,
        recording_error=wire.recording_error,
        errors=tuple(wire.errors),
        active=wire.active,
        target_rate=wire.target_rate,
    )


def broker_sample_from_json(raw: Any) -> BrokerSample:
    return msgspec.convert(raw, BrokerSample)


def status_from_json(raw: Any) -> Status:
    """GET /status's answer read back (the remote cockpit)."""
    return msgspec.convert(raw, Status)
