"""Workers placed by Spark: N load workers as Spark tasks, each linked back to the controller.

Spark is only the placement and launch engine. The controller listens on a TCP port (the
run's token first, see ``wire``), a background thread of the controller process starts a
SparkContext on the given master, and each worker is one Spark task that imports flowdeck
on its executor, connects back and runs the same worker runtime a local process runs. From
then on the controller steers and merges them exactly as local workers; no Spark code is in
the per-message path.

Why one single-task job per worker (all in one job group) and not one job of N tasks, nor
barrier mode: in a barrier stage the death of one task makes Spark kill and restart every
task of the stage, and in a plain job a task that fails past ``spark.task.maxFailures``
(1 in ``local[N]``) aborts the job and Spark kills its sibling tasks: either way the
surviving hosts' load would die with the lost one, the opposite of "a host lost is a fact,
not a crash". Separate jobs fail alone. Starting together does not need Spark's help: as
with local worker processes, the controller gives every worker its assignment with one
common ``start_at`` once all of them have said hello. Stopping cancels the job group
(``sc.cancelJobGroup``) and stops the SparkContext this placement started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from functools import partial
from typing import Any

from flowdeck.engine.commands import WorkerEvent
from flowdeck.engine.control.address import ControlAddress, server_tls_context
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.process import OnMessage, StartingHost
from flowdeck.engine.spark_workers.link import HostRow, LinkServer, RemoteWorker
from flowdeck.engine.spark_workers.task import TaskOrders, run_task
from flowdeck.engine.tls import TlsOptions, read_pem

log = logging.getLogger(__name__)

#: Seconds from the job's submission for every worker to connect before the run gives up.
CONNECT_TIMEOUT = 80.0
#: Seconds the tasks of workers that reported get to end by themselves before the job group
#: is cancelled.
TASK_END_GRACE = 5.0

_LOCAL = re.compile(r"local(?:\[(?P<slots>\d+|\*)(?:,\d+)?\])?")


def parse_spark_master(text: str) -> str:
    """A master flowdeck can place workers on: ``spark://HOST:PORT[,HOST:PORT]`` or
    ``local``, ``local[N]``, ``local[*]``; SpecError (exit 2) for anything else."""
    master = text.strip()
    if re.fullmatch(r"spark://[^\s/]+:\d+(,[^\s/]+:\d+)*", master) or _LOCAL.fullmatch(master):
        return master
    raise SpecError(
        "spark_master",
        f"--spark-master must be spark://HOST:PORT or local[N], got {text!r}",
    )


def task_slots(master: str) -> int | None:
    """Tasks a local master runs at once (None: a cluster, whose size is its own)."""
    match = _LOCAL.fullmatch(master)
    if match is None:
        return None
    slots = match.group("slots")
    if slots is None:
        return 1
    return (os.cpu_count() or 1) if slots == "*" else int(slots)


def workers_for(master: str, workers: int) -> int:
    """How many remote workers to place: ``workers`` when given, a local master's slots
    for ``-1``; SpecError when that cannot work."""
    slots = task_slots(master)
    if workers == -1:
        if slots is None:
            raise SpecError(
                "workers", f"--spark-master {master} needs --workers N (how many load workers)"
            )
        return slots
    if workers < 1:
        raise SpecError("workers", f"--spark-master needs --workers 1 or more, got {workers}")
    if slots is not None and workers > slots:
        raise SpecError(
            "workers",
            f"{master} runs {slots} task(s) at once and --workers {workers} needs {workers}: "
            f"use local[{workers}]",
        )
    return workers


def _flowdeck_version() -> str:
    from flowdeck.engine.controller import _flowdeck_version as version

    return str(version())


def _first_line(exc: BaseException) -> str:
    """The line of a Spark job's failure that says what went wrong: the Python error
    inside the Java stack trace when there is one (``ModuleNotFoundError: ...``)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    crashed = re.search(r"Python worker exited unexpectedly( \(crashed\))?", str(exc))
    if crashed:
        return f"its process died ({crashed[0]})"
    python = [line for line in lines if re.match(r"[A-Za-z_.]*(Error|Exception|Exit): ", line)]
    python = [line for line in python if not line.startswith(("org.", "java.", "py4j."))]
    chosen = python[-1] if python else (lines[0] if lines else type(exc).__name__)
    return chosen[:300]


class SparkPlacement:
    """Launches a run's workers as Spark tasks (see the module docstring).

    ``listen`` is where the controller waits for its workers (127.0.0.1 by default, a free
    port); beyond this machine the link needs TLS: ``tls.cert_file`` (and key), whose
    certificate every worker then trusts alone.
    """

    def __init__(
        self,
        master: str,
        *,
        workers: int = -1,
        listen: ControlAddress | None = None,
        tls: TlsOptions | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.master = parse_spark_master(master)
        self.workers = workers_for(self.master, workers)
        self.listen = listen or ControlAddress()
        tls = tls or TlsOptions()
        if not self.listen.loopback and not tls.cert_file:
            raise SpecError(
                "spark_listen",
                f"--spark-listen {self.listen} is beyond this machine and the run's token "
                "would cross the network in clear: give --spark-cert-file and --spark-key-file",
            )
        self._server_cert = (
            read_pem("worker link certificate", tls.cert_file, "--spark-cert-file")
            if tls.cert_file
            else ""
        )
        self._server_tls = server_tls_context(tls)
        self._connect_timeout = connect_timeout
        self._group = f"flowdeck-{uuid.uuid4().hex[:12]}"
        self._hosts: dict[int, RemoteWorker] = {}
        self._server: LinkServer | None = None
        self._context: Any = None
        self._owns_context = False
        self._threads: list[threading.Thread] = []
        self._closing = False
        self._closed = False
        self._on_message: OnMessage = lambda message: None
        self.address = ""
        #: Seconds from launch until the SparkContext was up, and until every worker said hello.
        self.context_seconds = 0.0
        self.rows: list[HostRow] = []

    # -- the Placement face -----------------------------------------------------------------

    def describe(self, workers: int) -> str:
        return f"{workers} Spark task{'s' if workers != 1 else ''} on {self.master}"

    async def launch(
        self, workers: int, runtime: str, on_message: OnMessage
    ) -> Sequence[StartingHost]:
        loop = asyncio.get_running_loop()
        self._on_message = on_message
        from flowdeck.engine.control.server import new_token  # the control API's token

        token = new_token()
        version = _flowdeck_version()
        self._hosts = {w: RemoteWorker(w, workers, on_message) for w in range(workers)}
        self._server = LinkServer(token, self._hosts, version=version, on_refused=self._refused)
        port = await self._server.start(self.listen.host, self.listen.port, self._server_tls)
        self.address = str(ControlAddress(self.listen.host, port))
        orders = TaskOrders(self.listen.host, port, token, runtime, version, self._server_cert)
        began = time.monotonic()
        self._context = await asyncio.to_thread(self._spark_context)
        self.context_seconds = time.monotonic() - began
        for worker in self._hosts:
            thread = threading.Thread(
                target=self._run_job,
                args=(orders, worker, loop),
                name=f"flowdeck-spark-worker-{worker}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()
        loop.call_later(self._connect_timeout, self._give_up_waiting)
        return list(self._hosts.values())

    async def close(self) -> None:
        """End every task of the run (the ones that reported end by themselves), stop the
        SparkContext this placement started, say the per-host figures."""
        if self._closed:
            return
        self._closed = True
        self._closing = True
        await asyncio.to_thread(self._end_jobs)
        if self._server is not None:
            await self._server.close()
        self.rows = self.host_rows()
        if self.rows:
            hosts = len({row.host for row in self.rows})
            self._on_message(
                WorkerEvent(
                    -1,
                    RunEvent(
                        at=time.time(),
                        kind=EventKind.INFO,
                        message=f"per-host figures of {len(self.rows)} Spark worker(s) on "
                        f"{hosts} host(s): "
                        + "; ".join(
                            f"{r.host} worker {r.worker}: {r.published:,} published "
                            f"({r.publish_rate:,.1f}/s){' LOST' if r.lost else ''}"
                            for r in self.rows
                        ),
                        detail={"hosts": [row.to_json() for row in self.rows]},
                    ),
                )
            )

    # -- figures ------------------------------------------------------------------------------

    def host_rows(self) -> list[HostRow]:
        """One row per worker that connected: its host, clients, counts, rates and CPU."""
        rows = []
        for worker, host in sorted(self._hosts.items()):
            if host.hello is None:
                continue
            report = host.report
            snapshot = host.last_snapshot
            counters = report.counters if report is not None else None
            if counters is None and snapshot is not None:
                counters = snapshot.counters
            published = counters.published if counters is not None else 0
            consumed = counters.consumed if counters is not None else 0
            if report is not None:
                publish_seconds = report.active.publish_seconds
                consume_seconds = report.active.consume_seconds
            else:  # lost: over its own time up to its last snapshot
                span = snapshot.at - host.started_at if snapshot and host.started_at else 0.0
                publish_seconds = consume_seconds = max(0.0, span)
            publishers, consumers = host.client_ids()
            usage = host.usage
            rows.append(
                HostRow(
                    worker=worker,
                    host=host.hello.host,
                    pid=host.hello.pid,
                    publishers=len(publishers),
                    consumers=len(consumers),
                    published=published,
                    consumed=consumed,
                    publish_rate=published / publish_seconds if publish_seconds else 0.0,
                    consume_rate=consumed / consume_seconds if consume_seconds else 0.0,
                    cpu_seconds=usage.cpu_seconds if usage else None,
                    wall_seconds=usage.wall_seconds if usage else None,
                    lost=host.lost,
                )
            )
        return rows

    # -- Spark, on threads --------------------------------------------------------------------

    def _spark_context(self) -> Any:
        try:
            from pyspark import SparkConf, SparkContext
        except ImportError:
            raise FlowdeckError(
                "--spark-master needs PySpark: pip install pyspark (scripts/setup installs it)"
            ) from None
        active = SparkContext._active_spark_context
        if active is not None:
            if active.master != self.master:
                raise FlowdeckError(
                    f"this process already runs Spark on {active.master}; it cannot place "
                    f"workers on {self.master} too"
                )
            return active
        conf = (
            SparkConf()
            .setMaster(self.master)
            .setAppName("flowdeck load workers")
            .set("spark.driver.host", self.listen.host)
            .set("spark.driver.bindAddress", self.listen.host)
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.log.level", "FATAL")
        )
        # The tasks run this flowdeck's interpreter unless told otherwise (PySpark reads it
        # from the environment when the context starts); on other hosts it must exist too.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", self.listen.host)
        try:
            context = SparkContext(conf=conf)
        except Exception as exc:
            raise FlowdeckError(
                f"Spark on {self.master} could not start: {_first_line(exc)}"
            ) from None
        context.setLogLevel("FATAL")  # a lost task is an event of the run, not a stack trace
        self._owns_context = True
        return context

    def _run_job(self, orders: TaskOrders, worker: int, loop: asyncio.AbstractEventLoop) -> None:
        """One worker's job, on a thread of its own (a job blocks its thread until it ends)."""
        context = self._context
        try:
            context.setJobGroup(self._group, f"flowdeck load worker {worker}", True)
            outcome = context.parallelize([worker], 1).map(partial(run_task, orders)).collect()
            log.debug("worker %d's Spark task ended: %s", worker, outcome)
        except Exception as exc:
            if not self._closing:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._task_failed, worker, _first_line(exc))

    def _task_failed(self, worker: int, reason: str) -> None:
        host = self._hosts[worker]
        if not host.connected:
            host.fail(f"its Spark task failed: {reason}{self._interpreter_hint(reason)}")
        elif not self._closing:
            self._on_message(
                WorkerEvent(
                    worker,
                    RunEvent(
                        at=time.time(),
                        kind=EventKind.INFO,
                        message=f"worker {worker}'s Spark task ended: {reason}",
                        detail={"worker": worker, "spark_task": "failed"},
                    ),
                )
            )

    def _interpreter_hint(self, reason: str) -> str:
        """What to do when a task's Python has no flowdeck: a SparkContext this process
        already ran (and the placement reused) took its tasks' interpreter from
        PYSPARK_PYTHON when it started, else ``python3`` on PATH, maybe not this flowdeck's."""
        if "No module named 'flowdeck'" not in reason or self._owns_context:
            return ""
        python = getattr(self._context, "pythonExec", "python3")
        return (
            f" (this process's SparkContext runs its tasks with {python}: start it with "
            f"PYSPARK_PYTHON={sys.executable})"
        )

    def _give_up_waiting(self) -> None:
        for worker, host in self._hosts.items():
            if not host.connected:
                host.fail(
                    f"worker {worker} did not connect within {self._connect_timeout:g} s: the "
                    f"cluster at {self.master} may have fewer free task slots than the "
                    f"{len(self._hosts)} workers asked, or its executors cannot reach "
                    f"{self.address} (see docs/spark-workers.md)"
                )

    def _refused(self, reason: str) -> None:
        self._on_message(
            WorkerEvent(
                -1,
                RunEvent(at=time.time(), kind=EventKind.INFO, message=f"warning: {reason}"),
            )
        )

    def _end_jobs(self) -> None:
        deadline = time.monotonic() + TASK_END_GRACE
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        context = self._context
        if context is None:
            return
        with contextlib.suppress(Exception):
            context.cancelJobGroup(self._group)
        for thread in self._threads:
            thread.join(30.0)
        if self._owns_context:
            with contextlib.suppress(Exception):
                context.stop()
