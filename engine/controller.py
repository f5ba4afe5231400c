"""The controller: one run, from broker check to summary, steered while it goes.

It prepares the broker (topology), starts the recorder, the broker collectors and N workers,
turns the workers' per-second snapshots into one :class:`Tick` a second, sends every
:class:`Change` to all workers and marks it applied once all of them said so, fires the
schedule's steps at their times, and at the end stops the workers, merges their reports
into the data-safety accounting and builds the :class:`RunSummary`.

What acts beside the run is handed to it as collaborators (``engine.run_context``): node
faults (``engine.node_faults``: a schedule's ``fault kill 2``, the cockpit's node key), the
broker's room for the run's connections (``engine.capacity``) and the session on disk
(``engine.run_recording``), and the broker's counts of the run's queues that check the
accounting when a worker never reported (``engine.queue_counts``). Whoever builds the
controller makes them with their settings; the defaults record nothing, check the broker's
capacity and act on the broker's own private nodes.

A worker that ends without its report (its process killed, its host gone) leaves the run's
figures incomplete: its last snapshot's counts stand in for it, the summary says which
figures miss what, and ``lost`` is at most what the broker's counts allow.

Everything runs on the caller's asyncio loop and nothing in it blocks: worker processes
talk through pipes read on threads, the recorder buffers in memory, the collectors poll in
tasks of their own. Front-ends (CLI, TUI, tests) subscribe with :meth:`add_listener` and see
``Tick``, ``BrokerSample``, ``RunEvent`` and finally ``RunSummary``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from flowdeck.collectors import Broker, LocalNodes
from flowdeck.collectors.broker_uri import mask_text
from flowdeck.collectors.client_names import new_run_tag
from flowdeck.collectors.model import BrokerSample
from flowdeck.engine import topology
from flowdeck.engine.accounting import (
    LostWorker,
    data_safety,
    incomplete_figures,
    stand_in_report,
    with_lost_workers,
)
from flowdeck.engine.aggregate import SnapshotAggregator, assemble_tick
from flowdeck.engine.broker_changes import BrokerChanges
from flowdeck.engine.capacity import CapacityCheck
from flowdeck.engine.change import Change, NodeFault, Setting, apply_change
from flowdeck.engine.commands import (
    ApplyChange,
    ChangeApplied,
    Stop,
    WorkerAssignment,
    WorkerEvent,
    WorkerMessage,
)
from flowdeck.engine.credentials import broker_of
from flowdeck.engine.delivery import needs_a_look, where_messages_went
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.honoured import Unhonoured, unhonoured
from flowdeck.engine.ledger import ChangeLedger, Pending, Schedule
from flowdeck.engine.node_faults import NodeFaults
from flowdeck.engine.phase_figures import PhaseTable
from flowdeck.engine.process import (
    DEFAULT_RUNTIME,
    InProcessWorker,
    Placement,
    ProcessWorker,
    StartingHost,
    WorkerFailed,
    WorkerHost,
    WorkerLost,
    load_runtime,
)
from flowdeck.engine.progress import DataSafety, PendingChange, RunSummary, Tick, mean_rate
from flowdeck.engine.protocols import protocol_line
from flowdeck.engine.queue_counts import QueueCounter, QueueCounts
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.settings import steerable
from flowdeck.engine.sinks import Listener, ListenerSink, PrometheusRow, RunStarted, Sink, Update
from flowdeck.engine.snapshot import (
    ActiveTimes,
    ClientSnapshot,
    Counters,
    Settings,
    WorkerReport,
)
from flowdeck.engine.sources_thread import SourcesThread
from flowdeck.engine.spec import RunSpec, ScheduleStep, settings_of
from flowdeck.engine.tls import INSECURE_WARNING, tls_options

log = logging.getLogger(__name__)

__all__ = ["Controller", "Listener", "Update", "apply_to_settings", "resolve_workers"]

OUTCOME_COMPLETED = "completed"
OUTCOME_STOPPED = "stopped"
OUTCOME_FAILED = "failed"

#: Seconds a worker process may take to boot before the run gives up on it.
BOOT_TIMEOUT = 90.0
#: Seconds past the drain a worker may take to report before it is killed.
REPORT_GRACE = 30.0
#: The loop waking this many seconds later than it meant to is a stall of the controller.
STALL_AFTER = 2.0
#: Most seconds a stalled controller waits for the workers' snapshots taken meanwhile.
CATCH_UP_WAIT = 3.0


def resolve_workers(workers: int) -> int:
    """Worker processes to start: ``-1`` is one per spare core (at least one)."""
    if workers == -1:
        return max(1, (os.cpu_count() or 2) - 1)
    if workers < -1:
        raise FlowdeckError(f"workers must be -1, 0 or more, got {workers}")
    return workers


def apply_to_settings(settings: Settings, change: Change) -> Settings:
    """Settings with an absolute change applied (pause/resume flip ``paused``)."""
    return apply_change(settings, change)


def _flowdeck_version() -> str:
    try:
        return metadata.version("flowdeck")
    except metadata.PackageNotFoundError:
        return "unknown"


class Controller:
    """Runs one RunSpec against one broker; see the module docstring."""

    def __init__(
        self,
        spec: RunSpec,
        *,
        broker: Broker | None = None,
        workers: int | None = None,
        runtime: str = DEFAULT_RUNTIME,
        drain_seconds: float = 5.0,
        cleanup: bool = False,
        placement: Placement | None = None,
        recording: RunRecording | None = None,
        capacity: CapacityCheck | None = None,
        faults: NodeFaults | None = None,
        queue_counts: QueueCounter | None = None,
    ) -> None:
        """``broker``: where the run goes (its nodes, management and Prometheus URLs, the
        statistics interval when known); None: the spec's ``uri`` and URLs.
        ``placement``: where the workers run when not as local processes (e.g.
        engine.spark_workers.SparkPlacement: Spark tasks reached over TCP).

        The collaborators (see ``engine.run_context``): ``recording`` where the session is
        written (default: not recorded; ``RunRecording(root)`` records under ``root``);
        ``capacity`` the check of the broker's sockets (default: refuse a run that does not
        fit; ``CapacityCheck(skip=True)`` warns instead); ``faults`` the node faults
        (default: on the broker's own private nodes, refused on any other broker);
        ``queue_counts`` the broker's counts of the run's queues (default: the management
        API's)."""
        if broker is None:
            if not spec.uri:
                raise FlowdeckError(
                    "no broker to run against: give an AMQP uri (e.g. "
                    "amqp://guest:guest@localhost:5672/%2F)"
                )
            broker = broker_of(spec.uri)
        broker = replace(
            broker,
            management_url=broker.management_url or spec.management_url or None,
            prometheus_url=broker.prometheus_url or spec.prometheus_url or None,
        )
        self.broker = broker
        if spec.connection_allocation == "random" and not spec.allocation_seed:
            # Drawn once for the run and kept in its spec (so recorded): a rerun of the
            # recorded spec puts every client on the same node.
            spec = replace(spec, allocation_seed=random.randrange(1, 2**31))
        self.spec = spec
        self._uri = broker.uri  # node 1: the run's own declarations and clean-up
        self.management_url = broker.usual_management_url
        self.prometheus_url = broker.prometheus_url
        self._workers = resolve_workers(spec.workers if workers is None else workers)
        self._runtime = runtime
        self._drain_seconds = drain_seconds
        self._cleanup = cleanup
        #: Per queue, the position of its leader's uri (``WorkerAssignment.queue_leaders``).
        self._queue_leaders: tuple[int, ...] = ()
        self._stream_port = 5552
        self._placement = placement
        self._recording = recording or RunRecording()
        self._capacity = capacity or CapacityCheck()
        self._faults = faults or NodeFaults()
        self._queue_counts = queue_counts or QueueCounter()
        for collaborator in (self._recording, self._capacity, self._faults, self._queue_counts):
            collaborator.bind(self)
        #: In every connection name of the run, so the broker's lists tell its clients.
        self.run_tag = new_run_tag()

        self.settings: Settings = settings_of(spec)
        self._requested_spec = spec  # relative changes resolve against what was asked last
        self._ledger = ChangeLedger()
        self._pending = self._ledger.pending  # the same dict: changes on their way, by id
        self._schedule = Schedule(spec.schedule)
        self._faults.check_schedule(spec.schedule)
        self._broker_changes = BrokerChanges(broker, self.run_tag)
        self._broker_changes.check_schedule(spec.schedule)
        #: Broker setting changes being applied on the nodes (waited for at the run's end).
        self._broker_tasks: list[asyncio.Task[None]] = []

        #: The run's per-phase figures as they stand (``figures.run``), followed from the
        #: start: what the JSON summary, the thresholds and the autopilot judge by.
        self.phase_table = PhaseTable()
        self._sinks: list[Sink] = [self.phase_table]
        self.events: list[RunEvent] = []
        self.last_tick: Tick | None = None
        self.last_broker_sample: BrokerSample | None = None
        self.summary: RunSummary | None = None

        self._state = "new"
        self._hosts: dict[int, WorkerHost] = {}
        self._alive: set[int] = set()
        self._reports: dict[int, WorkerReport] = {}
        #: Workers gone without their report: when the run learnt it, and why.
        self._gone: dict[int, tuple[float, str]] = {}
        self._failures: list[str] = []
        self._errors: list[str] = []
        self._aggregator = SnapshotAggregator()
        self.started_at = 0.0
        self._load_ended_at = 0.0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._finishing: asyncio.Task[RunSummary] | None = None
        # On a thread of its own: parsing a busy broker's management answers would otherwise
        # hold this loop, and the cockpit's keys wait on it (engine/sources_thread.py).
        self._sources = SourcesThread(
            spec,
            broker=broker,
            on_sample=self._on_broker_sample,
            on_event=self._publish_event,
            on_range=self._on_prometheus_range,
            run_tag=self.run_tag,
        )

    # -- public API ------------------------------------------------------------------------

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """What follows the run (the recorder, the screens, an autopilot...)."""
        return tuple(self._sinks)

    def add_sink(self, sink: Sink) -> None:
        """Follow the run: ``sink`` takes every update from now on (see engine.sinks)."""
        self._sinks.append(sink)

    def add_listener(self, listener: Listener) -> None:
        """Follow the run's ticks, events, broker samples and summary with one function."""
        self.add_sink(ListenerSink(listener))

    def report_event(
        self,
        kind: EventKind,
        message: str,
        *,
        at: float | None = None,
        change_id: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> RunEvent:
        """Log an event from a part beside the run (a collaborator, the control endpoint's
        trouble): it is recorded and shown like the run's own."""
        return self._event(kind, message, at=at, change_id=change_id, detail=detail)

    @property
    def uri(self) -> str:
        """Node 1's AMQP URI, with its password: show ``broker.redacted`` instead."""
        return self._uri

    @property
    def workers(self) -> int:
        """Worker processes of this run (0 = in-process)."""
        return self._workers

    @property
    def running(self) -> bool:
        return self._state == "running"

    @property
    def under_way(self) -> bool:
        """Starting or running: not yet stopping or ended."""
        return self._state in ("starting", "running")

    @property
    def pending(self) -> tuple[PendingChange, ...]:
        return self._ledger.view(len(self._hosts))

    @property
    def requested_settings(self) -> Settings:
        """The settings as asked for so far, pending changes included: what a key step
        and a relative change (``inflight=+10``) both start from."""
        settings = replace(settings_of(self._requested_spec), paused=self.settings.paused)
        for _, pending in sorted(self._pending.items()):
            if steerable(pending.change.setting) is None:  # a pause or resume on its way
                settings = apply_change(settings, pending.change)
        return settings

    @property
    def next_step(self) -> ScheduleStep | None:
        """The next schedule step, at the time it fires (None: none left, or held)."""
        return self._schedule.next_step()

    @property
    def schedule_held(self) -> bool:
        """Whether an operator's change holds the schedule (see engine.ledger.Schedule)."""
        return self._schedule.held

    def resume_schedule(self) -> None:
        """Let a held schedule go on: its steps left keep their spacing from now."""
        if not self._schedule.held:
            raise FlowdeckError("the schedule is not paused")
        held_for = self._schedule.resume(time.time() - self.started_at)
        step = self._schedule.next_step()
        then = (
            f"; next step {step.change.describe()} in "
            f"{max(0.0, step.at - (time.time() - self.started_at)):.0f} s"
            if step
            else ""
        )
        self._event(
            EventKind.INFO,
            f"schedule resumed after {held_for:.0f} s held{then}",
            detail={"schedule": "resumed", "held_s": round(held_for, 3)},
        )
        self._wake.set()

    def _hold_schedule(self, change_id: int, change: Change, source: str) -> None:
        """An operator's change holds the schedule: no step overwrites what they set."""
        if not self._schedule.hold(time.time() - self.started_at):
            return
        step = self._schedule.waiting_step()
        assert step is not None
        self._event(
            EventKind.INFO,
            f"schedule paused by change #{change_id} ({change.describe()}, {source}): "
            f"its next step ({step.change.describe()}) waits until the schedule is resumed "
            "(S in the cockpit)",
            change_id=change_id,
            detail={"schedule": "paused", "source": source},
        )

    async def start(self) -> None:
        """Check the broker, declare the topology, start recorder, collectors and workers.

        Raises BrokerUnavailable when the broker cannot be reached (with what to check) and
        FlowdeckError when it cannot take the spec; nothing is left running then.
        """
        if self._state != "new":
            raise FlowdeckError("this run was already started; make a new Controller")
        self._state = "starting"
        declared: topology.Declared | None = None
        try:
            self._check_consumer_node()
            await self._capacity.before_start(self._sources)
            ignored = await self._check_honoured()
            await self._sources.prepare_queues()
            declared = await topology.declare(self.spec, self._uri)
            self._queue_counts.begin(self.spec.queue_names)
            placement = await self._place_consumers()
            if self.spec.protocol == "stream":
                self._stream_port = await self._sources.stream_port()
            await self._recording.start(self.spec)
            await self._start_workers()
        except BaseException:
            self._state = "ended"
            self._queue_counts.close()
            for host in self._hosts.values():
                host.kill()
            if declared is not None:  # a run that did not start leaves nothing on the broker
                with contextlib.suppress(Exception):
                    await topology.undeclare(self.broker.uris, declared)
            if self._placement is not None:
                with contextlib.suppress(Exception):
                    await self._placement.close()
            self._recording.close(OUTCOME_FAILED, {}, time.time(), "the run could not start")
            with contextlib.suppress(Exception):
                await self._sources.aclose()
            raise
        self._state = "running"
        if tls_options(self._uri).insecure:
            self._event(EventKind.INFO, f"warning: {INSECURE_WARNING}", at=self.started_at)
        where = self.broker.address
        workers = (
            self._placement.describe(self._workers)
            if self._placement is not None
            else f"{self._workers or 'no'} worker process{'es' if self._workers != 1 else ''}"
        )
        self._event(
            EventKind.RUN_STARTED,
            f"run {self.spec.name!r} started against {where} with {workers}",
            at=self.started_at,
            detail={"spec": self.spec.redacted(), "workers": self._workers},
        )
        if placement:
            self._event(EventKind.INFO, placement, at=self.started_at)
        if self.spec.protocol != "amqp0.9.1":
            self._event(EventKind.INFO, protocol_line(self.spec), at=self.started_at)
        for line, version in ignored:
            self._event(
                EventKind.INFO,
                line.describe(version),
                at=self.started_at,
                detail=line.detail(version),
            )
        self._event(
            EventKind.PHASE,
            "phase 0: start",
            at=self.started_at,
            detail={"index": 0, "label": "start"},
        )
        self._tasks.append(asyncio.create_task(self._run_loop(), name="flowdeck-controller"))
        await self._sources.start()

    def request(self, change: Change, source: str = "operator") -> int:
        """Send a change to every worker; its id. Relative values resolve against the
        settings asked for so far; a value the run cannot take raises SpecError.
        """
        if self._state != "running":
            raise FlowdeckError("changes apply only while the run is running")
        if steerable(change.setting) is not None:
            change = change.resolved(self._requested_spec.setting(change.setting))
        self._broker_changes.check(change)  # refused in one line on a broker not run here
        connections_before = topology.connections_needed(self._requested_spec)
        self._requested_spec = self._requested_spec.with_change(change)  # SpecError if bad
        added = topology.connections_needed(self._requested_spec) - connections_before
        now = time.time()
        change_id = self._ledger.open(change, source, now, self._alive)
        self._event(
            EventKind.CHANGE_REQUESTED,
            f"change #{change_id} requested by {source}: {change.describe()}",
            at=now,
            change_id=change_id,
            detail=self._change_detail(change, source),
        )
        if added > 0:
            self._capacity.warn_change(
                change_id,
                added=added,
                total=topology.connections_needed(self._requested_spec),
                open_connections=self.last_tick.connections if self.last_tick is not None else 0,
                sample=self._sources.management_sample,
            )
        if change.setting is Setting.BROKER:
            # The nodes take it first; then the workers see a mark, which opens the phase.
            self._broker_tasks.append(
                asyncio.create_task(self._apply_broker_change(change_id, change))
            )
        else:
            self._send_change(change_id, change)
        if source != "schedule":
            self._hold_schedule(change_id, change, source)
        return change_id

    def _send_change(self, change_id: int, change: Change) -> None:
        for worker in sorted(self._alive):
            self._hosts[worker].send(ApplyChange(change_id, change))
        self._check_applied(change_id)

    async def _apply_broker_change(self, change_id: int, change: Change) -> None:
        done = await self._broker_changes.apply(change)
        kind = EventKind.INFO if done.taken else EventKind.ERROR
        self._event(kind, done.message, change_id=change_id, detail=done.detail)
        if not done.taken:
            self._ledger.drop(change_id)
        elif self._state == "running":
            self._send_change(change_id, Change(Setting.MARK, label=change.describe()))

    @property
    def local_nodes(self) -> LocalNodes | None:
        """The private node or cluster the run's broker is, which faults act on (None: a
        broker flowdeck does not run, on which faults are refused)."""
        return self._faults.local

    def fault(self, fault: NodeFault, source: str = "operator") -> int:
        """Lose or bring back one node (see NodeFault) while the run goes; the id of the
        phase mark it opens. The fault itself runs on a thread (a start takes seconds) and
        says when it is done. SpecError for a node the broker has not, FlowdeckError when
        the broker is not one flowdeck runs or the run is not running."""
        return self._faults.start(fault, source)

    def skip_step(self) -> None:
        """Apply the next schedule step now instead of at its time (a held schedule goes
        on from it: asking for its next step is going on with it)."""
        if not self._schedule:
            raise FlowdeckError("the schedule has no steps left")
        if self._schedule.held:
            self.resume_schedule()
        step = self._schedule.take_next()
        assert step is not None
        self._fire(step, early=True)

    async def wait(self) -> RunSummary:
        """The summary, once the run has ended (its duration, a stop or a failure)."""
        while self._finishing is None:
            if self._state in ("new", "ended") and self.summary is None:
                raise FlowdeckError("the run has not started")
            await asyncio.sleep(0.05)
        return await asyncio.shield(self._finishing)

    async def stop(self, reason: str = "stopped by operator") -> RunSummary:
        """Stop publishing, let consumers drain, collect reports; the summary."""
        if self._finishing is None:
            if self._state != "running":
                raise FlowdeckError("the run has not started")
            self._begin_finish(OUTCOME_STOPPED, reason)
        assert self._finishing is not None
        return await asyncio.shield(self._finishing)

    def kill(self) -> None:
        """End every worker at once (a second Ctrl-C): no drain, no report."""
        for host in self._hosts.values():
            host.kill()

    # -- start -----------------------------------------------------------------------------

    async def _start_workers(self) -> None:
        if self._workers == 0:
            runtime = load_runtime(self._runtime)
            self.started_at = time.time()
            host = InProcessWorker(self._assignment(0, 1), runtime, self._on_message)
            self._hosts[0] = host
            self._alive.add(0)
            self._announce_start()
            return
        processes: Sequence[StartingHost] = (
            await self._placement.launch(self._workers, self._runtime, self._on_message)
            if self._placement is not None
            else [ProcessWorker(w, self._runtime, self._on_message) for w in range(self._workers)]
        )
        for process in processes:
            self._hosts[process.worker] = process
        try:
            booted = await asyncio.wait_for(
                asyncio.gather(*(p.ready() for p in processes)), BOOT_TIMEOUT
            )
        except TimeoutError:
            raise FlowdeckError(
                f"worker processes did not start within {BOOT_TIMEOUT:g} s; the machine may "
                "be overloaded: try --workers 0 or fewer workers"
            ) from None
        if not all(booted):
            reasons = "; ".join(self._failures) or "no reason given"
            raise FlowdeckError(f"worker processes failed to start: {reasons}")
        # A common origin slightly ahead, so no worker starts behind its rate schedule.
        self.started_at = time.time() + 0.2
        self._announce_start()
        for process in processes:
            process.begin(self._assignment(process.worker, self._workers))
            self._alive.add(process.worker)

    def _announce_start(self) -> None:
        started = RunStarted(self.spec, self.started_at, self._workers)
        self._emit(lambda sink: sink.on_start(started))

    async def _place_consumers(self) -> str:
        """Where each queue's leader is, for consumers placed by it (``consumer_node``);
        the line that says so ('' when consumers spread as publishers do)."""
        spec = self.spec
        if spec.consumer_node == "spread" or not spec.consumers:
            return ""
        leaders = await self._sources.queue_leaders()
        self._queue_leaders = tuple(leaders[name][1] for name in spec.queue_names)
        where = "on a node other than" if spec.consumer_node == "off-leader" else "on"
        led = ", ".join(f"{name} by {node}" for name, (node, _) in leaders.items())
        return f"consumers {where} their queue's leader ({led})"

    async def _check_honoured(self) -> list[tuple[Unhonoured, str]]:
        """What of the spec this broker's version ignores (said once the run starts); a
        SpecError, before anything is declared, for what it rejects (engine/honoured.py)."""
        version = await topology.broker_version(self._uri)
        found = unhonoured(self.spec, version)
        if rejected := [line.describe(version) for line in found if line.verdict == "rejects"]:
            raise SpecError("queue_type", "; ".join(rejected))
        return [(line, version) for line in found]

    def _check_consumer_node(self) -> None:
        """SpecError, before anything is declared, for consumers placed by their queue's
        leader on a single node: there is no other node to sit on."""
        spec = self.spec
        if spec.consumer_node != "spread" and spec.consumers and len(self.broker.uris) < 2:
            raise SpecError(
                "consumer_node",
                f"consumer_node = {spec.consumer_node} needs a cluster's node uris, the run "
                "has one: give every node's uri (comma-separated; `flowdeck broker start "
                "--nodes 3` starts a cluster) or set consumer_node = spread",
            )

    def _assignment(self, worker: int, workers: int) -> WorkerAssignment:
        return WorkerAssignment(
            worker=worker,
            workers=workers,
            spec=self.spec,
            start_at=self.started_at,
            uris=self.broker.uris,
            queue_leaders=self._queue_leaders,
            run_tag=self.run_tag,
            stream_port=self._stream_port,
        )

    # -- messages from workers and collectors ------------------------------------------------

    def _on_message(self, message: WorkerMessage | WorkerFailed | WorkerLost) -> None:
        try:
            if isinstance(message, ClientSnapshot):
                self._aggregator.add(message)
                self._emit(lambda sink: sink.on_snapshot(message))
            elif isinstance(message, ChangeApplied):
                self._ledger.worker_applied(
                    message.change_id,
                    message.worker,
                    message.at,
                    message.publishers,
                    message.consumers,
                )
                self._check_applied(message.change_id)
            elif isinstance(message, WorkerEvent):
                self._publish_event(message.event)
            elif isinstance(message, WorkerReport):
                self._reports[message.worker] = message
                self._alive.discard(message.worker)
            elif isinstance(message, WorkerFailed):
                self._worker_failed(message)
            elif isinstance(message, WorkerLost):
                self._worker_lost(message)
        except Exception:  # never let one odd message end the controller
            log.exception("controller could not handle %r", type(message).__name__)

    def _worker_failed(self, failure: WorkerFailed) -> None:
        reason = f"worker {failure.worker}: {failure.reason}"
        self._failures.append(reason)
        if failure.worker not in self._reports:
            self._gone.setdefault(failure.worker, (time.time(), failure.reason))
        self._alive.discard(failure.worker)
        self._event(EventKind.ERROR, reason, detail={"worker": failure.worker})
        for change_id in list(self._pending):
            self._check_applied(change_id)
        if self._state == "running" and self._finishing is None:
            self._begin_finish(OUTCOME_FAILED, f"worker {failure.worker} failed: {failure.reason}")

    def _worker_lost(self, lost: WorkerLost) -> None:
        """A remote worker's host is gone: recorded, its stand-in report counted, and the
        run goes on with the others (it ends only when none is left)."""
        if lost.worker not in self._alive:
            return
        self._alive.discard(lost.worker)
        self._reports[lost.worker] = lost.report
        self._gone[lost.worker] = (lost.event.at, str(lost.event.detail.get("reason", "lost")))
        self._errors.append(lost.event.message)
        self._publish_event(lost.event)
        for change_id in list(self._pending):
            self._check_applied(change_id)
        if not self._alive and self._state == "running" and self._finishing is None:
            self._begin_finish(OUTCOME_FAILED, "every worker was lost")

    def _on_broker_sample(self, sample: BrokerSample) -> None:
        """A broker sample from the sources, before the events it causes."""
        self.last_broker_sample = sample
        self._emit(lambda sink: sink.on_broker_sample(sample))

    def _on_prometheus_range(self, rows: Sequence[PrometheusRow]) -> None:
        """The broker's Prometheus series over the run, kept by the sources at the end."""
        self._emit(lambda sink: sink.on_prometheus_range(rows))

    # -- changes and schedule ------------------------------------------------------------------

    def _change_detail(self, change: Change, source: str) -> dict[str, Any]:
        return {
            "setting": change.setting.value,
            "value": change.value,
            "label": change.label,
            "change": change.describe(),
            "source": source,
        }

    def _check_applied(self, change_id: int) -> None:
        pending = self._ledger.complete(change_id, self._alive)
        if pending is None:
            return
        applied_at = max(pending.applied.values(), default=time.time())
        change, shortfall = self._opened(pending)
        self.settings = apply_to_settings(self.settings, change)
        detail = self._change_detail(change, pending.source)
        detail.update(
            requested_at=pending.requested_at,
            applied_at=applied_at,
            delay_s=round(applied_at - pending.requested_at, 6),
            workers=len(pending.applied),
        )
        if shortfall:
            detail.update(asked=pending.change.value, opened=change.value)
        self._event(
            EventKind.CHANGE_APPLIED,
            f"change #{change_id} in effect in every worker after "
            f"{applied_at - pending.requested_at:.3f} s: {change.describe()}{shortfall}",
            at=applied_at,
            change_id=change_id,
            detail=detail,
        )
        index, phase = self._ledger.next_phase(change)
        self._event(
            EventKind.PHASE,
            f"phase {index}: {phase}",
            at=applied_at,
            change_id=change_id,
            detail={"index": index, "label": phase},
        )

    def _opened(self, pending: Pending) -> tuple[Change, str]:
        """The change as it took effect, and what fell short of what was asked ('' if
        nothing): a publishers/consumers change counts the clients the workers opened."""
        change = pending.change
        opened = pending.opened_clients()
        if opened is None or change.value is None:
            return change, ""
        asked = int(change.value)
        if opened >= asked:
            return change, ""
        # Later relative changes (publishers=+10) count from what is open, not from the ask.
        if not self._ledger.waiting_on(change.setting):
            self._requested_spec = self._requested_spec.with_change(replace(change, value=opened))
        return replace(change, value=opened), (
            f" ({asked} asked, {opened} connected: the broker took no more connections; "
            "see the error above)"
        )

    def _fire(self, step: ScheduleStep, *, early: bool = False) -> None:
        try:
            if step.fault is not None:
                self.fault(step.fault, source="schedule")
            else:
                self.request(step.change, source="schedule")
        except FlowdeckError as exc:
            self._event(
                EventKind.ERROR,
                f"schedule step at {step.at:g} s ({step.describe()}) skipped: {exc}",
            )
        if early:
            self._wake.set()

    # -- the loop ------------------------------------------------------------------------------

    async def _run_loop(self) -> None:
        end_at = self.started_at + self.spec.duration
        second = 1  # the run second the next tick closes
        last_second = int(self.spec.duration + 1e-9)
        meant = time.time()  # when the loop meant to wake
        while self._state == "running":
            now = time.time()
            stalled = now - meant if now - meant > STALL_AFTER else 0.0
            if stalled:
                now = await self._stalled(meant, now)
            for step in self._schedule.due(now - self.started_at):
                self._fire(step)
            # One tick per run second, in order, named by the second it closes. A loop that
            # wakes late (a loaded machine, a stall) ticks every second it missed, each at
            # that second's end over the snapshots taken by then; one tick at the late time
            # instead would merge them and misname the second.
            while second <= last_second and now >= self.started_at + second:
                missed = now >= self.started_at + second + 1.0
                at = self.started_at + second if missed else now
                self._tick(at, second=second, stalled=stalled if missed else 0.0)
                second += 1
            if now >= end_at:
                self._begin_finish(OUTCOME_COMPLETED, "duration reached")
                return
            wake_at = min(self.started_at + second, end_at)
            if (upcoming := self._schedule.next_step()) is not None:
                wake_at = min(wake_at, self.started_at + upcoming.at)
            self._wake.clear()
            meant = wake_at  # work done since now counts: a stop during a tick is a stall too
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, wake_at - time.time()))

    async def _stalled(self, meant: float, now: float) -> float:
        """The loop woke ``now - meant`` seconds late (the process was stopped, or something
        held the loop): record the stall, then wait (briefly) for the snapshots the workers
        took meanwhile, so the seconds it missed show what the workers did, not zeros. The
        time it goes on from."""
        stall = now - meant
        self._event(
            EventKind.CONTROLLER_STALLED,
            f"controller stalled {stall:.1f} s (from {meant - self.started_at:.1f} s to "
            f"{now - self.started_at:.1f} s into the run): it saw nothing live meanwhile; those "
            "seconds are filled in from the workers' snapshots",
            at=now,
            detail={"stalled_s": round(stall, 3), "from": meant, "to": now},
        )
        deadline = time.time() + CATCH_UP_WAIT
        while time.time() < deadline and self._state == "running":
            caught_up = all(
                (last := self._aggregator.last_snapshot(worker)) is not None
                and last.at >= now - 1.5  # a snapshot a second: the newest has come
                for worker in self._alive
            )
            if caught_up:
                break
            await asyncio.sleep(0.05)
        return time.time()

    def _tick(
        self, now: float, final: Counters | None = None, second: int = 0, stalled: float = 0.0
    ) -> Tick:
        """Aggregate and publish one Tick; ``final`` gives the closing totals from the
        workers' reports (later than their last snapshot), ``second`` the run second the
        tick closes (0: the closing tick), ``stalled`` the seconds the controller had
        stalled when it made this tick late."""
        self._recording.check()
        agg = self._aggregator.tick(now)
        for error in agg.errors:
            if error not in self._errors:
                self._errors.append(error)
        tick = assemble_tick(
            agg,
            at=now,
            started_at=self.started_at,
            duration=self.spec.duration,
            settings=self.settings,
            pending=self.pending,
            phase=self._ledger.phase,
            phase_index=self._ledger.phase_index,
            next_step=self.next_step,
            workers=len(self._alive),
            final=final,
            second=second,
            stalled=stalled,
        )
        # The session keeps when each tick was taken and which snapshots it had, so a
        # recording reads back with exactly these ticks.
        self.last_tick = tick
        self._emit(lambda sink: sink.on_tick(tick))
        return tick

    # -- the end -------------------------------------------------------------------------------

    async def _stream_figures(self) -> None:
        """Say what the broker's stream plugin counts of the run's streams as publishing
        stops, its consumers still reading (an event; nothing when it cannot say)."""
        try:
            found = await asyncio.wait_for(self._sources.stream_figures(), 5)
        except (TimeoutError, FlowdeckError):
            found = None
        if found is None:
            return
        self._event(
            EventKind.INFO,
            f"the broker's stream figures as publishing stopped: {found['stream_connections']} "
            f"stream protocol connection(s); {found['consumers']} stream consumer(s), offset lag "
            f"{found['offset_lag']:,} in all; {found['publishers']} stream publisher(s): "
            f"{found['published']:,} published, {found['confirmed']:,} confirmed, "
            f"{found['errored']:,} errored",
            detail=dict(found),
        )

    def _begin_finish(self, outcome: str, reason: str) -> None:
        if self._finishing is None:
            self._state = "stopping"
            self._wake.set()
            self._finishing = asyncio.create_task(
                self._finish(outcome, reason), name="flowdeck-finish"
            )

    async def _finish(self, outcome: str, reason: str) -> RunSummary:
        self._load_ended_at = time.time()
        self._event(
            EventKind.DRAIN,
            f"publishing stopped ({reason}); consumers drain for up to {self._drain_seconds:g} s",
            at=self._load_ended_at,
            detail={"drain_seconds": self._drain_seconds},
        )
        if self.spec.queue_type == "stream":
            await self._stream_figures()
        for worker in sorted(self._alive):
            self._hosts[worker].send(Stop(self._drain_seconds))
        deadline = self._drain_seconds + REPORT_GRACE
        for worker, host in sorted(self._hosts.items()):
            try:
                await asyncio.wait_for(host.wait(), deadline)
            except TimeoutError:
                host.kill()
                late = f"did not report within {deadline:g} s and was killed"
                self._failures.append(f"worker {worker} {late}")
                self._gone.setdefault(worker, (time.time(), late))
        if self._placement is not None:
            await self._placement.close()
        ended = time.time()
        lost_workers = self._stand_ins()
        reports = [self._reports[w] for w in sorted(self._reports)]
        final = sum((r.counters for r in reports), Counters()) if reports else None
        self._tick(ended, final)
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._faults.settle()  # a fault's end is part of the run, recorded before the end
        if self._broker_tasks:  # so is a broker setting being applied on the nodes
            await asyncio.gather(*self._broker_tasks, return_exceptions=True)
        await self._sources.stop()
        await self._sources.keep_range(self.started_at, ended)
        if self._failures and outcome != OUTCOME_FAILED:
            outcome = OUTCOME_FAILED
        safety, incomplete, broker_queues = await self._account(reports, lost_workers, ended)
        undelivered = await self._where_messages_went(safety)
        errors = [*self._failures, *self._errors, *(e for r in reports for e in r.errors)]
        if self._cleanup:
            try:
                # Any node that is up: node 1 may be the one a fault took down.
                names = (*self.spec.queue_names, *filter(None, [self.spec.dead_letter_queue]))
                deleted = await topology.delete_queues(self.broker.uris, names)
                if self.spec.dead_letter_queue:  # and the fanout exchange of its name
                    await topology.undeclare(
                        self.broker.uris,
                        topology.Declared(dead_letter_exchange=self.spec.dead_letter_queue),
                    )
                self._event(EventKind.INFO, f"deleted {deleted} queue(s) of the run")
            except FlowdeckError as exc:
                errors.append(f"queues not deleted: {exc}")
        active = ActiveTimes()
        for report in reports:
            active = active | report.active
        summary = RunSummary(
            name=self.spec.name,
            started=self.started_at,
            ended=ended,
            outcome=outcome,
            stop_reason=reason,
            safety=safety,
            publish_rate=mean_rate(safety.published, active.publish_seconds),
            confirm_rate=mean_rate(safety.confirmed, active.confirm_seconds),
            consume_rate=mean_rate(safety.consumed, active.consume_seconds),
            active=active,
            target_rate=self.spec.target_rate,
            latency=self._aggregator.run_latency(),
            # The phases every figure of the run is split by (a change and its phase event
            # at one instant, or two changes applied together, are one phase).
            phases=len(self.phase_table.phases(ended)) or self._ledger.phase_index + 1,
            session_dir=str(self.session_dir) if self.session_dir else None,
            recording_error=self._recording.error,
            errors=tuple(dict.fromkeys(mask_text(e) for e in errors)),
            incomplete=incomplete,
            broker_queues=broker_queues,
            undelivered=undelivered,
        )
        self._event(
            EventKind.RUN_STOPPED,
            f"run {outcome}: {reason}",
            at=ended,
            detail={"outcome": outcome, "reason": reason},
        )
        self._recording.on_finish(summary)
        if self._recording.error and not summary.recording_error:
            # the recorder's own trouble goes into the summary others see
            summary = replace(summary, recording_error=self._recording.error)
        if summary.session_dir and self.session_dir is None:
            summary = replace(summary, session_dir=None)  # removed under the run
        self.summary = summary
        self._state = "ended"
        ended_run = summary
        self._emit(lambda sink: sink.on_finish(ended_run), recording=False)
        return summary

    def _stand_ins(self) -> list[LostWorker]:
        """Every worker whose report never came, its last snapshot's counts standing in for
        the report (a remote worker's link made its own)."""
        lost = []
        for worker in sorted(self._hosts):
            if worker in self._reports and worker not in self._gone:
                continue
            at, reason = self._gone.get(worker, (time.time(), "it sent no report"))
            last = self._aggregator.last_snapshot(worker)
            self._reports.setdefault(worker, stand_in_report(worker, last))
            lost.append(LostWorker(worker, reason, at, last))
        return lost

    async def _account(
        self, reports: Sequence[WorkerReport], lost_workers: Sequence[LostWorker], ended: float
    ) -> tuple[DataSafety, tuple[str, ...], QueueCounts | None]:
        """The run's accounting, what of it is incomplete, and the broker's counts of the
        run's queues (read only when a worker never reported)."""
        confirms = self.spec.confirms
        if not reports:
            self._queue_counts.close()
            return DataSafety(0, 0, 0, 0, 0, 0, 0, 0, 0, confirms=confirms), (), None
        safety = data_safety(reports, confirms=confirms, stream=self.spec.queue_type == "stream")
        if not lost_workers:
            self._queue_counts.close()
            return safety, (), None
        sample = self._sources.management_sample
        interval = sample.statistics_interval if sample is not None else None
        broker, unread = await self._queue_counts.after(
            ended, interval or self.broker.statistics_interval or 5.0
        )
        bounded = with_lost_workers(safety, broker)
        incomplete = incomplete_figures(
            bounded,
            lost_workers,
            started_at=self.started_at,
            client_lost=safety.lost,
            broker=broker,
            broker_unread=unread,
        )
        return bounded, incomplete, broker

    async def _where_messages_went(self, safety: DataSafety) -> str:
        """One line when the run's consumers took far fewer messages than it published and
        the rest did not wait in its queues ('' otherwise; see engine.delivery). Read before
        the queues are deleted; not asked when a lost worker already explains the figures."""
        if not safety.complete or not needs_a_look(self.spec, safety):
            return ""
        try:
            left: int | None = await topology.messages_left(self.broker.uris, self.spec.queue_names)
        except Exception:  # the line still says what the counts show
            left = None
        return where_messages_went(self.spec, safety, left)

    # -- recorder and listeners --------------------------------------------------------------

    @property
    def session_dir(self) -> Path | None:
        """Where the run is recorded: None until the session exists on disk, and again if
        it is removed, so nothing ever shows the path of a session that is not there."""
        return self._recording.session_dir

    def _event(
        self,
        kind: EventKind,
        message: str,
        *,
        at: float | None = None,
        change_id: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> RunEvent:
        event = RunEvent(
            at=time.time() if at is None else at,
            kind=kind,
            message=mask_text(message),
            change_id=change_id,
            detail=dict(detail or {}),
        )
        self._publish_event(event)
        return event

    def _publish_event(self, event: RunEvent) -> None:
        self.events.append(event)
        self._emit(lambda sink: sink.on_event(event))

    def _emit(self, call: Callable[[Sink], None], *, recording: bool = True) -> None:
        """Hand the recording, then every sink, one update (the recording guards itself:
        its trouble turns recording off, never the run)."""
        if recording:
            call(self._recording)
        for sink in list(self._sinks):
            try:
                call(sink)
            except Exception:  # a broken screen must not break the run
                log.exception("sink %r failed", sink)
