"""Where workers run: in the controller's own loop, or one process each.

Both hosts run the same worker runtime, ``run_worker(assignment, commands, emit)``, and
deliver what it emits to the controller's ``on_message`` on the controller's loop, so the
controller cannot tell them apart.

A worker process is started with the "spawn" context (no forked asyncio state, works the
same everywhere). Booting a fresh interpreter and importing the runtime takes a second or
more on a busy machine, and a publisher's rate schedule starts at the run's ``start_at``: a
worker that started late would burst to catch up. So the child boots and imports first,
says it is ready, and only then receives its assignment with a common ``start_at`` that the
controller fixes once every worker is ready.

The child ignores SIGINT: Ctrl-C in a terminal reaches the whole process group, and the
controller, not the workers, decides how a run stops (drain, flush acks, report).

A worker never outlives its controller, however the controller dies (SIGKILL included): a
worker publishing on with nobody to stop it or read its figures is load nobody asked for.
Two mechanisms, because neither covers every case alone:

* the command pipe: when the controller process is gone the kernel closes its end, the
  child's command thread reads EOF and the child exits at once (``os._exit``: nothing is
  left to report to). This works on every platform and whoever the parent thread was.
* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the child when the
  thread that spawned it ends, even if the child's own threads are stuck. That thread is
  the controller's event-loop thread (``ProcessWorker`` is made on the running loop), which
  lives as long as the run, so the signal only fires once the controller is gone.

Booting takes 0.5-1 s on a quiet 2-core machine and more beside a busy broker: a third of
the cockpit's launch -> first data. A :class:`WorkerPool` boots processes before a run
asks for them (the cockpit starts one when its launch screen opens): a ``ProcessWorker``
takes a booted child from the installed pool when there is one, and the child learns its
worker number with its assignment. A pooled child was spawned by the pool owner's thread
(the app's loop thread, alive as long as the app), so both mechanisms above still hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from flowdeck.engine.commands import WorkerAssignment, WorkerCommand, WorkerMessage
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.events import RunEvent
from flowdeck.engine.snapshot import ClientSnapshot, WorkerReport

log = logging.getLogger(__name__)

#: The worker runtime the controller uses unless told otherwise (``module:function``).
DEFAULT_RUNTIME = "flowdeck.engine.worker:run_worker"

#: ``PR_SET_PDEATHSIG`` from <linux/prctl.h>.
_PR_SET_PDEATHSIG = 1
#: Exit code of a worker that stopped because its controller was gone.
CONTROLLER_GONE_EXIT = 3

Runtime = Callable[
    [WorkerAssignment, "asyncio.Queue[WorkerCommand]", Callable[[WorkerMessage], None]],
    Awaitable[WorkerReport],
]


@dataclass(frozen=True, slots=True)
class WorkerFailed:
    """A worker ended without a report: its runtime raised, or its process died."""

    worker: int
    reason: str


@dataclass(frozen=True, slots=True)
class _Ready:
    """Child -> parent: the interpreter is up and the runtime imported."""


@dataclass(frozen=True, slots=True)
class _Finished:
    """Child -> parent: the runtime returned or raised; nothing follows."""


@dataclass(frozen=True, slots=True)
class WorkerLost:
    """A worker on another host is gone mid-run (its link dropped, its task died): a fact of
    the run, not its end. ``event`` says which worker, host and clients and what was in
    flight; ``report`` stands in for the report that never came (its figures as of its last
    snapshot, its unconfirmed messages counted as unconfirmed)."""

    worker: int
    event: RunEvent
    report: WorkerReport


OnMessage = Callable[[WorkerMessage | WorkerFailed | WorkerLost], None]


def load_runtime(path: str) -> Runtime:
    """The runtime function named ``module:function``."""
    module_name, _, function = path.partition(":")
    try:
        module = importlib.import_module(module_name)
        runtime: Runtime = getattr(module, function)
    except (ImportError, AttributeError) as exc:
        raise FlowdeckError(
            f"worker runtime {path!r} cannot be loaded ({exc}); is flowdeck fully installed?"
        ) from None
    return runtime


def install_uvloop() -> bool:
    """Use uvloop for new event loops where it is installed; True when it is."""
    try:
        import uvloop  # optional, and only wanted in worker processes
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


class WorkerHost(Protocol):
    worker: int

    def send(self, command: WorkerCommand) -> None: ...
    async def wait(self) -> WorkerReport | None: ...
    def kill(self) -> None: ...


class StartingHost(WorkerHost, Protocol):
    """A host that boots first and takes its assignment once every host is ready, so the
    load starts on all of them together (a worker process, a remote worker)."""

    async def ready(self) -> bool: ...
    def begin(self, assignment: WorkerAssignment) -> None: ...


class Placement(Protocol):
    """Where a run's workers come from when they are not local processes: it launches them
    (engine.spark_workers: as Spark tasks reached over TCP) and ends whatever it started."""

    async def launch(
        self, workers: int, runtime: str, on_message: OnMessage
    ) -> Sequence[StartingHost]: ...
    async def close(self) -> None: ...
    def describe(self, workers: int) -> str:
        """The run's workers as its start event names them: ``2 Spark tasks on local[2]``."""
        ...


def with_process_cpu(message: object) -> object:
    """``message`` as it leaves a worker's process: a snapshot carries the CPU seconds this
    process has used so far (user + system, all its threads), for the per-host rows' live
    CPU; anything else goes as it is. Called by what carries messages out of a worker
    process (the pipe here, ``spark_workers.wire.frame`` on a remote link)."""
    if isinstance(message, ClientSnapshot) and message.cpu_seconds is None:
        return replace(message, cpu_seconds=time.process_time())
    return message


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, FlowdeckError) else f"{type(exc).__name__}: {text}"


class InProcessWorker:
    """A worker running as a task on the controller's loop (workers = 0)."""

    def __init__(
        self, assignment: WorkerAssignment, runtime: Runtime, on_message: OnMessage
    ) -> None:
        self.worker = assignment.worker
        self._commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()
        self._on_message = on_message
        self._task = asyncio.create_task(
            self._run(assignment, runtime), name=f"flowdeck-worker-{self.worker}"
        )

    async def _run(self, assignment: WorkerAssignment, runtime: Runtime) -> WorkerReport | None:
        try:
            report = await runtime(assignment, self._commands, self._on_message)
        except asyncio.CancelledError:
            self._on_message(WorkerFailed(self.worker, "worker was cancelled"))
            return None
        except Exception as exc:
            log.debug("worker %d failed", self.worker, exc_info=True)
            self._on_message(WorkerFailed(self.worker, _describe(exc)))
            return None
        self._on_message(report)
        return report

    def send(self, command: WorkerCommand) -> None:
        self._commands.put_nowait(command)

    async def wait(self) -> WorkerReport | None:
        return await asyncio.shield(self._task)

    def kill(self) -> None:
        self._task.cancel()


def _die_with_controller(controller_pid: int) -> None:
    """Have the kernel SIGKILL this process when its spawning thread ends (Linux), and
    leave at once when the controller is already gone (the signal would never come)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != controller_pid:
        os._exit(CONTROLLER_GONE_EXIT)


#: The worker number a pooled child uses until its assignment says which worker it is.
UNASSIGNED = -1


def _log_as(worker: int) -> None:
    logging.basicConfig(level=logging.WARNING, format=f"worker {worker}: %(message)s", force=True)


def _child_main(
    conn: multiprocessing.connection.Connection,
    worker: int,
    runtime_path: str,
    controller_pid: int | None = None,
    niceness: int = 0,
) -> None:
    """Entry point of a worker process (``worker`` is UNASSIGNED for a pooled one)."""
    if controller_pid is not None:
        _die_with_controller(controller_pid)
    if niceness:
        with contextlib.suppress(OSError):
            os.nice(niceness)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _log_as(worker)
    install_uvloop()
    try:
        runtime = load_runtime(runtime_path)
    except FlowdeckError as exc:
        with contextlib.suppress(OSError):
            conn.send(WorkerFailed(worker, str(exc)))
            conn.send(_Finished())
        return
    try:
        conn.send(_Ready())
    except OSError:
        return  # the controller went away while this worker booted
    try:
        assignment = conn.recv()
    except (EOFError, OSError):
        return  # the controller went away before the run started
    except Exception as exc:
        conn.send(WorkerFailed(worker, f"cannot read the run's assignment: {_describe(exc)}"))
        conn.send(_Finished())
        return
    if worker != assignment.worker:
        worker = assignment.worker
        _log_as(worker)
    send_lock = threading.Lock()

    def send(message: Any) -> None:
        # The controller may be gone; the worker still stops by its own deadline.
        with send_lock, contextlib.suppress(BrokenPipeError, OSError):
            conn.send(with_process_cpu(message))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()

        def pump() -> None:
            # Commands arrive on a thread so the event loop never blocks on the pipe.
            while True:
                try:
                    command = conn.recv()
                except (EOFError, OSError):
                    # The controller's end is closed: it died (or was killed) mid-run.
                    # Nobody can stop this worker or read its figures any more.
                    os._exit(CONTROLLER_GONE_EXIT)
                loop.call_soon_threadsafe(commands.put_nowait, command)

        threading.Thread(target=pump, name="flowdeck-commands", daemon=True).start()
        try:
            report = await runtime(assignment, commands, send)
        except Exception as exc:
            send(WorkerFailed(worker, _describe(exc)))
            log.debug("%s", traceback.format_exc())
        else:
            send(report)

    try:
        asyncio.run(main())
    finally:
        send(_Finished())


@dataclass(frozen=True, slots=True)
class _Child:
    """A worker process and the controller's end of its pipe."""

    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    runtime_path: str


def _spawn(worker: int, runtime_path: str, niceness: int = 0) -> _Child:
    context = multiprocessing.get_context("spawn")
    conn, child_conn = context.Pipe(duplex=True)
    process = context.Process(
        target=_child_main,
        args=(child_conn, worker, runtime_path, os.getpid(), niceness),
        name="flowdeck-worker" if worker == UNASSIGNED else f"flowdeck-worker-{worker}",
        daemon=True,
    )
    process.start()
    child_conn.close()
    return _Child(process, conn, runtime_path)


class WorkerPool:
    """Worker processes booted ahead of the runs that will take them.

    ``fill(size)`` spawns children (they boot and import the runtime meanwhile, then wait
    for an assignment); ``install()`` makes every ``ProcessWorker`` made after it take a
    child from here while there is one alive for its runtime, and spawn one otherwise.
    ``close()`` ends the children no run took (a child also leaves by itself when this
    process is gone: its pipe closes). Call ``fill`` on a thread that lives as long as the
    pool's users (the loop thread of the app): see the module's note on PDEATHSIG.
    """

    def __init__(self, runtime_path: str = DEFAULT_RUNTIME, *, niceness: int = 0) -> None:
        self.runtime_path = runtime_path
        #: Added to the children's nice value: above 0, a machine short of CPU serves the
        #: process that owns the pool (the cockpit's screen) before the load it generates.
        self.niceness = niceness
        self._idle: list[_Child] = []
        self._lock = threading.Lock()
        #: How many children runs took from the pool, and how many had to be spawned.
        self.taken = 0
        self.missed = 0

    @property
    def idle(self) -> int:
        """Children booted or booting that no run took yet."""
        with self._lock:
            for child in self._idle:
                if not child.process.is_alive():
                    _end(child)
            self._idle = [child for child in self._idle if child.process.is_alive()]
            return len(self._idle)

    @property
    def booted(self) -> int:
        """Idle children that have booted (said they are ready) and wait for a run."""
        with self._lock:
            return sum(1 for child in self._idle if _said_ready(child))

    def fill(self, size: int) -> int:
        """Spawn children until ``size`` wait here; how many were spawned."""
        spawned = 0
        while self.idle < size:
            child = _spawn(UNASSIGNED, self.runtime_path, self.niceness)
            with self._lock:
                self._idle.append(child)
            spawned += 1
        return spawned

    def shrink(self, size: int = 0) -> int:
        """End idle children beyond ``size`` (newest first); how many were ended. For runs
        that will not take them: a run whose workers go to Spark needs no local process."""
        with self._lock:
            ended, self._idle = self._idle[size:], self._idle[:size]
        for child in ended:
            _end(child)
            child.process.join(1.0)  # killed: reaped at once, no zombie left behind
        return len(ended)

    def take(self, runtime_path: str) -> _Child | None:
        """A live child for ``runtime_path``, oldest first; None when there is none."""
        with self._lock:
            while self._idle:
                child = self._idle.pop(0)
                if child.runtime_path == runtime_path and child.process.is_alive():
                    self.taken += 1
                    return child
                _end(child)
            self.missed += 1
            return None

    def install(self) -> WorkerPool:
        """Make this the pool ``ProcessWorker`` takes children from."""
        global _installed_pool
        _installed_pool = self
        return self

    def close(self) -> None:
        """End the idle children and stop being the installed pool."""
        global _installed_pool
        if _installed_pool is self:
            _installed_pool = None
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            _end(child)


def _said_ready(child: _Child) -> bool:
    # The child's first message is _Ready (or a failure): anything waiting in the pipe.
    try:
        return child.process.is_alive() and child.conn.poll()
    except OSError:
        return False


def _end(child: _Child) -> None:
    # Closing the pipe is enough (the child leaves on EOF); the kill is for one still
    # booting, which does not read the pipe yet.
    with contextlib.suppress(OSError):
        child.conn.close()
    if child.process.is_alive():
        child.process.kill()


_installed_pool: WorkerPool | None = None


class ProcessWorker:
    """A worker in a process of its own, bridged to the controller's loop by a pipe.

    Make it on the controller's loop, wait for :meth:`ready`, then :meth:`begin` the run.
    The process comes from the installed :class:`WorkerPool` when it has one booted.
    """

    def __init__(self, worker: int, runtime_path: str, on_message: OnMessage) -> None:
        self.worker = worker
        self._on_message = on_message
        self._loop = asyncio.get_running_loop()
        pool = _installed_pool
        child = pool.take(runtime_path) if pool is not None else None
        #: Whether the process was booted ahead, by a pool.
        self.pooled = child is not None
        if child is None:
            child = _spawn(worker, runtime_path)
        self._conn = child.conn
        self._process = child.process
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._done: asyncio.Future[WorkerReport | None] = self._loop.create_future()
        self._send_lock = threading.Lock()
        self._reader = threading.Thread(
            target=self._read, name=f"flowdeck-worker-{worker}-reader", daemon=True
        )
        self._reader.start()

    def _read(self) -> None:
        report: WorkerReport | None = None
        failed = False
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # an unpicklable message: say so, keep reading
                self._post(WorkerFailed(self.worker, f"unreadable worker message: {exc}"))
                continue
            if isinstance(message, _Finished):
                break
            if isinstance(message, _Ready):
                self._call(self._set_ready)
                continue
            if isinstance(message, WorkerReport):
                report = message
            if isinstance(message, WorkerFailed):
                failed = True
                if message.worker != self.worker:  # a pooled child, before its assignment
                    message = WorkerFailed(self.worker, message.reason)
            self._post(message)
        self._process.join(timeout=5)
        if report is None and not failed:
            code = self._process.exitcode
            self._post(WorkerFailed(self.worker, f"worker process ended (exit code {code})"))
        self._call(self._finish, report)

    def _post(self, message: WorkerMessage | WorkerFailed) -> None:
        self._call(self._on_message, message)

    def _call(self, callback: Callable[..., None], *args: Any) -> None:
        # RuntimeError: the controller's loop is closed (the run ended without waiting for
        # this worker, e.g. the capacity pre-flight was skipped and the run failed early);
        # nobody is listening any more, so the message has nowhere to go.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(callback, *args)

    def _set_ready(self) -> None:
        if not self._ready.done():
            self._ready.set_result(None)

    def _finish(self, report: WorkerReport | None) -> None:
        self._set_ready()
        if not self._done.done():
            self._done.set_result(report)

    async def ready(self) -> bool:
        """True once the child has booted; False when it died first."""
        await self._ready
        return not self._done.done()

    def begin(self, assignment: WorkerAssignment) -> None:
        self._write(assignment)

    def send(self, command: WorkerCommand) -> None:
        self._write(command)

    def _write(self, message: object) -> None:
        # The process may be gone; its reader thread reports why.
        with self._send_lock, contextlib.suppress(BrokenPipeError, OSError):
            self._conn.send(message)

    async def wait(self) -> WorkerReport | None:
        return await asyncio.shield(self._done)

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()

    @property
    def pid(self) -> int | None:
        return self._process.pid
