"""Whether the broker has room for the run's connections: before it starts, and as it grows.

Before the start, the broker's socket limit is checked against the connections the run
opens (``engine.sources``: figures read again while they may still count a finished run's
sockets; a run that does not fit is refused, one whose limit cannot be read is refused when
large and warned about when small). ``skip`` (``--skip-capacity-check``) turns every
refusal into a warning. During the run, a change that opens more connections than the
broker has sockets or file descriptors free is warned about before it applies; it still
goes ahead (pushing a broker past its limit can be the point of the test).

A collaborator of the controller (see ``engine.run_context``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from flowdeck.engine import topology
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.events import EventKind

if TYPE_CHECKING:
    from flowdeck.collectors.model import BrokerSample
    from flowdeck.engine.run_context import RunContext

__all__ = ["CapacityCheck"]


class CapacitySource(Protocol):
    """What the check reads the broker through (the run's broker sources)."""

    @property
    def management_sample(self) -> BrokerSample | None: ...

    async def check_capacity(self, *, skip: bool = False) -> None: ...


class CapacityCheck:
    """The broker's room for the run's connections; see the module docstring."""

    def __init__(self, *, skip: bool = False) -> None:
        #: Start even when the socket limit says the run does not fit, or cannot be read
        #: for a large run (warned about instead of refused).
        self.skip = skip
        self._run: RunContext | None = None

    def bind(self, run: RunContext) -> None:
        self._run = run

    async def before_start(self, source: CapacitySource) -> None:
        """Refuse (FlowdeckError) a run the broker has no sockets for."""
        await source.check_capacity(skip=self.skip)

    def warn_change(
        self,
        change_id: int,
        *,
        added: int,
        total: int,
        open_connections: int,
        sample: BrokerSample | None,
    ) -> None:
        """Warn before change ``change_id`` opens ``added`` more connections (``total``
        then) than the broker has sockets or file descriptors free, by the management API's
        last figures (``sample``). The clients that cannot connect time out, and only those
        that opened are counted.

        The broker's figures lag (a statistics interval or two) behind connections just
        opened, but it uses at least one socket and descriptor per connection the workers
        have open right now (``open_connections``), so that count is a floor under them."""
        if self._run is None:
            raise FlowdeckError("the capacity check is not bound to a run")
        nodes = [n for n in sample.nodes if n.running] if sample is not None else []
        free: list[tuple[int, str]] = []
        sockets = [(n.sockets_used, n.sockets_total) for n in nodes]
        descriptors = [(n.fd_used, n.fd_total) for n in nodes]
        for figures, what in ((sockets, "sockets"), (descriptors, "file descriptors")):
            known = [(u, t) for u, t in figures if u is not None and t is not None]
            if known and len(known) == len(figures):
                used = max(sum(u for u, _ in known), open_connections)
                free.append((max(0, sum(t for _, t in known) - used), what))
        detail = {"warning": "capacity", "added": added}
        if sample is None or not free:
            if total > topology.UNCHECKED_CONNECTIONS_LIMIT:
                self._run.report_event(
                    EventKind.INFO,
                    f"warning: change #{change_id} takes the run to {total} connections and "
                    "the broker's socket limit cannot be checked (no management figures); "
                    "clients past it will time out",
                    change_id=change_id,
                    detail=detail,
                )
            return
        room, what = min(free)
        if added <= room:
            return
        age = max(0.0, time.time() - sample.figures_at)
        self._run.report_event(
            EventKind.INFO,
            f"warning: change #{change_id} opens {added} more connections but the broker has "
            f"{room} {what} free (figures {age:.0f} s old); it goes ahead: the clients past the "
            "limit will time out and only the ones that connect are counted",
            change_id=change_id,
            detail={**detail, "free": room, "limit": what},
        )
