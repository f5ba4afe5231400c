"""What a collaborator of the controller may ask of the run it serves.

The controller coordinates one run: workers, changes, schedule, ticks, the end. What acts
beside the run is handed to it as a **collaborator**: a small class in a module of its own
under ``engine/`` (``node_faults.NodeFaults``, ``capacity.CapacityCheck``,
``run_recording.RunRecording``), made by whoever builds the controller (``flowdeck run``,
the cockpit's launcher, a test) with its own settings, and defaulted by the controller when
the builder does not care. The controller binds each one to the run once, through the
narrow :class:`RunContext` face below, and calls it at the moments it owns (before the
start, on a change, at the end). A collaborator never sees the controller itself, so it
tests with a fake context and the controller does not grow with it.

A new collaborator (say, knobs on a broker flowdeck runs) follows the same pattern: a class
with ``bind(run)``, a keyword argument of the controller defaulting to a ready-made
instance, and the controller's call at the moment it owns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from flowdeck.collectors import Broker
    from flowdeck.engine.change import Change
    from flowdeck.engine.events import EventKind, RunEvent


class RunContext(Protocol):
    """The run as its collaborators see it (the controller is one)."""

    @property
    def broker(self) -> Broker:
        """Where the run goes: its nodes, management API, and the private nodes if any."""
        ...

    @property
    def under_way(self) -> bool:
        """Starting or running: not yet stopping or ended."""
        ...

    def report_event(
        self,
        kind: EventKind,
        message: str,
        *,
        at: float | None = None,
        change_id: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> RunEvent:
        """Log an event of the run: recorded and shown like the run's own."""
        ...

    def request(self, change: Change, source: str = "operator") -> int:
        """Send a change (a phase mark included) to every worker; its id."""
        ...


class Collaborator(Protocol):
    """A part the controller is given; bound once to the run it serves."""

    def bind(self, run: RunContext) -> None: ...
