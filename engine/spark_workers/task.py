"""The worker's end of a remote link: what one Spark task runs on an executor.

:func:`run_task` is the function Spark ships (by reference: the executor imports flowdeck,
so it must be installed there, same version). It loads the worker runtime, connects back to
the controller, shows the token, says hello, and then runs the very runtime a local worker
process runs (``engine.worker.run_worker``) with commands read from the link and messages
written to it. No Spark code runs past this point: Spark only placed the task.

When the link closes before the run's end (the controller died, or dropped this worker)
the load stops at once: nobody could stop it or read its figures any more. The runtime's
own deadline (the run's end plus a grace period) is the last guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import ssl
import time
from dataclasses import dataclass

from flowdeck.engine.commands import ApplyChange, Stop, WorkerAssignment, WorkerCommand
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.process import WorkerFailed, _describe, install_uvloop, load_runtime
from flowdeck.engine.snapshot import WorkerReport
from flowdeck.engine.spark_workers.wire import (
    HANDSHAKE_TIMEOUT,
    LinkFinished,
    LinkRefused,
    TaskUsage,
    WorkerHello,
    frame,
    read_frame,
    token_header,
)


@dataclass(frozen=True, slots=True)
class TaskOrders:
    """What every task of a run is given: where the controller listens and how to prove
    it belongs to the run. ``server_cert`` is the controller's certificate (PEM) when the
    link is TLS: the worker trusts exactly that certificate."""

    host: str
    port: int
    token: str
    runtime: str
    version: str
    server_cert: str = ""


def client_context(server_cert: str) -> ssl.SSLContext:
    """A context that trusts the controller's own certificate and nothing else (pinned, so
    a self-signed certificate works and the name it carries need not match)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=server_cert)
    context.check_hostname = False
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


def run_task(orders: TaskOrders, worker: int) -> str:
    """Run worker ``worker`` of the run in this process; how it ended, in a few words."""
    install_uvloop()
    return asyncio.run(_linked_worker(orders, worker))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _linked_worker(orders: TaskOrders, worker: int) -> str:
    cpu_at_start, wall_at_start = _cpu_seconds(), time.monotonic()
    try:
        runtime = load_runtime(orders.runtime)
        failure = None
    except FlowdeckError as exc:
        failure = WorkerFailed(worker, f"on {socket.gethostname()}: {exc}")
    context = client_context(orders.server_cert) if orders.server_cert else None
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(orders.host, orders.port, ssl=context), HANDSHAKE_TIMEOUT
    )

    def emit(message: object) -> None:
        # The controller may be gone; the worker still stops by its own deadline.
        if not writer.is_closing():
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                writer.write(frame(message))

    try:
        writer.write(token_header(orders.token))
        if failure is not None:
            emit(failure)
            return f"worker {worker}: {failure.reason}"
        emit(WorkerHello(worker, socket.gethostname(), os.getpid(), orders.version))
        await writer.drain()
        first = await read_frame(reader)
        if isinstance(first, LinkRefused):
            return f"worker {worker} refused: {first.reason}"
        if not isinstance(first, WorkerAssignment):
            return f"worker {worker}: the controller sent {type(first).__name__}, not a run"
        commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()
        load: asyncio.Future[WorkerReport] = asyncio.ensure_future(runtime(first, commands, emit))
        pump = asyncio.create_task(_pump(reader, commands, load))
        try:
            report = await load
        except asyncio.CancelledError:
            return f"worker {worker}: the controller's link closed; load stopped"
        except Exception as exc:
            emit(WorkerFailed(worker, _describe(exc)))
            return f"worker {worker} failed: {_describe(exc)}"
        else:
            emit(report)
            return f"worker {worker} reported"
        finally:
            pump.cancel()
            used = _cpu_seconds() - cpu_at_start
            emit(TaskUsage(worker, used, time.monotonic() - wall_at_start))
            emit(LinkFinished())
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.drain(), 10)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 5)


async def _pump(
    reader: asyncio.StreamReader,
    commands: asyncio.Queue[WorkerCommand],
    load: asyncio.Future[WorkerReport],
) -> None:
    """Commands from the link into the runtime's queue; a closed link stops the load."""
    try:
        while True:
            message = await read_frame(reader)
            if isinstance(message, LinkFinished):
                break
            if isinstance(message, ApplyChange | Stop):
                commands.put_nowait(message)
    except Exception:
        pass
    load.cancel()
