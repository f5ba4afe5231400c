"""The controller's end of remote workers: one TCP server per run, one host per worker.

:class:`RemoteWorker` is to a worker on another host what ``ProcessWorker`` is to a local
one: it boots (the worker connects and says hello), takes the run's assignment, carries
commands out and messages in, and ends with the report or a reason. Everything happens on
the controller's loop (asyncio streams); nothing here knows who launched the worker.

A link that drops before the worker's report is a lost worker, not a failed run: the host
posts ``WorkerLost`` with an event naming the worker, its host and its clients and what
it had in flight at its last snapshot, and a stand-in report (counters of that snapshot,
its unconfirmed messages as unconfirmed). A worker whose own runtime fails still sends
``WorkerFailed`` over the link, and that fails the run as it does for a local worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flowdeck.engine.accounting import stand_in_report
from flowdeck.engine.commands import (
    ChangeApplied,
    WorkerAssignment,
    WorkerCommand,
    WorkerEvent,
    global_id,
    local_share,
)
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.process import OnMessage, WorkerFailed, WorkerLost
from flowdeck.engine.snapshot import ClientSnapshot, WorkerReport
from flowdeck.engine.spark_workers.wire import (
    HANDSHAKE_TIMEOUT,
    LinkError,
    LinkFinished,
    LinkRefused,
    TaskUsage,
    WorkerHello,
    frame,
    read_frame,
    token_shown,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HostRow:
    """One worker's line in the per-host table: where it ran and what it did."""

    worker: int
    host: str
    pid: int
    publishers: int
    consumers: int
    published: int
    consumed: int
    publish_rate: float  # msg/s over its own first to last send
    consume_rate: float
    cpu_seconds: float | None  # None: not reported (a lost worker)
    wall_seconds: float | None
    lost: bool
    #: When it was lost (unix seconds), as its loss event says; None: not lost, or not known.
    lost_at: float | None = None

    @classmethod
    def between(
        cls,
        earlier: ClientSnapshot,
        later: ClientSnapshot,
        *,
        workers: int,
        host: str,
        pid: int = 0,
        lost_at: float | None = None,
    ) -> HostRow:
        """One worker's row from two of its snapshots: its counts as of ``later``, its
        msg/s and CPU over the time between them (the live rows: the last few seconds; the
        summary of a run without placement figures: its first to its last snapshot). Its
        clients are its share of the totals in force at ``later`` (``local_share``). CPU is
        None when either snapshot came without its process's CPU time."""
        span = max(0.0, later.at - earlier.at)
        sent = later.counters - earlier.counters
        settings = later.settings
        cpu = None
        if later.cpu_seconds is not None and earlier.cpu_seconds is not None and span:
            cpu = max(0.0, later.cpu_seconds - earlier.cpu_seconds)
        return cls(
            worker=later.worker,
            host=host,
            pid=pid,
            publishers=local_share(settings.publishers, later.worker, workers),
            consumers=local_share(settings.consumers, later.worker, workers),
            published=later.counters.published,
            consumed=later.counters.consumed,
            publish_rate=sent.published / span if span else 0.0,
            consume_rate=sent.consumed / span if span else 0.0,
            cpu_seconds=cpu,
            wall_seconds=span if cpu is not None else None,
            lost=lost_at is not None,
            lost_at=lost_at,
        )

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> HostRow:
        """A row as :meth:`to_json` wrote it (the placement's per-host event); its CPU
        comes back as a percentage of one core over one second."""
        cpu = row.get("cpu_percent")
        return cls(
            worker=int(row["worker"]),
            host=str(row["host"]),
            pid=int(row.get("pid") or 0),
            publishers=int(row.get("publishers") or 0),
            consumers=int(row.get("consumers") or 0),
            published=int(row.get("published") or 0),
            consumed=int(row.get("consumed") or 0),
            publish_rate=float(row.get("publish_rate") or 0.0),
            consume_rate=float(row.get("consume_rate") or 0.0),
            cpu_seconds=None if cpu is None else float(cpu) / 100.0,
            wall_seconds=None if cpu is None else 1.0,
            lost=bool(row.get("lost")),
        )

    @property
    def cpu_percent(self) -> float | None:
        """Its process's CPU over the run, in percent of one core."""
        if self.cpu_seconds is None or not self.wall_seconds:
            return None
        return 100.0 * self.cpu_seconds / self.wall_seconds

    def to_json(self) -> dict[str, object]:
        return {
            "worker": self.worker,
            "host": self.host,
            "pid": self.pid,
            "publishers": self.publishers,
            "consumers": self.consumers,
            "published": self.published,
            "consumed": self.consumed,
            "publish_rate": round(self.publish_rate, 3),
            "consume_rate": round(self.consume_rate, 3),
            "cpu_percent": None if self.cpu_percent is None else round(self.cpu_percent, 1),
            "lost": self.lost,
        }


class RemoteWorker:
    """One worker on another host, reached over its link; see the module docstring."""

    def __init__(self, worker: int, workers: int, on_message: OnMessage) -> None:
        self.worker = worker
        self._workers = workers
        self._on_message = on_message
        self._loop = asyncio.get_running_loop()
        self._ready: asyncio.Future[bool] = self._loop.create_future()
        self._done: asyncio.Future[WorkerReport | None] = self._loop.create_future()
        self._writer: asyncio.StreamWriter | None = None
        self.hello: WorkerHello | None = None
        self.last_snapshot: ClientSnapshot | None = None
        self.report: WorkerReport | None = None
        self.usage: TaskUsage | None = None
        self.lost = False
        self._began = False
        self.started_at = 0.0  # the run's start_at, once it began
        self._killed = False
        self._clients: tuple[int, int] | None = None  # publishers, consumers as last applied

    # -- the WorkerHost face ----------------------------------------------------------------

    async def ready(self) -> bool:
        """True once the worker has said hello; False when it failed or was refused first."""
        return await asyncio.shield(self._ready)

    def begin(self, assignment: WorkerAssignment) -> None:
        self._began = True
        self.started_at = assignment.start_at
        self._write(assignment)

    def send(self, command: WorkerCommand) -> None:
        self._write(command)

    async def wait(self) -> WorkerReport | None:
        return await asyncio.shield(self._done)

    def kill(self) -> None:
        """Drop the link: the worker stops its load when it sees it closed."""
        self._killed = True
        if self._writer is not None:
            self._writer.transport.abort()
        else:
            self.fail("its task was ended before it connected")

    @property
    def connected(self) -> bool:
        return self.hello is not None

    # -- what the placement tells it ----------------------------------------------------------

    def fail(self, reason: str) -> None:
        """The worker cannot run (its task failed or never connected): before the run this
        fails the start, as a worker process that dies booting does."""
        if self._done.done():
            return
        if self.hello is not None and self._began:
            return  # connected: its link says what happened to it
        self._on_message(WorkerFailed(self.worker, reason))
        self._finish(None)

    # -- the link ---------------------------------------------------------------------------

    async def serve(
        self, hello: WorkerHello, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Carry this worker's messages until its link ends (the server's handler)."""
        self.hello = hello
        self._writer = writer
        self._on_message(
            WorkerEvent(
                self.worker,
                RunEvent(
                    at=time.time(),
                    kind=EventKind.INFO,
                    message=f"worker {self.worker} connected from {hello.host} (pid {hello.pid})",
                    detail={"worker": self.worker, "host": hello.host, "pid": hello.pid},
                ),
            )
        )
        self._set_ready(True)
        reason = "its link closed"
        finished = False
        try:
            while True:
                message = await read_frame(reader)
                if isinstance(message, LinkFinished):
                    finished = True
                    break
                self._take(message)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            if not isinstance(exc, asyncio.IncompleteReadError):
                reason = f"its link broke ({exc})"
        except LinkError as exc:
            reason = f"it sent {exc}"
        finally:
            with contextlib.suppress(Exception):
                writer.close()
        if self._done.done():
            return
        if self.report is not None:
            self._finish(self.report)
        elif self._killed:
            self._on_message(WorkerFailed(self.worker, "its link was closed by the controller"))
            self._finish(None)
        elif not self._began or finished:
            self._on_message(WorkerFailed(self.worker, f"worker ended without a report: {reason}"))
            self._finish(None)
        else:
            self._lose(reason)

    def _take(self, message: object) -> None:
        if isinstance(message, ClientSnapshot):
            self.last_snapshot = message
        elif isinstance(message, ChangeApplied):
            if message.publishers is not None and message.consumers is not None:
                self._clients = (message.publishers, message.consumers)
        elif isinstance(message, WorkerReport):
            self.report = message
        elif isinstance(message, TaskUsage):
            self.usage = message
            return  # the placement's own figure, not the controller's
        elif isinstance(message, WorkerFailed):
            self._on_message(message)
            self._finish(None)
            return
        elif not isinstance(message, WorkerEvent):
            log.debug("worker %d sent an unexpected %s", self.worker, type(message).__name__)
            return
        self._on_message(message)

    def _lose(self, reason: str) -> None:
        self.lost = True
        hello = self.hello
        assert hello is not None
        snapshot = self.last_snapshot
        publishers, consumers = self.client_ids()
        pending = snapshot.pending_confirms if snapshot is not None else 0
        unacked = snapshot.unacked if snapshot is not None else 0
        age = f"{time.time() - snapshot.at:.1f} s" if snapshot is not None else "no"
        message = (
            f"worker {self.worker} on {hello.host} (pid {hello.pid}) lost: {reason}; "
            f"its {len(publishers)} publisher(s) {_ids(publishers)} and {len(consumers)} "
            f"consumer(s) {_ids(consumers)} are gone; in flight at its last snapshot ({age} "
            f"old): {pending:,} unconfirmed, {unacked:,} delivered unacked; the run goes on "
            "with the other workers"
        )
        event = RunEvent(
            at=time.time(),
            kind=EventKind.ERROR,
            message=message,
            detail={
                "worker_lost": self.worker,
                "host": hello.host,
                "pid": hello.pid,
                "reason": reason,
                "publishers": list(publishers),
                "consumers": list(consumers),
                "pending_confirms": pending,
                "unacked": unacked,
                "snapshot_at": snapshot.at if snapshot is not None else None,
            },
        )
        report = stand_in_report(self.worker, snapshot)
        self._on_message(WorkerLost(self.worker, event, report))
        self._finish(None)

    def client_ids(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Global ids of this worker's publishers and consumers, as the shared rule gives
        them for the totals in force at its last snapshot."""
        if self.last_snapshot is None and self._clients is None:
            return (), ()
        if self.last_snapshot is not None:
            settings = self.last_snapshot.settings
            totals = (settings.publishers, settings.consumers)
        else:
            totals = (0, 0)
        ids = []
        for total in totals:
            share = local_share(total, self.worker, self._workers)
            ids.append(tuple(global_id(i, self.worker, self._workers) for i in range(share)))
        return ids[0], ids[1]

    def _write(self, message: object) -> None:
        # A link already gone says so through its reader; a write to it is moot.
        if self._writer is None or self._writer.is_closing():
            return
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            self._writer.write(frame(message))

    def _set_ready(self, value: bool) -> None:
        if not self._ready.done():
            self._ready.set_result(value)

    def _finish(self, report: WorkerReport | None) -> None:
        self._set_ready(False)
        if not self._done.done():
            self._done.set_result(report)


def _ids(ids: tuple[int, ...]) -> str:
    if not ids:
        return "(none)"
    shown = ", ".join(str(i) for i in ids[:8])
    return f"({shown}{', ...' if len(ids) > 8 else ''})"


class LinkServer:
    """Listens for a run's remote workers: checks the token, then hands each link to the
    host it names (refusing unknown, repeated and wrong-version workers)."""

    def __init__(
        self,
        token: str,
        hosts: dict[int, RemoteWorker],
        *,
        version: str,
        on_refused: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self._token = token
        self._hosts = hosts
        self._version = version
        self._on_refused = on_refused
        self._server: asyncio.Server | None = None
        self.refused = 0

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None) -> int:
        """Listen on ``host``; the port (a free one for 0)."""
        self._server = await asyncio.start_server(self._handle, host, port, ssl=tls)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def _refuse(self, peer: object, reason: str) -> None:
        self.refused += 1
        self._on_refused(f"worker link from {peer} refused: {reason}")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            try:
                shown = await asyncio.wait_for(token_shown(reader, self._token), HANDSHAKE_TIMEOUT)
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError):
                shown = False
            if not shown:
                self._refuse(peer, "no or wrong token")
                return
            try:
                first = await asyncio.wait_for(read_frame(reader), HANDSHAKE_TIMEOUT)
            except (TimeoutError, asyncio.IncompleteReadError, LinkError, OSError) as exc:
                self._refuse(peer, f"no hello ({type(exc).__name__})")
                return
            if isinstance(first, WorkerFailed) and first.worker in self._hosts:
                self._hosts[first.worker].fail(first.reason)
                return
            if not isinstance(first, WorkerHello):
                self._refuse(peer, f"it sent {type(first).__name__} before its hello")
                return
            host = self._hosts.get(first.worker)
            reason = ""
            if host is None:
                reason = f"this run has no worker {first.worker}"
            elif host.connected or host.lost:
                reason = f"worker {first.worker} already connected once (a retried task?)"
            elif first.version != self._version:
                reason = (
                    f"the worker runs flowdeck {first.version} on {first.host}, the controller "
                    f"{self._version}: install the same version on every host"
                )
                host.fail(reason)
            if reason or host is None:
                writer.write(frame(LinkRefused(reason)))
                with contextlib.suppress(Exception):
                    await writer.drain()
                self._refuse(peer, reason)
                return
            await host.serve(first, reader, writer)
        finally:
            writer.close()
