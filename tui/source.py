"""What the cockpit needs of a run: the controller's public surface, as a Protocol.

The live dashboard drives an ``engine.controller.Controller``; tests drive a fake with
the same surface so Pilot tests are deterministic. Nothing here starts load itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from flowdeck.collectors import LocalNodes
from flowdeck.engine import (
    Change,
    Listener,
    NodeFault,
    PendingChange,
    RunSpec,
    RunSummary,
    Settings,
    Sink,
    Update,
)

#: The updates a screen takes (one home: engine.sinks, shared with every other sink).
RunUpdate = Update

__all__ = ["FaultControl", "Listener", "RunControl", "RunUpdate"]


class RunControl(Protocol):
    """A run the cockpit can watch and steer."""

    spec: RunSpec

    @property
    def settings(self) -> Settings: ...

    @property
    def requested_settings(self) -> Settings:
        """The settings asked for so far (pending changes included): what key steps and
        relative changes start from."""
        ...

    @property
    def pending(self) -> tuple[PendingChange, ...]: ...

    @property
    def session_dir(self) -> Path | None: ...

    def add_sink(self, sink: Sink) -> None:
        """Follow the run: ``sink`` takes its ticks, events, broker samples and summary."""
        ...

    async def start(self) -> None: ...

    def request(self, change: Change, source: str = "operator") -> int: ...

    def skip_step(self) -> None: ...

    @property
    def schedule_held(self) -> bool:
        """Whether an operator's change holds the schedule."""
        ...

    def resume_schedule(self) -> None: ...

    async def wait(self) -> RunSummary: ...

    async def stop(self, reason: str = "stopped by operator") -> RunSummary: ...


@runtime_checkable
class FaultControl(Protocol):
    """A run whose broker's nodes the cockpit may break: the local Controller (a run
    watched from another process through the control API is not one)."""

    @property
    def local_nodes(self) -> LocalNodes | None: ...

    def fault(self, fault: NodeFault, source: str = "operator") -> int: ...
