"""Node faults during a run: one node of the private node or cluster lost or brought back.

A schedule's ``fault kill 2`` and the cockpit's node key both end here. A fault needs a
broker flowdeck runs (``Broker.local``): on any other it is refused, a schedule's before
anything starts. The fault opens a phase named after it (a mark change through the run),
then acts on its node on a thread (a start takes seconds) and says when it is done; the run
waits for the faults still going before it closes its session, so their end is recorded.

A collaborator of the controller (see ``engine.run_context``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from flowdeck.collectors import FaultDone, LocalNodes, SourceError
from flowdeck.engine.change import NodeFault
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.events import EventKind

if TYPE_CHECKING:
    from flowdeck.engine.run_context import RunContext
    from flowdeck.engine.spec import ScheduleStep

__all__ = ["NodeFaults"]


class NodeFaults:
    """Faults on the nodes of the run's broker; see the module docstring.

    ``local``: the nodes faults act on; None (the default) takes the run's broker's
    (``Broker.local``), which a remote broker has not.
    """

    def __init__(self, local: LocalNodes | None = None) -> None:
        self._given = local
        self._run: RunContext | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def bind(self, run: RunContext) -> None:
        self._run = run

    @property
    def run(self) -> RunContext:
        if self._run is None:
            raise FlowdeckError("node faults are not bound to a run")
        return self._run

    @property
    def local(self) -> LocalNodes | None:
        """The private node or cluster faults act on (None: a broker flowdeck does not
        run, on which faults are refused)."""
        return self._given if self._given is not None else self.run.broker.local

    def check_schedule(self, steps: Sequence[ScheduleStep]) -> None:
        """Refuse a schedule whose faults the broker cannot take, before anything starts."""
        for step in steps:
            if step.fault is not None:
                try:
                    self.target(step.fault)
                except SpecError as exc:
                    raise SpecError(
                        "schedule", f"schedule step at {step.at:g} s: {exc.message}"
                    ) from None

    def target(self, fault: NodeFault) -> LocalNodes:
        """The nodes ``fault`` acts on, after checking it names one of them."""
        local = self.local
        if local is None:
            raise SpecError(
                "fault",
                f"{fault.describe()} needs a node or cluster flowdeck runs, and "
                f"{self.run.broker.redacted} is not one: start one (flowdeck broker start "
                "--nodes 3) and give its uri, or drop the fault",
            )
        try:
            local.find(fault.node)
        except SourceError as exc:
            raise SpecError("fault", f"{fault.describe()}: {exc}") from None
        return local

    def start(self, fault: NodeFault, source: str = "operator") -> int:
        """Open the fault's phase and start the fault on a thread; the phase mark's id."""
        local = self.target(fault)
        change_id = self.run.request(fault.mark(), source=source)
        nodename = local.find(fault.node).nodename
        self.run.report_event(
            EventKind.INFO,
            f"{fault.describe()} asked by {source}: {nodename}",
            change_id=change_id,
            detail=_detail(fault, source, nodename, stage="asked"),
        )
        task = asyncio.create_task(
            self._apply(local, fault, source, change_id), name="flowdeck-fault"
        )
        self._tasks.append(task)
        return change_id

    async def settle(self) -> None:
        """Wait for the faults still going (a node starting cannot be called back: it runs
        on a thread), saying so first."""
        going = [task for task in self._tasks if not task.done()]
        if going:
            self.run.report_event(
                EventKind.INFO, f"waiting for {len(going)} node fault(s) to finish"
            )
            await asyncio.gather(*going, return_exceptions=True)

    async def _apply(
        self, local: LocalNodes, fault: NodeFault, source: str, change_id: int
    ) -> None:
        nodename = local.find(fault.node).nodename
        try:
            done: FaultDone = await asyncio.to_thread(local.apply, fault.action, fault.node)
        except Exception as exc:  # a node that will not start never stops the run
            self.run.report_event(
                EventKind.ERROR,
                f"{fault.describe()} failed: {exc}",
                change_id=change_id,
                detail=_detail(fault, source, nodename, stage="failed"),
            )
            return
        self.run.report_event(
            EventKind.INFO,
            f"{fault.describe()} done: {done.message}",
            change_id=change_id,
            detail={
                **_detail(fault, source, nodename, stage="done"),
                "changed": done.changed,
                "took_s": round(done.took, 3),
            },
        )


def _detail(fault: NodeFault, source: str, nodename: str, *, stage: str) -> dict[str, Any]:
    """What a fault's events carry: the report's faults table pairs a node's ``kill`` or
    ``stop`` with its next ``start`` or ``restart`` by these."""
    return {
        "fault": fault.action,
        "node": fault.node,
        "nodename": nodename,
        "stage": stage,
        "source": source,
    }
