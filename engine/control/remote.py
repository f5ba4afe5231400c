"""A run in another process, followed and steered through its control endpoint.

:class:`RemoteRun` has the controller's surface that the cockpit uses (``tui.source.
RunControl``): the spec, the settings in force and asked for, the pending changes, the
updates as a listener sees them, changes, schedule steps, stop. ``flowdeck attach`` opens
the cockpit on it: the same dashboard and keys as a run of its own, and quitting the
cockpit only ends the watching, never the run.

Changes are posted without blocking the cockpit's loop, so ``request`` answers before the
endpoint does: its id is 0, and a refusal comes back as an error event in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.change import Change
from flowdeck.engine.control.client import ControlClient, ControlRefused, Endpoint
from flowdeck.engine.control.wire import (
    broker_sample_from_json,
    pending_from_wire,
    settings_from_wire,
    status_from_json,
    summary_from_json,
    tick_from_json,
)
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import PendingChange, RunSummary, Tick
from flowdeck.engine.sinks import Sink, Update, deliver
from flowdeck.engine.snapshot import Settings
from flowdeck.engine.spec import RunSpec, spec_from_mapping

#: Events after which the status is read again.
REFRESHING_EVENTS = frozenset(
    {EventKind.CHANGE_REQUESTED, EventKind.CHANGE_APPLIED, EventKind.INFO}
)


class RemoteRun:
    """A running run elsewhere, as the cockpit drives one; see the module docstring."""

    def __init__(self, endpoint: Endpoint, status: dict[str, Any]) -> None:
        """``status``: the endpoint's ``/status`` answer (see :meth:`connect`)."""
        self.client = ControlClient(endpoint)
        self.spec: RunSpec = spec_from_mapping(status["spec"])
        self.run_id = str(status.get("run_id", ""))
        self._sinks: list[Sink] = []
        self._summary: asyncio.Future[RunSummary] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._refreshing = False
        self._take_status(status)

    @classmethod
    def connect(cls, endpoint: Endpoint) -> RemoteRun:
        """Reach the run and read its status; FlowdeckError (one line) when it cannot."""
        return cls(endpoint, ControlClient(endpoint).status())

    def _take_status(self, raw: dict[str, Any]) -> None:
        status = status_from_json(raw)
        self._settings = settings_from_wire(status.settings.in_force)
        self._requested = settings_from_wire(status.settings.requested)
        self._pending = tuple(pending_from_wire(p) for p in status.pending)
        self._held = status.schedule.held
        self._session_dir = Path(status.session_dir) if status.session_dir else None
        self.state = status.state

    # -- what the cockpit reads ----------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def requested_settings(self) -> Settings:
        return self._requested

    @property
    def pending(self) -> tuple[PendingChange, ...]:
        return self._pending

    @property
    def session_dir(self) -> Path | None:
        """The session directory on the run's host (it may not be on this one)."""
        return self._session_dir

    @property
    def schedule_held(self) -> bool:
        return self._held

    def add_sink(self, sink: Sink) -> None:
        """Follow the run: ``sink`` takes the updates the stream brings."""
        self._sinks.append(sink)

    # -- following the run ---------------------------------------------------------------

    async def start(self) -> None:
        """Follow the run: its updates go to the listeners until it ends (it is already
        running; nothing is started)."""
        loop = asyncio.get_running_loop()
        if self._summary is None:
            self._summary = loop.create_future()
            self._spawn(self._follow())

    async def _follow(self) -> None:
        assert self._summary is not None
        try:
            async for kind, value in self.client.stream():
                self._take(kind, value)
        except FlowdeckError as exc:
            if not self._summary.done():
                self._summary.set_exception(exc)
            return
        if not self._summary.done():
            self._summary.set_exception(
                FlowdeckError("the run's control endpoint closed before the run ended")
            )

    def _take(self, kind: str, value: Any) -> None:
        update: Update | None = None
        if kind == "status":
            self._take_status(value)
        elif kind == "tick":
            tick: Tick = tick_from_json(value)
            self._settings, self._pending = tick.settings, tick.pending
            update = tick
        elif kind == "event":
            update = RunEvent.from_json(value)
            # What the stream does not carry (settings asked for, the schedule's hold)
            # changes with these: read the status again.
            if update.kind in REFRESHING_EVENTS:
                self._refresh()
        elif kind == "broker":
            sample: BrokerSample = broker_sample_from_json(value)
            update = sample
        elif kind == "summary":
            summary = summary_from_json(value)
            update = summary
            if self._summary is not None and not self._summary.done():
                self._summary.set_result(summary)
        if update is not None:
            self._tell(update)

    def _tell(self, update: Update) -> None:
        for sink in list(self._sinks):
            deliver(sink, update)

    def _refresh(self) -> None:
        """Read the status again (settings asked for, pending changes, schedule hold)."""
        if self._refreshing:
            return
        self._refreshing = True

        async def refresh() -> None:
            try:
                status = await asyncio.to_thread(self.client.status)
                self._take_status(status)
            finally:
                self._refreshing = False

        self._spawn(refresh())

    def _spawn(self, work: Awaitable[Any]) -> None:
        async def guarded() -> None:
            try:
                await work
            except FlowdeckError as exc:
                self._tell(RunEvent(time.time(), EventKind.ERROR, str(exc)))

        task = asyncio.ensure_future(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _call(self, call: Callable[[], Any], then_refresh: bool = True) -> None:
        async def post() -> None:
            await asyncio.to_thread(call)
            if then_refresh:
                self._refresh()

        self._spawn(post())

    # -- steering ------------------------------------------------------------------------

    def request(self, change: Change, source: str = "operator") -> int:
        """Ask the run for ``change``; 0, as the id comes with the endpoint's answer (a
        refusal shows as an error event)."""
        self._spawn(self._post_change(change))
        return 0

    async def _post_change(self, change: Change) -> None:
        await self.client.achange(change.describe(), wait=0)
        self._refresh()

    def toggle_autotune(self, setting: str) -> None:
        """Start the autopilot on ``setting`` in the run's own process, or stop the one
        searching there (the cockpit's ``o`` on a run it attached to); what it says comes
        back as the run's events, a refusal as an error event."""

        async def toggle() -> None:
            try:
                state = await self.client.acall("GET", "/autotune")
            except ControlRefused as exc:
                if exc.status != 404:
                    raise
                state = {}
            if state.get("active"):
                await self.client.acall("POST", "/autotune/stop")
            else:
                await self.client.acall("POST", "/autotune", {"setting": setting})

        self._spawn(toggle())

    def skip_step(self) -> None:
        self._call(self.client.skip_step)

    def resume_schedule(self) -> None:
        self._call(self.client.resume_schedule)

    async def wait(self) -> RunSummary:
        """The summary once the run ends; FlowdeckError when the endpoint is lost first."""
        if self._summary is None:
            raise FlowdeckError("not following the run yet")
        return await asyncio.shield(self._summary)

    async def stop(self, reason: str = "stopped by operator") -> RunSummary:
        """Stop the run itself (not only the watching) and wait for its summary."""
        await asyncio.to_thread(self.client.stop)
        return await self.wait()

    async def detach(self) -> None:
        """Stop following; the run goes on."""
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*self._tasks, return_exceptions=True)
