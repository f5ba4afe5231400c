"""The run's change ledger: changes asked for, in force, and the phases they open; and
the schedule's steps still to come.

Pure bookkeeping with no broker, no clock and no loop: the controller tells it what was
asked and what each worker reported, and it says when a change is in force everywhere,
what the workers really opened, and which phase that starts. Tests drive it directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from flowdeck.engine.change import Change, Setting
from flowdeck.engine.progress import PendingChange
from flowdeck.engine.spec import ScheduleStep


@dataclass
class Pending:
    """A change sent to the workers and not yet in force in all of them."""

    change: Change
    requested_at: float
    source: str
    waiting_for: set[int]
    applied: dict[int, float] = field(default_factory=dict)
    #: Per worker, the publishers and consumers it had connected once it applied the change.
    clients: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)

    def opened_clients(self) -> int | None:
        """For a publishers/consumers change, the clients the workers have open once it
        applied (None when not such a change or a worker did not say)."""
        if self.change.setting not in (Setting.PUBLISHERS, Setting.CONSUMERS):
            return None
        role = 0 if self.change.setting is Setting.PUBLISHERS else 1
        counts = [clients[role] for clients in self.clients.values()]
        if not counts or any(count is None for count in counts):
            return None
        return sum(count for count in counts if count is not None)


class ChangeLedger:
    """Pending changes by id, and the run's current phase (0, "start" until a change)."""

    def __init__(self) -> None:
        self.pending: dict[int, Pending] = {}
        self.phase = "start"
        self.phase_index = 0
        self._next_id = 1

    def open(self, change: Change, source: str, at: float, workers: set[int]) -> int:
        """Record a change sent to ``workers`` at ``at``; its id (1, 2, ...)."""
        change_id = self._next_id
        self._next_id += 1
        self.pending[change_id] = Pending(change, at, source, set(workers))
        return change_id

    def worker_applied(
        self,
        change_id: int,
        worker: int,
        at: float,
        publishers: int | None = None,
        consumers: int | None = None,
    ) -> None:
        """A worker said the change is in force (an unknown id is ignored)."""
        pending = self.pending.get(change_id)
        if pending is not None:
            pending.applied[worker] = at
            pending.clients[worker] = (publishers, consumers)

    def complete(self, change_id: int, alive: set[int]) -> Pending | None:
        """The change, taken off the ledger, once every worker still alive that it was
        sent to has applied it; None while some have not (or for an unknown id)."""
        pending = self.pending.get(change_id)
        if pending is None or not (pending.waiting_for & alive) <= set(pending.applied):
            return None
        del self.pending[change_id]
        return pending

    def drop(self, change_id: int) -> None:
        """Forget a change that did not take effect (a broker change the nodes refused)."""
        self.pending.pop(change_id, None)

    def waiting_on(self, setting: Setting) -> bool:
        """Whether a change of ``setting`` is still on its way."""
        return any(p.change.setting is setting for p in self.pending.values())

    def next_phase(self, change: Change) -> tuple[int, str]:
        """Start the phase a change in force opens: its index and label (a mark's label,
        or the change itself)."""
        self.phase_index += 1
        self.phase = (
            change.label if change.setting is Setting.MARK and change.label else change.describe()
        )
        return self.phase_index, self.phase

    def view(self, hosts: int) -> tuple[PendingChange, ...]:
        """The pending changes as front-ends show them, oldest first."""
        return tuple(
            PendingChange(
                change_id=cid,
                change=p.change,
                requested_at=p.requested_at,
                source=p.source,
                workers_done=len(p.applied),
                workers_total=len(p.waiting_for) if p.waiting_for else max(1, hosts),
            )
            for cid, p in sorted(self.pending.items())
        )


class Schedule:
    """The schedule's steps still to come, on the run's clock (seconds since it started).

    The operator comes first: a change of theirs **holds** the schedule, so no step
    overwrites what they just set (a step at 90 s once turned the operator's in-flight 4
    into 40, and a mark of theirs was gone a second after it opened its phase). Held, no
    step fires; resumed, the steps left keep their spacing from the moment of the resume
    (each moves back by the time the schedule was held).
    """

    def __init__(self, steps: Iterable[ScheduleStep]) -> None:
        self._steps = sorted(steps, key=lambda step: step.at)
        #: Seconds the steps left moved back, by every hold so far.
        self.shift = 0.0
        #: When the hold began (seconds since the start); None while the schedule runs.
        self.held_since: float | None = None

    def __bool__(self) -> bool:
        return bool(self._steps)

    @property
    def held(self) -> bool:
        return self.held_since is not None

    def next_step(self) -> ScheduleStep | None:
        """The next step at the time it will fire; None when none is left or it is held
        (a held schedule has no time to count down to)."""
        if not self._steps or self.held:
            return None
        step = self._steps[0]
        return replace(step, at=step.at + self.shift)

    def waiting_step(self) -> ScheduleStep | None:
        """The next step, held or not, at the time the spec gives it."""
        return self._steps[0] if self._steps else None

    def due(self, elapsed: float) -> list[ScheduleStep]:
        """Take the steps whose time has come at ``elapsed``; none while held."""
        fired: list[ScheduleStep] = []
        while (step := self.next_step()) is not None and step.at <= elapsed:
            fired.append(self._steps.pop(0))
        return fired

    def take_next(self) -> ScheduleStep | None:
        """Take the next step now (``n`` in the cockpit), held or not; the hold ends:
        asking for the schedule's next step is going on with it."""
        if not self._steps:
            return None
        return self._steps.pop(0)

    def hold(self, elapsed: float) -> bool:
        """Hold the steps left from ``elapsed`` on; False (nothing done) when none is left
        or it is held already."""
        if not self._steps or self.held:
            return False
        self.held_since = elapsed
        return True

    def resume(self, elapsed: float) -> float:
        """Go on from ``elapsed``: the steps left move back by the time held, which is
        returned (0 when it was not held)."""
        if self.held_since is None:
            return 0.0
        held_for = max(0.0, elapsed - self.held_since)
        self.shift += held_for
        self.held_since = None
        return held_for
