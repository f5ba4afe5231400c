"""RunEvent: what happened during a run, for the event log, the screen and the recording."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    RUN_STARTED = "run_started"
    RUN_STOPPED = "run_stopped"
    DRAIN = "drain"  # publishing stopped at the run's end; consumers take what is left
    CHANGE_REQUESTED = "change_requested"
    CHANGE_APPLIED = "change_applied"  # in effect in every worker
    PHASE = "phase"  # a phase starts: at run start, at each applied change, at each mark
    ALARM_RAISED = "alarm_raised"
    ALARM_CLEARED = "alarm_cleared"
    BLOCKED = "blocked"
    UNBLOCKED = "unblocked"
    OUTAGE_STARTED = "outage_started"
    OUTAGE_ENDED = "outage_ended"
    SOURCE_STALE = "source_stale"  # a broker-side source stopped answering well
    SOURCE_RECOVERED = "source_recovered"
    #: Recording is off or stopped (unwritable, full or vanished sessions directory); the run
    #: goes on, and what was written before stays readable.
    RECORDING_STOPPED = "recording_stopped"
    #: The controller's loop woke seconds late (its process stopped, its loop held): it saw
    #: nothing live meanwhile; ``detail['stalled_s']`` is how long.
    CONTROLLER_STALLED = "controller_stalled"
    ERROR = "error"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One event. ``at`` is unix seconds; ``change_id`` links a change's requested, applied
    and phase events; ``detail`` holds plain JSON-able values (setting, value, source...).
    """

    at: float
    kind: EventKind
    message: str
    change_id: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "kind": self.kind.value,
            "message": self.message,
            "change_id": self.change_id,
            "detail": dict(self.detail),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RunEvent:
        return cls(
            at=float(raw["at"]),
            kind=EventKind(raw["kind"]),
            message=str(raw["message"]),
            change_id=raw.get("change_id"),
            detail=dict(raw.get("detail") or {}),
        )
