"""The control endpoint of a run: HTTP JSON on the controller's own loop, as one more sink.

Everything outside the process that watches or steers a run goes through here:
``flowdeck steer``, ``flowdeck attach``, a CI script with curl. The server follows the
run like the recorder and the cockpit do (it is a :class:`~flowdeck.engine.sinks.Sink`):
it keeps the last tick and broker sample for ``/status`` and fans ticks, events, broker
samples and the summary out to every ``/stream`` client. A change posted to ``/changes``
is parsed by the cockpit's own parser and asked of the controller like a key press; the
answer waits (a bounded time) for the controller's ``change_applied`` event and says how
long the change took to be in force in every worker.

Every request needs the run's token (``Authorization: Bearer``); every refusal is a 4xx
with a one-line JSON ``{"error": ...}``; a handler that breaks answers 500 and becomes an
error event of the run, never the end of it. The server binds 127.0.0.1 on a free port
unless told otherwise (see ``address.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import secrets
import socket
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from aiohttp import web

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.autotune import Autopilot
from flowdeck.engine.change import parse_change
from flowdeck.engine.control.address import ControlAddress
from flowdeck.engine.control.openapi import openapi_description
from flowdeck.engine.control.registry import RunEntry, process_started, register, unregister
from flowdeck.engine.control.wire import (
    DEFAULT_WAIT_SECONDS,
    MAX_WAIT_SECONDS,
    AutotuneState,
    ChangeBatch,
    ChangeState,
    Error,
    NextStep,
    Phase,
    Schedule,
    SettingsPair,
    State,
    Status,
    WaitSeconds,
    decode_autotune_request,
    decode_change_request,
    encode,
    pending_wire,
    settings_wire,
    summary_wire,
    tick_wire,
)
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.sinks import NullSink, RunStarted

if TYPE_CHECKING:
    from flowdeck.engine.controller import Controller


def autotune_wire(pilot: Autopilot) -> AutotuneState:
    """An autopilot as the wire carries it."""
    recommendation = pilot.recommendation
    return AutotuneState(
        setting=pilot.setting.value,
        state=pilot.state.value,
        active=pilot.active,
        steps=len(pilot.search.steps),
        said=list(pilot.said[-20:]),
        chosen=pilot.chosen,
        reasoning=[] if recommendation is None else list(recommendation.reasoning),
    )


log = logging.getLogger(__name__)

#: Ticks kept for a stream client that joins late (a cockpit's charts), and events.
TICK_BACKLOG = 600
EVENT_BACKLOG = 500
#: Updates queued for one stream client before it counts as gone (it may reconnect).
STREAM_QUEUE = 2_000
#: Seconds between keep-alive comments on an idle stream.
KEEPALIVE_SECONDS = 15.0
#: Largest request body taken: a batch of MAX_CHANGES changes of the longest kind fits.
MAX_BODY = 1024 * 1024
#: Seconds a connection has to send a whole request's headers (from its opening, or from
#: the last answer on it), and a request its body: a client that trickles bytes to hold a
#: connection open (slow loris) is closed then.
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 10.0
#: Connections served at once (a cockpit attached takes two, a steer one). At the cap the
#: oldest connection with no request in progress is closed for the new one; with every
#: one busy, the new one is answered 503.
MAX_CONNECTIONS = 32


def new_token() -> str:
    """A run's control token: hex, so it never begins with '-' and reads as a value after
    ``--token`` (a URL-safe token does one time in 64, and the command line took it for an
    option)."""
    return secrets.token_hex(32)


def _version() -> str:
    try:
        return metadata.version("flowdeck")
    except metadata.PackageNotFoundError:
        return "unknown"


def _answer(value: Any, status: int = 200) -> web.Response:
    """A JSON answer of a wire type (``wire.py``)."""
    return web.Response(body=encode(value), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    """A refusal: the status and one line of JSON saying why."""
    line = " ".join(str(message).split())
    response = _answer(Error(line), status)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="flowdeck"'
    return response


class _Refused(Exception):
    """A request that cannot be served as asked: its status and the one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _TooMany(asyncio.Protocol):
    """A connection over :data:`MAX_CONNECTIONS` while every one is busy: answered 503
    with the one-line JSON error, then closed."""

    _BODY = encode(Error(f"the control endpoint serves {MAX_CONNECTIONS} connections at once"))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nRetry-After: 1\r\n"
            + f"Content-Length: {len(self._BODY)}\r\n\r\n".encode()
            + self._BODY
        )
        transport.close()


def _sse(kind: str, payload: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + encode(payload) + b"\n\n"


class ControlServer(NullSink):
    """A run's control endpoint; see the module docstring.

    ``start`` binds it (call it on the controller's loop; before ``Controller.start`` a
    taken port is an error before any load). Added as a sink without being started, it
    starts itself when the run starts and closes when it ends (the cockpit's runs).
    """

    def __init__(
        self,
        controller: Controller,
        *,
        address: ControlAddress | None = None,
        tls: ssl.SSLContext | None = None,
        token: str | None = None,
        runs_dir: Path | None = None,
        sessions_root: Path | None = None,
    ) -> None:
        self.controller = controller
        #: The sessions directory the run was started from (its session's parent when it
        #: records): steer and attach with no run named look for runs of their own one.
        self.sessions_root = sessions_root
        self.address = address or ControlAddress()
        self.token = token or new_token()
        self._tls = tls
        self._runs_dir = runs_dir
        self._runner: web.AppRunner | None = None
        self._starting: asyncio.Task[None] | None = None
        self._autostarted = False
        self._port = self.address.port
        self._entry_paths: list[Path] = []
        self.entry: RunEntry | None = None
        self._run_id = ""
        self._ticks: deque[Tick] = deque(maxlen=TICK_BACKLOG)
        self._broker: BrokerSample | None = None
        self._summary: RunSummary | None = None
        self._phase: dict[str, Any] = {"index": 0, "label": "start"}
        self._requested: dict[int, str] = {}
        self._applied: dict[int, RunEvent] = {}
        self._waiters: dict[int, list[asyncio.Future[RunEvent]]] = {}
        self._subscribers: set[asyncio.Queue[bytes | None]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._listener: asyncio.Server | None = None
        #: Connections with a request in a handler now (a stream, a change waiting).
        self._busy: set[object] = set()
        #: The autopilot started through this endpoint (the latest).
        self.autopilot: Autopilot | None = None

    # -- lifetime ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The endpoint's base URL, for clients on this host (after :meth:`start`)."""
        host = self.address.host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self._tls else 'http'}://{host}:{self._port}"

    @property
    def serving(self) -> bool:
        return self._runner is not None

    async def start(self) -> None:
        """Listen; raises FlowdeckError (one line) when the address cannot be bound."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._listen())
        await asyncio.shield(self._starting)

    async def _listen(self) -> None:
        family = socket.AF_INET6 if ":" in self.address.host else socket.AF_INET
        try:
            sock = socket.create_server((self.address.host, self.address.port), family=family)
        except OSError as exc:
            raise FlowdeckError(
                f"cannot serve the control endpoint on {self.address}: "
                f"{exc.strerror or exc}; pick another --control address"
            ) from None
        self._port = int(sock.getsockname()[1])
        app = web.Application(middlewares=[self._guard], client_max_size=MAX_BODY)
        app.router.add_get("/status", self._status)
        app.router.add_post("/changes", self._post_change)
        app.router.add_get("/changes/{change_id}", self._change_state)
        app.router.add_get("/stream", self._stream)
        app.router.add_post("/stop", self._stop)
        app.router.add_post("/schedule/skip", self._skip_step)
        app.router.add_post("/schedule/resume", self._resume_schedule)
        app.router.add_post("/autotune", self._post_autotune)
        app.router.add_get("/autotune", self._autotune_state)
        app.router.add_post("/autotune/stop", self._stop_autotune)
        app.router.add_get("/openapi.json", self._openapi)
        # aiohttp's keep-alive timeout runs from a connection's opening and from each
        # answer until a whole request has come: the header-read timeout.
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, keepalive_timeout=HEADER_TIMEOUT
        )
        await runner.setup()
        server = runner.server
        assert server is not None

        def connection() -> asyncio.BaseProtocol:
            if len(server.connections) < MAX_CONNECTIONS:
                return server()
            idle = [c for c in server.connections if c not in self._busy]
            if not idle:
                return _TooMany()
            idle[0].force_close()  # the oldest that holds a connection without a request
            return server()

        loop = asyncio.get_running_loop()
        if self._tls is not None:
            self._listener = await loop.create_server(
                connection, sock=sock, ssl=self._tls, ssl_handshake_timeout=HEADER_TIMEOUT
            )
        else:
            self._listener = await loop.create_server(connection, sock=sock)
        self._runner = runner
        if self.controller.started_at:
            self._register()

    async def close(self) -> None:
        """End every stream (after what is queued), stop listening, remove the files."""
        unregister(self._entry_paths)
        self._entry_paths = []
        for queue in list(self._subscribers):
            self._offer(queue, None)
        if self._starting is not None and not self._starting.done():
            with contextlib.suppress(Exception):
                await self._starting
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner.cleanup(), 5.0)

    def _spawn(self, work: Awaitable[Any], what: str) -> None:
        async def guarded() -> None:
            try:
                await work
            except Exception as exc:
                self._trouble(f"control endpoint: {what} failed: {exc}")

        task = asyncio.ensure_future(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _trouble(self, message: str) -> None:
        log.error("%s", message)
        with contextlib.suppress(Exception):
            self.controller.report_event(EventKind.ERROR, message)

    def _register(self) -> None:
        """Write where steer/attach find this run (once the run has its session)."""
        if self._entry_paths or self._runner is None:
            return
        session = self.controller.session_dir
        pid = os.getpid()
        slug = re.sub(r"[^a-z0-9]+", "-", self.controller.spec.name.lower()).strip("-") or "run"
        self._run_id = session.name if session is not None else f"{slug}-{pid}"
        self.entry = RunEntry(
            run_id=self._run_id,
            name=self.controller.spec.name,
            started=self.controller.started_at or time.time(),
            url=self.url,
            token=self.token,
            pid=pid,
            pid_started=process_started(pid) or 0.0,
            session_dir=str(session) if session is not None else None,
            sessions_root=str(self._sessions_root_of(session)),
        )
        try:
            self._entry_paths = register(self.entry, self._runs_dir)
        except FlowdeckError as exc:
            self._trouble(f"control endpoint at {self.url} not listed: {exc}")

    def _sessions_root_of(self, session: Path | None) -> Path:
        if self.sessions_root is not None:
            return self.sessions_root.resolve()
        if session is not None:
            return session.resolve().parent
        from flowdeck.engine.recording.location import default_sessions_root

        return default_sessions_root().resolve()

    # -- as a sink of the run ------------------------------------------------------------

    def on_start(self, run: RunStarted) -> None:
        if self._runner is not None:
            self._register()
        elif self._starting is None:
            self._autostarted = True
            self._spawn(self.start(), "start")

    def on_tick(self, tick: Tick) -> None:
        self._ticks.append(tick)
        self._fan_out(lambda: _sse("tick", tick_wire(tick)))

    def on_event(self, event: RunEvent) -> None:
        if event.kind is EventKind.PHASE:
            self._phase = {
                "index": event.detail.get("index", 0),
                "label": event.detail.get("label", ""),
            }
        elif event.kind is EventKind.CHANGE_REQUESTED and event.change_id is not None:
            self._requested[event.change_id] = str(event.detail.get("change", ""))
        elif event.kind is EventKind.CHANGE_APPLIED and event.change_id is not None:
            self._applied[event.change_id] = event
            for waiter in self._waiters.pop(event.change_id, []):
                if not waiter.done():
                    waiter.set_result(event)
        self._fan_out(lambda: _sse("event", event.to_json()))

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self._broker = sample
        self._fan_out(lambda: _sse("broker", sample))

    def on_finish(self, summary: RunSummary) -> None:
        self._summary = summary
        self._fan_out(lambda: _sse("summary", summary_wire(summary)))
        for queue in list(self._subscribers):
            self._offer(queue, None)
        if self._autostarted:
            self._spawn(self.close(), "close")

    def _fan_out(self, message: Callable[[], bytes]) -> None:
        """Hand one update to every stream client, written out only when there is one: a
        broker sample of hundreds of queues each second is no work for a run nobody
        follows (the cockpit's loop runs this sink too)."""
        if not self._subscribers:
            return
        text = message()
        for queue in list(self._subscribers):
            self._offer(queue, text)

    def _offer(self, queue: asyncio.Queue[bytes | None], message: bytes | None) -> None:
        """Queue one update for a stream client; one that fell too far behind is ended
        (it reconnects and starts again from the status)."""
        try:
            queue.put_nowait(message)
        except asyncio.QueueFull:
            self._subscribers.discard(queue)
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(None)

    # -- what the run is now ---------------------------------------------------------------

    @property
    def state(self) -> str:
        controller = self.controller
        if controller.summary is not None:
            return "ended"
        if controller.running:
            return "running"
        return "stopping" if controller.started_at else "starting"

    def status(self) -> Status:
        controller = self.controller
        spec = controller.spec
        next_step = controller.next_step
        session = controller.session_dir
        return Status(
            run_id=self._run_id,
            name=spec.name,
            state=self.state,  # type: ignore[arg-type]  # one of RunState's words
            started_at=controller.started_at or None,
            session_dir=str(session) if session is not None else None,
            spec=spec.redacted(),
            settings=SettingsPair(
                settings_wire(controller.settings), settings_wire(controller.requested_settings)
            ),
            pending=[pending_wire(p) for p in controller.pending],
            phase=Phase(int(self._phase["index"]), str(self._phase["label"])),
            schedule=Schedule(
                steps=len(spec.schedule),
                held=controller.schedule_held,
                next=(
                    NextStep(next_step.at, next_step.change.describe())
                    if next_step is not None
                    else None
                ),
            ),
            tick=tick_wire(self._ticks[-1]) if self._ticks else None,
            broker=self._broker,
            summary=summary_wire(self._summary) if self._summary is not None else None,
        )

    def change_state(self, change_id: int) -> ChangeState | None:
        """A change's state as the API answers it; None for an id the run never had."""
        applied = self._applied.get(change_id)
        if applied is not None:
            delay = float(applied.detail.get("delay_s", 0.0))
            return ChangeState(
                id=change_id,
                change=str(applied.detail.get("change", self._requested.get(change_id, ""))),
                in_force=True,
                in_force_after_ms=round(delay * 1000),
                message=applied.message,
            )
        for pending in self.controller.pending:
            if pending.change_id == change_id:
                return ChangeState(
                    id=change_id,
                    change=pending.change.describe(),
                    in_force=False,
                    workers_done=pending.workers_done,
                    workers_total=pending.workers_total,
                )
        if change_id in self._requested:
            return ChangeState(id=change_id, change=self._requested[change_id], in_force=False)
        return None

    # -- HTTP ------------------------------------------------------------------------------

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """The token first, then the handler; every refusal and failure as one JSON line."""
        given = request.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        if not given:
            return _error(401, "this endpoint needs the run's token: Authorization: Bearer TOKEN")
        if scheme.lower() != "bearer" or not secrets.compare_digest(
            token.strip().encode(), self.token.encode()
        ):
            return _error(401, "wrong token for this run")
        self._busy.add(request.protocol)
        try:
            return await handler(request)
        except _Refused as exc:
            return _error(exc.status, exc.message)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            reason = "no such endpoint" if exc.status == 404 else exc.reason.lower()
            return _error(
                exc.status, f"{request.method} {request.path}: {reason}; see /openapi.json"
            )
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception as exc:
            log.exception("control endpoint: %s %s failed", request.method, request.path)
            self._trouble(f"control endpoint: {request.method} {request.path} failed: {exc!r}")
            return _error(500, f"the control endpoint failed on this request: {exc!r}")
        finally:
            self._busy.discard(request.protocol)

    async def _openapi(self, request: web.Request) -> web.Response:
        return _answer(openapi_description(_version()))

    async def _status(self, request: web.Request) -> web.Response:
        return _answer(self.status())

    async def _post_change(self, request: web.Request) -> web.Response:
        """One change (``{"change": ...}``) or several in one request (``{"changes":
        [...]}``, all checked before the first is asked); the answer waits up to ``wait``
        for every one to be in force."""
        wait = self._wait_of(request)
        try:
            raw = await asyncio.wait_for(request.read(), BODY_TIMEOUT)
        except TimeoutError:
            raise _Refused(408, f"the body did not come within {BODY_TIMEOUT:g} s") from None
        try:
            asked = decode_change_request(raw)
        except msgspec.MsgspecError as exc:
            reason = "the body is not JSON" if isinstance(exc, msgspec.DecodeError) else exc
            raise _Refused(400, f'{reason}; send e.g. {{"change": "inflight=200"}}') from None
        changes = []
        for text in asked.texts:
            try:
                changes.append(parse_change(text))
            except SpecError as exc:
                raise _Refused(400, exc.message) from None
        if self.state != "running":
            raise _Refused(409, f"the run is {self.state}: changes apply only while it runs")
        ids = []
        for change in changes:
            try:
                ids.append(self.controller.request(change, source="api"))
            except SpecError as exc:
                raise _Refused(400, exc.message) from None
            except FlowdeckError as exc:
                raise _Refused(409, str(exc)) from None
        applied = await self._applied_within(ids, wait)
        states = [
            self.change_state(change_id)
            or ChangeState(id=change_id, change=change.describe(), in_force=False)
            for change_id, change in zip(ids, changes, strict=True)
        ]
        answer = ChangeBatch(states) if isinstance(asked.changes, list) else states[0]
        return _answer(answer, 200 if applied else 202)

    def _wait_of(self, request: web.Request) -> float:
        raw = request.query.get("wait")
        if raw is None:
            return DEFAULT_WAIT_SECONDS
        try:
            wait: float = msgspec.convert(float(raw), WaitSeconds)
        except (ValueError, msgspec.ValidationError):
            wait = math.nan
        if math.isnan(wait):
            raise _Refused(400, f"wait must be 0..{MAX_WAIT_SECONDS:g} seconds, got {raw!r}")
        return wait

    async def _applied_within(self, change_ids: list[int], wait: float) -> bool:
        """Whether every change of ``change_ids`` is in force within ``wait`` seconds."""
        missing = [i for i in change_ids if i not in self._applied]
        if not missing:
            return True
        if wait <= 0:
            return False
        loop = asyncio.get_running_loop()
        waiters: dict[int, asyncio.Future[RunEvent]] = {}
        for change_id in missing:
            waiters[change_id] = loop.create_future()
            self._waiters.setdefault(change_id, []).append(waiters[change_id])
        try:
            _, pending = await asyncio.wait(waiters.values(), timeout=wait)
            return not pending
        finally:
            for change_id, waiter in waiters.items():
                listed = self._waiters.get(change_id, [])
                if waiter in listed:
                    listed.remove(waiter)
                if not listed:
                    self._waiters.pop(change_id, None)

    async def _change_state(self, request: web.Request) -> web.Response:
        raw = request.match_info["change_id"]
        if not raw.isdigit():
            raise _Refused(400, f"a change id is a whole number, got {raw!r}")
        state = self.change_state(int(raw))
        if state is None:
            raise _Refused(404, f"this run has no change #{raw}")
        return _answer(state)

    async def _stop(self, request: web.Request) -> web.Response:
        if self.state != "running":
            raise _Refused(409, f"the run is {self.state}; there is nothing to stop")
        self._spawn(self.controller.stop("stopped through the control endpoint"), "stop")
        return _answer(State("stopping"), 202)

    async def _skip_step(self, request: web.Request) -> web.Response:
        if self.state != "running":
            raise _Refused(409, f"the run is {self.state}; its schedule is over")
        try:
            self.controller.skip_step()
        except FlowdeckError as exc:
            raise _Refused(409, str(exc)) from None
        return _answer(State(self.state))  # type: ignore[arg-type]

    async def _resume_schedule(self, request: web.Request) -> web.Response:
        if self.state != "running":
            raise _Refused(409, f"the run is {self.state}; its schedule is over")
        try:
            self.controller.resume_schedule()
        except FlowdeckError as exc:
            raise _Refused(409, str(exc)) from None
        return _answer(State(self.state))  # type: ignore[arg-type]

    async def _post_autotune(self, request: web.Request) -> web.Response:
        """Start the autopilot on the run as it is now (``flowdeck autotune``, a remote
        cockpit's ``o``): it follows the run from here, judging its steps by the run's own
        figures, and its steps show as the run's events."""
        try:
            raw = await asyncio.wait_for(request.read(), BODY_TIMEOUT)
        except TimeoutError:
            raise _Refused(408, f"the body did not come within {BODY_TIMEOUT:g} s") from None
        try:
            asked = decode_autotune_request(raw)
        except msgspec.MsgspecError as exc:
            reason = "the body is not JSON" if isinstance(exc, msgspec.DecodeError) else exc
            raise _Refused(400, f'{reason}; send e.g. {{"setting": "inflight"}}') from None
        if self.state != "running":
            raise _Refused(409, f"the run is {self.state}: the autopilot steers a running run")
        searching = self._searching()
        if searching is not None:
            raise _Refused(
                409,
                f"an autopilot is already searching {searching.setting.value} on this run; "
                "stop it first (POST /autotune/stop, or o in the cockpit)",
            )
        controller = self.controller

        def done(pilot: Autopilot) -> None:
            self._spawn(controller.stop("the autopilot is done"), "stop after the autopilot")

        try:
            pilot = Autopilot(
                controller,
                asked.setting,
                max_p99_ms=asked.max_p99_ms,
                max_backlog=asked.max_backlog,
                hold_s=asked.hold_s,
                on_done=done if asked.then == "stop" else None,
            )
        except SpecError as exc:
            raise _Refused(400, exc.message) from None
        self.autopilot = pilot
        pilot.attach()
        return _answer(autotune_wire(pilot), 202)

    def _searching(self) -> Autopilot | None:
        """An autopilot searching on this run now: this endpoint's or another (the one
        ``flowdeck run --autotune`` or the cockpit started)."""
        for sink in self.controller.sinks:
            if isinstance(sink, Autopilot) and sink.active:
                return sink
        return None

    async def _autotune_state(self, request: web.Request) -> web.Response:
        pilot = self._searching() or self.autopilot
        if pilot is None:
            raise _Refused(404, "no autopilot on this run; POST /autotune starts one")
        return _answer(autotune_wire(pilot))

    async def _stop_autotune(self, request: web.Request) -> web.Response:
        pilot = self._searching()
        if pilot is None:
            raise _Refused(409, "no autopilot is searching on this run")
        pilot.stop("stopped through the control endpoint")
        return _answer(autotune_wire(pilot))

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        # What a late client needs first, taken with its subscription in one step so no
        # update falls between the two.
        backlog = [_sse("status", self.status())]
        backlog += [_sse("event", e.to_json()) for e in self.controller.events[-EVENT_BACKLOG:]]
        backlog += [_sse("tick", tick_wire(t)) for t in self._ticks]
        if self._broker is not None:
            backlog.append(_sse("broker", self._broker))
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(STREAM_QUEUE)
        if self._summary is not None:
            backlog.append(_sse("summary", summary_wire(self._summary)))
            queue.put_nowait(None)
        else:
            self._subscribers.add(queue)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await response.prepare(request)
            await response.write(b"".join(backlog))
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if message is None:
                    break
                await response.write(message)
        except ConnectionError:
            pass  # the client went away
        finally:
            self._subscribers.discard(queue)
        return response
