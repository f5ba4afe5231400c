"""The worker runtime: one worker's share of publishers and consumers, steered by commands.

``run_worker`` is what a worker host (in-process or a worker process) runs. It connects its
clients (consumers first, so nothing published is missed; one connection per client, as
PerfTest does, so a blocked publisher never stalls acks), starts publishing at the run's
``start_at``, emits a :class:`ClientSnapshot` every second, applies :class:`ApplyChange`
commands and reports each with :class:`ChangeApplied` once it is in force here, and on
:class:`Stop` drains and returns its :class:`WorkerReport`. Topology is the controller's
job; a worker declares nothing.

It stops by itself at ``start_at + duration + 30 s`` if no Stop came, so a lost controller
never leaves load running.

A client whose connection drops (node killed, connection closed by the broker, heartbeat
timeout) reconnects with exponential back-off until the run's end, re-opens its channel
(confirm mode, qos, consume) and carries on with its counters and sequences; while any of
the worker's connections is down the worker is in an *outage*, reported as
OUTAGE_STARTED / OUTAGE_ENDED events with its length. A channel the broker closes (a
publish to a deleted exchange) or a consumer it cancels (queue deleted) is an ERROR event
with the broker's reply text, then re-opened with the same back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from flowdeck.collectors.client_names import client_connection_name
from flowdeck.engine import latency as hdr
from flowdeck.engine.amqp.connection import AmqpClosed, Connection, Tuning, connect
from flowdeck.engine.change import Setting
from flowdeck.engine.client_base import ClientConnection, ConsumerClient, Place, PublisherClient
from flowdeck.engine.commands import (
    ApplyChange,
    ChangeApplied,
    Stop,
    WorkerAssignment,
    WorkerCommand,
    WorkerEvent,
    WorkerMessage,
    global_id,
    local_share,
)
from flowdeck.engine.consumer import PUBLISHER_BITS, Consumer, ConsumerTally, Handling
from flowdeck.engine.errors import BrokerUnavailable
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.protocols import open_consumer, open_publisher
from flowdeck.engine.publisher import Publisher
from flowdeck.engine.samples import LatencySamples, fold
from flowdeck.engine.sequences import SequenceSet
from flowdeck.engine.snapshot import (
    ActiveTimes,
    ClientSnapshot,
    Counters,
    SequenceRanges,
    WorkerReport,
    at_ns,
)
from flowdeck.engine.spec import RunSpec, consumer_priorities, settings_of
from flowdeck.engine.stream.consumer import amqp_offset

SNAPSHOT_INTERVAL = 1.0
#: A worker that hears no Stop stops by itself this long after the run should have ended.
STOP_GRACE = 30.0
#: Clients connected at once while a worker starts or grows.
CONNECT_CONCURRENCY = 64
#: Messages per second on one connection above which reads are held (fewer wake-ups).
READ_HOLD_ABOVE = 2000.0
READ_HOLD_SECONDS = 0.001
#: How long publishers may take to get their last confirms when stopping or removed.
CONFIRM_WAIT = 10.0
#: The dead-letter consumer of worker N is numbered this plus N (no client of a run's
#: own comes near it).
DEAD_LETTER_CONSUMER_BASE = 1_000_000
#: Reconnect back-off: first wait, growth per failed attempt, longest wait.
RECONNECT_FIRST = 0.2
RECONNECT_GROWTH = 2.0
RECONNECT_LONGEST = 5.0
#: A client that fails again this soon after recovering keeps its back-off growing.
RECOVERY_SETTLE = 10.0


async def run_worker(
    assignment: WorkerAssignment,
    commands: asyncio.Queue[WorkerCommand],
    emit: Callable[[WorkerMessage], None],
) -> WorkerReport:
    """Run one worker until Stop (or the run's end plus a grace period); see module doc.

    Raises :class:`BrokerUnavailable` when the clients cannot connect.
    """
    worker = _Worker(assignment, emit)
    return await worker.run(commands)


def delivery_limit(spec: RunSpec) -> int:
    """The run's queues' delivery limit (quorum queues' x-delivery-limit), 0 for none."""
    limit = spec.queue_args.get("x-delivery-limit", 0)
    if spec.queue_type != "quorum" or isinstance(limit, bool) or not isinstance(limit, int):
        return 0
    return max(0, limit)


def node_order(
    role: str,
    client_id: int,
    nodes: int,
    queue_leaders: Sequence[int] = (),
    consumer_node: str = "spread",
    allocation_seed: int = 0,
) -> list[int]:
    """The run's ``nodes`` node URIs (by position) in the order a client tries them:
    round-robin by client number (PerfTest's ``--connection-allocation round-robin``), or
    from a node drawn for the client from ``allocation_seed`` (``random``: the same seed,
    role and client number always draw the same node, in any worker), then the next. A consumer
    placed by its queue's leader (``consumer_node``; ``queue_leaders`` per queue index, the
    position of its leader's URI) tries the nodes other than the leader first, round-robin
    among them (``off-leader``), or the leader first (``leader``): it still falls back to
    any node that is up."""
    first = client_id
    if allocation_seed:
        first = random.Random(f"{allocation_seed}:{role}:{client_id}").randrange(nodes)
    spread = [(first + i) % nodes for i in range(nodes)]
    if role != "consumer" or not queue_leaders or consumer_node == "spread" or nodes < 2:
        return spread
    leader = queue_leaders[client_id % len(queue_leaders)]
    others = [i for i in range(nodes) if i != leader]
    turn = (client_id // len(queue_leaders)) % len(others)  # its rank among its queue's
    others = others[turn:] + others[:turn]
    return [*others, leader] if consumer_node == "off-leader" else [leader, *others]


def owed(
    publishers: Sequence[PublisherClient], settled: int, *, confirms: bool, workers: int
) -> int:
    """Messages a run's only worker still expects its consumers to take: what the broker
    took from its publishers (confirmed, with confirms; else published), less what came
    back unroutable, less what its consumers settled (took, or rejected for good). 0 with
    more workers: a publisher's messages may go to another worker's consumers."""
    if workers != 1:
        return 0
    taken = sum((p.confirmed if confirms else p.published) - p.returned for p in publishers)
    return max(0, taken - settled)


class _Worker:
    def __init__(self, assignment: WorkerAssignment, emit: Callable[[WorkerMessage], None]) -> None:
        self.assignment = assignment
        self.spec = assignment.spec
        self.index = assignment.worker
        self.emit = emit
        spec = self.spec
        self.settings = settings_of(spec)
        self.publishers: list[PublisherClient] = []
        self.consumers: list[ConsumerClient] = []
        self.retired_publishers: list[PublisherClient] = []
        self.retired_consumers: list[ConsumerClient] = []
        self.connections: dict[object, ClientConnection] = {}  # client -> its connection
        #: id(connection) -> the clients on it (one each, or a group's channels).
        self._client_of: dict[int, list[PublisherClient | ConsumerClient]] = {}
        #: The connections groups of clients share (role, group) -> the connection opening
        #: or open (see ``_connect``).
        self._shared: dict[tuple[str, int], asyncio.Future[Connection]] = {}
        self._recovering: dict[object, asyncio.Task[None]] = {}
        self._backoff: dict[Publisher | Consumer, tuple[float, float]] = {}  # delay, ok at
        self._outage_since: float | None = None
        self._outage_reason = ""
        self._outage_clients = 0
        self._outage_unacked = 0
        self.outages: list[float] = []  # lengths of the outages so far, seconds
        self.next_sequence: dict[int, int] = {}
        self.tuning = Tuning(
            heartbeat=None if spec.heartbeat < 0 else spec.heartbeat,
            frame_max=spec.frame_max or None,
            channel_max=spec.channel_max or None,
            tcp_nodelay=spec.tcp_nodelay,
            tcp_send_buffer=spec.tcp_send_buffer,
            tcp_receive_buffer=spec.tcp_receive_buffer,
        )
        self.tally = ConsumerTally({})
        #: What this worker took off the run's dead-letter queue (its own sequences: a
        #: message there was never consumed), and the consumer that takes it.
        self.dead_tally = ConsumerTally({})
        self.dead_letters: Consumer | None = None
        self._dead_latency = LatencySamples()
        #: How this worker's consumers treat deliveries (work time, rejections), changed
        #: in place when those settings change.
        self.handling = Handling(
            work_ms=spec.work,
            distribution=spec.work_distribution,
            spread_ms=spec.work_spread,
            reject=spec.reject,
            requeue=spec.requeue,
            poison=spec.poison,
            delivery_limit=delivery_limit(spec),
        )
        self.confirm_latency = LatencySamples()
        #: End-to-end latencies by the queue they were consumed from: each queue's own
        #: percentiles, and the run's all of them together (folded at each snapshot).
        self.e2e_latency: dict[str, LatencySamples] = {}
        self.errors: list[str] = []
        self._new_errors: list[str] = []
        self.run_start_ns = int(assignment.start_at * 1e9) - 1_000_000
        self.publishing_started = False
        self.stopping = False
        self._last_snapshot = time.time()
        self._last_counts: dict[int, int] = {}
        self._read_hold = 0.0
        self._open_failures: dict[str, BaseException] = {}  # role -> first failure to open

    # -- the run ------------------------------------------------------------------------

    async def run(self, commands: asyncio.Queue[WorkerCommand]) -> WorkerReport:
        spec = self.spec
        deadline = self.assignment.start_at + spec.duration + STOP_GRACE
        try:
            await self._resize_consumers(self._share(spec.consumers))
            if spec.dead_letter_queue:
                self.dead_letters = await self._new_dead_letter_consumer()
            await self._resize_publishers(self._share(spec.publishers))
        except BaseException:
            await self._close_all()
            raise
        snapshots = asyncio.create_task(self._snapshot_loop())
        try:
            delay = self.assignment.start_at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.publishing_started = True
            for publisher in self.publishers:
                publisher.start()
            stop = await self._steer(commands, deadline)
            report = await self._stop(stop.drain_seconds)
        finally:
            snapshots.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await snapshots
            await self._close_all()
        self._emit_snapshot()
        return report

    async def _steer(self, commands: asyncio.Queue[WorkerCommand], deadline: float) -> Stop:
        while True:
            remaining = deadline - time.time()
            if remaining <= 0:
                self._event(
                    EventKind.INFO,
                    f"worker {self.index} heard no Stop by the end of the run plus "
                    f"{STOP_GRACE:g} s and stops by itself",
                )
                return Stop()
            try:
                command = await asyncio.wait_for(commands.get(), remaining)
            except TimeoutError:
                continue
            if isinstance(command, Stop):
                return command
            await self._apply(command)

    async def _apply(self, command: ApplyChange) -> None:
        change = command.change
        try:
            apply = _APPLY.get(change.setting)
            if apply is not None:
                await apply(self, change.value)
            else:
                # A row the clients do not act on (a setting added to the registry without
                # an apply method here) is carried: in force, recorded and judged as asked.
                self.settings = self.settings.with_value(change.setting, _needs(change.value))
        except (BrokerUnavailable, AmqpClosed) as exc:
            self._error(f"worker {self.index} could not fully apply {change.describe()}: {exc}")
        self.emit(
            ChangeApplied(
                command.change_id,
                self.index,
                time.time(),
                publishers=len(self.publishers),
                consumers=len(self.consumers),
            )
        )

    # One method per registry row (engine.settings), dispatched through ``_APPLY``; each
    # takes the change's absolute value (None for pause, resume and mark).

    async def _apply_inflight(self, value: float | None) -> None:
        limit = int(_needs(value))
        for publisher in self.publishers:
            publisher.set_inflight(limit)
        self.settings = self.settings.changed(inflight=limit)

    async def _apply_prefetch(self, value: float | None) -> None:
        prefetch = int(_needs(value))
        self.settings = self.settings.changed(prefetch=prefetch)
        await asyncio.gather(*(c.set_prefetch(prefetch) for c in self.consumers))

    async def _apply_ack_every(self, value: float | None) -> None:
        every = int(_needs(value))
        self.settings = self.settings.changed(ack_every=every)
        for consumer in self.consumers:
            consumer.set_ack_every(every)

    async def _apply_work(self, value: float | None) -> None:
        work = _needs(value)
        self.settings = self.settings.changed(work=work)
        self.handling.set(work_ms=work)

    async def _apply_reject(self, value: float | None) -> None:
        reject = _needs(value)
        self.settings = self.settings.changed(reject=reject)
        self.handling.set(reject=reject)

    async def _apply_poison(self, value: float | None) -> None:
        poison = _needs(value)
        self.settings = self.settings.changed(poison=poison)
        self.handling.set(poison=poison)
        for publisher in self.publishers:
            if isinstance(publisher, Publisher):  # the mark is in AMQP 0.9.1's body
                publisher.set_poison(poison)

    async def _apply_message_size(self, value: float | None) -> None:
        size = int(_needs(value))
        self.settings = self.settings.changed(message_size=size)
        for publisher in self.publishers:
            if isinstance(publisher, Publisher):  # the other protocols keep the spec's size
                publisher.set_size(size)

    async def _apply_rate(self, value: float | None) -> None:
        rate = float(_needs(value))
        self.settings = self.settings.changed(rate=rate)
        for publisher in self.publishers:
            publisher.set_rate(rate)

    async def _apply_publishers(self, value: float | None) -> None:
        total = int(_needs(value))
        try:
            await self._resize_publishers(self._share(total))
        finally:
            # Set once applied, from the clients that opened: the asked total less this
            # worker's shortfall, so what is recorded is what is connected.
            in_force = total - (self._share(total) - len(self.publishers))
            self.settings = self.settings.changed(publishers=in_force)

    async def _apply_consumers(self, value: float | None) -> None:
        total = int(_needs(value))
        try:
            await self._resize_consumers(self._share(total))
        finally:
            in_force = total - (self._share(total) - len(self.consumers))
            self.settings = self.settings.changed(consumers=in_force)

    async def _apply_pause(self, value: float | None) -> None:
        self.settings = replace(self.settings, paused=True)
        for publisher in self.publishers:
            publisher.pause()

    async def _apply_resume(self, value: float | None) -> None:
        self.settings = replace(self.settings, paused=False)
        for publisher in self.publishers:
            publisher.resume()

    async def _apply_mark(self, value: float | None) -> None:
        """A phase mark changes nothing in the clients; it is only acknowledged."""

    def _share(self, total: int) -> int:
        return local_share(total, self.index, self.assignment.workers)

    # -- clients ------------------------------------------------------------------------

    @property
    def _give_up_at(self) -> float:
        """Reconnecting stops at the run's end: a run that ended needs no clients."""
        return self.assignment.start_at + self.spec.duration

    async def _connect(self, role: str, client_id: int, attempt: int = 0) -> Connection:
        """A connection for one client: its own, or the one it shares with the other
        channels of its group (``publisher_channels`` / ``consumer_channels``: the worker's
        k-th client of a role is on its connection k // channels, as PerfTest's -X/-Y open
        that many channels per connection). A group's connection is opened once and reused
        while it is open (a client reconnecting after a loss opens it again for all)."""
        channels = (
            self.spec.publisher_channels if role == "publisher" else self.spec.consumer_channels
        )
        if channels <= 1 or client_id >= DEAD_LETTER_CONSUMER_BASE:
            return await self._open_connection(role, client_id, attempt)
        workers = self.assignment.workers
        group = (client_id // workers) // channels
        key = (role, group)
        shared = self._shared.get(key)
        if shared is not None:
            if not shared.done():
                return await asyncio.shield(shared)
            if not shared.cancelled() and shared.exception() is None and shared.result().is_open:
                return shared.result()
        first = global_id(group * channels, self.index, workers)
        opening = asyncio.ensure_future(self._open_connection(role, first, attempt))
        self._shared[key] = opening
        return await asyncio.shield(opening)

    async def _open_connection(self, role: str, client_id: int, attempt: int = 0) -> Connection:
        """A new connection named after ``client_id``, to its node (``node_order``); each
        reconnect attempt tries the next node, so clients of a lost node move to one that
        is up."""
        uris = self.assignment.uris
        order = node_order(
            role,
            client_id,
            len(uris),
            self.assignment.queue_leaders,
            self.spec.consumer_node,
            self.spec.allocation_seed,
        )
        name = client_connection_name(
            self.spec.name,
            self.assignment.run_tag,
            self.index,
            "publisher" if role == "publisher" else "consumer",
            client_id,
        )
        return await connect(
            uris[order[attempt % len(order)]],
            name,
            on_blocked=self._on_blocked,
            on_unblocked=self._on_unblocked,
            on_lost=self._on_lost,
            tuning=self.tuning,
        )

    async def _resize_publishers(self, target: int) -> None:
        workers = self.assignment.workers
        while len(self.publishers) > target:
            publisher = self.publishers.pop()
            publisher.stop()
            await publisher.wait_confirms(CONFIRM_WAIT)
            self.next_sequence[publisher.publisher_id] = publisher.next_sequence
            await self._close_client(publisher)
            self.retired_publishers.append(publisher)
        first = len(self.publishers)
        ids = [global_id(i, self.index, workers) for i in range(first, target)]
        added = await self._open_clients([self._new_publisher(pid) for pid in ids], "publishers")
        self.publishers.extend(added)
        if self.publishing_started:
            for publisher in added:
                publisher.start()
        self._raise_shortfall(added, ids, "publishers")

    def _place(self, role: str, client_id: int) -> Place:
        """Where a client of a protocol other than AMQP 0.9.1 connects (its first node)."""
        uris = self.assignment.uris
        order = node_order(role, client_id, len(uris), allocation_seed=self.spec.allocation_seed)
        name = client_connection_name(
            self.spec.name,
            self.assignment.run_tag,
            self.index,
            "publisher" if role == "publisher" else "consumer",
            client_id,
        )

        def lost(reason: str) -> None:
            if not self.stopping:
                self._error(
                    f"{role} {client_id}: {reason}; {self.spec.protocol} clients do not reconnect"
                )

        return Place(
            uri=uris[order[0]],
            name=name,
            stream_port=self.assignment.stream_port,
            start_at=self.assignment.start_at,
            run_start_ns=self.run_start_ns,
            on_lost=lost,
        )

    async def _new_publisher(self, publisher_id: int) -> PublisherClient:
        spec = self.spec
        queue = spec.queue_name(publisher_id % spec.queues)
        if spec.protocol != "amqp0.9.1":
            link = await open_publisher(
                spec,
                self._place("publisher", publisher_id),
                publisher_id=publisher_id,
                queue=queue,
                inflight=self.settings.inflight,
                rate=self.settings.rate,
                first_sequence=self.next_sequence.get(publisher_id, 0),
                confirm_latency=self.confirm_latency,
                run_tag=self.assignment.run_tag,
            )
            if self.settings.paused:
                link.pause()
            self._attach(link, link.connection)
            return link
        connection = await self._connect("publisher", publisher_id)
        try:
            channel = await self._publishing_channel(connection)
        except AmqpClosed as exc:
            await connection.close()
            raise BrokerUnavailable(
                f"publisher {publisher_id} could not open its channel: {exc}"
            ) from None
        publisher = Publisher(
            publisher_id=publisher_id,
            connection=connection,
            channel=channel,
            exchange=spec.exchange,
            routing_key=spec.routing_key or queue,
            message_size=int(self.settings.value("message_size")),
            persistent=spec.persistent,
            mandatory=spec.mandatory,
            confirms=spec.confirms,
            inflight=self.settings.inflight,
            rate=self.settings.rate,
            first_sequence=self.next_sequence.get(publisher_id, 0),
            confirm_latency=self.confirm_latency,
            catch_up=spec.catch_up,
            poison=float(self.settings.value("poison")),
            priority=spec.message_priority,
            priority_distribution=spec.priority_distribution,
            priority_share=spec.priority_share,
        )
        if self.settings.paused:
            publisher.pause()
        publisher.on_channel_lost = self._on_client_trouble
        self._attach(publisher, connection)
        return publisher

    async def _publishing_channel(self, connection: Connection) -> Any:
        channel = await connection.channel()
        if self.spec.confirms:
            await channel.confirm_select()
        return channel

    def _attach(
        self, client: PublisherClient | ConsumerClient, connection: ClientConnection
    ) -> None:
        old = self.connections.get(client)
        if old is not None:
            self._detach(client, old)
        connection.read_hold = self._read_hold
        self.connections[client] = connection
        self._client_of.setdefault(id(connection), []).append(client)

    def _detach(
        self, client: PublisherClient | ConsumerClient, connection: ClientConnection
    ) -> bool:
        """Take ``client`` off ``connection``; whether no client is left on it."""
        clients = self._client_of.get(id(connection), [])
        if client in clients:
            clients.remove(client)
        if not clients:
            self._client_of.pop(id(connection), None)
            return True
        return False

    def _open_connections(self) -> list[ClientConnection]:
        """Every connection of the worker's clients, each once."""
        return list({id(c): c for c in self.connections.values()}.values())

    async def _resize_consumers(self, target: int) -> None:
        workers = self.assignment.workers
        while len(self.consumers) > target:
            consumer = self.consumers.pop()
            await consumer.stop()
            await self._close_client(consumer)
            self.retired_consumers.append(consumer)
        first = len(self.consumers)
        ids = [global_id(i, self.index, workers) for i in range(first, target)]
        added = await self._open_clients([self._new_consumer(c) for c in ids], "consumers")
        self.consumers.extend(added)
        self._raise_shortfall(added, ids, "consumers")

    async def _new_consumer(self, consumer_id: int) -> ConsumerClient:
        spec = self.spec
        queue = spec.queue_name(consumer_id % spec.queues)
        latency = self.e2e_latency.setdefault(queue, LatencySamples())
        if spec.protocol != "amqp0.9.1":
            link = await open_consumer(
                spec,
                self._place("consumer", consumer_id),
                consumer_id=consumer_id,
                queue=queue,
                prefetch=self.settings.prefetch,
                ack_every=self.settings.ack_every,
                tally=self.tally,
                latency=latency,
            )
            self._attach(link, link.connection)
            return link
        arguments: dict[str, Any] | None = None
        if spec.queue_type == "stream":
            # From the run's start by default: earlier messages are not this run's.
            arguments = {
                "x-stream-offset": amqp_offset(spec.stream_offset, self.assignment.start_at)
            }
        if priorities := consumer_priorities(spec.consumer_priority):
            arguments = {
                **(arguments or {}),
                "x-priority": priorities[consumer_id % len(priorities)],
            }
        connection = await self._connect("consumer", consumer_id)
        consumer = Consumer(
            consumer_id=consumer_id,
            connection=connection,
            queue=queue,
            prefetch=self.settings.prefetch,
            ack_every=self.settings.ack_every,
            auto_ack=spec.auto_ack,
            arguments=arguments,
            tally=self.tally,
            latency=latency,
            run_start_ns=self.run_start_ns,
            handling=self.handling,
            stream=spec.queue_type == "stream",
        )
        try:
            await consumer.start()
        except AmqpClosed as exc:
            await connection.close()
            raise BrokerUnavailable(
                f"consumer {consumer_id} could not consume from queue {queue!r}: {exc}; "
                "the controller declares the queues before workers start"
            ) from None
        consumer.on_trouble = self._on_client_trouble
        self._attach(consumer, connection)
        return consumer

    async def _new_dead_letter_consumer(self) -> Consumer:
        """One consumer per worker on the run's dead-letter queue: it acks each message and
        keeps its sequence, so the accounting tells dead-lettered from lost."""
        spec = self.spec
        consumer_id = DEAD_LETTER_CONSUMER_BASE + self.index
        connection = await self._connect("consumer", consumer_id)
        consumer = Consumer(
            consumer_id=consumer_id,
            connection=connection,
            queue=spec.dead_letter_queue,
            prefetch=1000,
            ack_every=100,
            auto_ack=False,
            arguments=None,
            tally=self.dead_tally,
            latency=self._dead_latency,
            run_start_ns=self.run_start_ns,
        )
        try:
            await consumer.start()
        except AmqpClosed as exc:
            await connection.close()
            raise BrokerUnavailable(
                f"could not consume the dead-letter queue {spec.dead_letter_queue!r}: {exc}"
            ) from None
        consumer.on_trouble = self._on_client_trouble
        self._attach(consumer, connection)
        return consumer

    async def _open_clients(self, jobs: list[Any], role: str) -> list[Any]:
        """Open clients, at most CONNECT_CONCURRENCY at once; the ones that opened.

        Before the run publishes, all must open or none stays (the first failure is
        raised). Once it runs, a change that adds clients keeps the ones that opened (the
        broker may take only some: out of sockets) and ``_raise_shortfall`` raises after,
        so the counts reported are those of the clients really connected.
        """
        gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

        async def one(job: Any) -> Any:
            async with gate:
                return await job

        results = await asyncio.gather(*(one(job) for job in jobs), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        done = [r for r in results if not isinstance(r, BaseException)]
        if failures:
            if not self.publishing_started or not isinstance(
                failures[0], BrokerUnavailable | AmqpClosed
            ):
                for client in done:
                    await self._close_client(client)
                raise failures[0]
            self._open_failures[role] = failures[0]
        return done

    def _raise_shortfall(self, added: list[Any], ids: list[int], role: str) -> None:
        failure = self._open_failures.pop(role, None)
        if failure is not None:
            raise BrokerUnavailable(
                f"opened {len(added)} of {len(ids)} new {role}, the broker took no more: {failure}"
            )

    async def _close_client(self, client: PublisherClient | ConsumerClient) -> None:
        task = self._recovering.pop(client, None)
        if task is not None:
            task.cancel()
        connection = self.connections.pop(client, None)
        if connection is not None:
            if self._detach(client, connection):
                with contextlib.suppress(Exception):
                    await connection.close("flowdeck client removed")
            elif isinstance(client, Publisher):  # others share the connection: its channel
                with contextlib.suppress(Exception):
                    await client.channel.close("flowdeck publisher removed")

    async def _close_all(self) -> None:
        connections = self._open_connections()
        self.connections.clear()
        await asyncio.gather(
            *(c.close("flowdeck run finished") for c in connections), return_exceptions=True
        )

    # -- stopping -----------------------------------------------------------------------

    async def _stop(self, drain_seconds: float) -> WorkerReport:
        self.stopping = True
        recovering = list(self._recovering.values())
        for task in recovering:
            task.cancel()
        await asyncio.gather(*recovering, return_exceptions=True)
        if self._outage_since is not None:
            self._end_outage(ended=False)
        for publisher in self.publishers:
            publisher.stop()
        await asyncio.gather(
            *(p.wait_confirms(max(drain_seconds, CONFIRM_WAIT)) for p in self.publishers)
        )
        await self._drain(drain_seconds)
        await asyncio.gather(*(c.stop() for c in self.consumers), return_exceptions=True)
        if self.dead_letters is not None:
            await self._drain_dead_letters(drain_seconds)
            await self.dead_letters.stop()
        return self._report()

    async def _drain_dead_letters(self, drain_seconds: float) -> None:
        """Take what the broker dead-lettered until the dead-letter queue is empty and no
        message came for a moment (the broker dead-letters a rejected message after the
        nack; up to ``drain_seconds``)."""
        consumer = self.dead_letters
        assert consumer is not None
        deadline = time.monotonic() + max(drain_seconds, 2.0)
        last, quiet_since = self.dead_tally.consumed, time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            consumer.flush()
            now = time.monotonic()
            if self.dead_tally.consumed != last:
                last, quiet_since = self.dead_tally.consumed, now
            elif now - quiet_since >= 0.5 and await self._none_ready(
                consumer.connection, [consumer.queue]
            ):
                return

    async def _drain(self, drain_seconds: float) -> None:
        """Let consumers take what is left in their queues, up to ``drain_seconds``.

        Drained = every consumed queue reports no ready message and no delivery came for a
        moment (prefetched messages still arriving); stream queues never empty, so for them
        only the quiet moment counts. A run of one worker also waits until its consumers
        have taken as many messages as the broker took from its publishers (a queue's ready
        count leaves out the messages on their way to consumers: a quorum queue's drain
        ended with 1,757 of them, and ``--cleanup`` deleted them as lost).
        """
        live = [c for c in self.consumers if c.error is None]
        if not live or drain_seconds <= 0:
            return
        deadline = time.monotonic() + drain_seconds
        queues = sorted({c.queue for c in live})
        quiet_needed = 1.0 if self.spec.queue_type == "stream" else 0.3
        last_consumed = self.tally.consumed
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            for consumer in live:
                consumer.flush()
            now = time.monotonic()
            if self.tally.consumed != last_consumed:
                last_consumed = self.tally.consumed
                quiet_since = now
                continue
            if now - quiet_since < quiet_needed:
                continue
            settled = self.tally.consumed + sum(len(s) for s in self.tally.discarded.values())
            if owed(self.publishers + self.retired_publishers, settled,
                    confirms=self.spec.confirms, workers=self.assignment.workers):  # fmt: skip
                continue
            if self.spec.queue_type == "stream" or await self._queues_empty(queues):
                return

    async def _queues_empty(self, queues: list[str]) -> bool:
        """No ready message left in ``queues``, as an AMQP 0.9.1 channel (a consumer's, or a
        connection of its own for the other protocols' consumers) reads them."""
        own: Connection | None = None
        connection = next((c.connection for c in self.consumers if isinstance(c, Consumer)), None)
        if connection is None:
            try:
                connection = own = await connect(self.assignment.uris[0], "flowdeck-drain-check")
            except BrokerUnavailable:
                return True
        try:
            return await self._none_ready(connection, queues)
        finally:
            if own is not None:
                await own.close("drain check")

    async def _none_ready(self, connection: Connection, queues: list[str]) -> bool:
        try:
            channel = await connection.channel()
            try:
                for queue in queues:
                    if await channel.queue_message_count(queue):
                        return False
            finally:
                await channel.close("drain check")
        except AmqpClosed:
            return True  # the queue is gone or the connection is: nothing left to drain
        return True

    def _report(self) -> WorkerReport:
        confirmed: dict[int, SequenceSet] = {}
        nacked: dict[int, SequenceSet] = {}
        unconfirmed = 0
        for publisher in self.retired_publishers + self.publishers:
            kept, lost = publisher.report_ranges()
            for target, ranges in ((confirmed, kept), (nacked, lost)):
                merged = target.setdefault(publisher.publisher_id, SequenceSet())
                for start, end in ranges.ranges:
                    merged.add_range(start, end)
            if self.spec.confirms:
                unconfirmed += publisher.pending_confirms + publisher.abandoned
            else:
                unconfirmed += publisher.published
        return WorkerReport(
            worker=self.index,
            counters=self._counters(),
            confirmed=_ranges(confirmed),
            nacked=_ranges(nacked),
            published_unconfirmed=unconfirmed,
            consumed=_ranges(self.tally.sequences),
            errors=tuple(self.errors),
            active=self._active_times(),
            discarded=_ranges(self.tally.discarded),
            dead_lettered=_ranges(_unmarked(self.dead_tally.sequences)),
            replayed=self.tally.replayed,
        )

    def _active_times(self) -> ActiveTimes:
        """This worker's first and last sends, last confirm, first and last delivery."""
        publishers = self.retired_publishers + self.publishers
        firsts = [p.first_sent_ns for p in publishers if p.first_sent_ns]
        return ActiveTimes(
            first_publish=at_ns(min(firsts, default=0)),
            last_publish=at_ns(max((p.last_sent_ns for p in publishers), default=0)),
            last_confirm=at_ns(max((p.last_confirmed_ns for p in publishers), default=0)),
            first_consume=at_ns(self.tally.first_ns),
            last_consume=at_ns(self.tally.last_ns),
        )

    # -- snapshots ----------------------------------------------------------------------

    async def _snapshot_loop(self) -> None:
        next_at = time.monotonic() + SNAPSHOT_INTERVAL
        while True:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += SNAPSHOT_INTERVAL
            self._emit_snapshot()

    def _counters(self) -> Counters:
        publishers = self.retired_publishers + self.publishers
        tally = self.tally
        return Counters(
            published=sum(p.published for p in publishers),
            confirmed=sum(p.confirmed for p in publishers),
            nacked=sum(p.nacked for p in publishers),
            returned=sum(p.returned for p in publishers),
            consumed=tally.consumed,
            acked=tally.acked,
            redelivered=tally.redelivered,
            duplicates=tally.duplicates,
            rejected=tally.rejected,
            requeued=tally.requeued,
            dead_lettered=self.dead_tally.consumed,
        )

    def _emit_snapshot(self) -> None:
        now = time.time()
        interval = now - self._last_snapshot
        self._last_snapshot = now
        self._adjust_read_hold(interval)
        encoded: dict[tuple[LatencyKind, SendBasis], bytes] = {}
        for basis, values in (
            (SendBasis.ACTUAL, self.confirm_latency.actual),
            (SendBasis.INTENDED, self.confirm_latency.intended),
        ):
            histogram = hdr.new_histogram()
            fold(values, histogram)
            encoded[(LatencyKind.CONFIRM, basis)] = hdr.encode(histogram)
        # End to end: every queue's latencies into the run's histograms, and each queue's
        # from the actual send into its own (the seed's per-queue percentile lines).
        actual, intended = hdr.new_histogram(), hdr.new_histogram()
        per_queue: dict[str, bytes] = {}
        for queue, samples in self.e2e_latency.items():
            fold(samples.intended, intended)
            if not samples.actual:
                continue
            fold(samples.actual, actual, keep=True)
            own = hdr.new_histogram()
            fold(samples.actual, own)
            per_queue[queue] = hdr.encode(own)
        # A dead-lettered message's wait is no delivery's latency: dropped.
        del self._dead_latency.actual[:], self._dead_latency.intended[:]
        encoded[(LatencyKind.END_TO_END, SendBasis.ACTUAL)] = hdr.encode(actual)
        encoded[(LatencyKind.END_TO_END, SendBasis.INTENDED)] = hdr.encode(intended)
        connections = [c for c in self._open_connections() if c.is_open]
        reasons = sorted({c.blocked_reason for c in connections if c.blocked_reason})
        settings = self.settings
        publishing = not settings.paused and not self.stopping
        rate = settings.rate * len(self.publishers) if publishing else 0.0
        errors, self._new_errors = tuple(self._new_errors), []
        self.emit(
            ClientSnapshot(
                worker=self.index,
                at=now,
                interval=interval,
                counters=self._counters(),
                pending_confirms=sum(p.pending_confirms for p in self.publishers),
                unacked=sum(c.unacked for c in self.consumers),
                connections=len(connections),
                blocked=sum(1 for c in connections if c.blocked),
                settings=replace(settings, read_hold_ms=self._read_hold * 1000),
                target_rate=rate,
                latency=encoded,
                queue_latency=per_queue,
                blocked_reasons=tuple(reasons),
                errors=errors,
            )
        )

    def _adjust_read_hold(self, interval: float) -> None:
        """Hold small reads ~1 ms only under load: many messages per connection per second
        (at low rates holding would only add latency).
        """
        if interval <= 0:
            return
        counts = {id(p): p.published for p in self.publishers}
        counts.update({id(c): c.consumed for c in self.consumers})
        busiest = 0.0
        for key, count in counts.items():
            busiest = max(busiest, (count - self._last_counts.get(key, count)) / interval)
        self._last_counts = counts
        hold = READ_HOLD_SECONDS if busiest > READ_HOLD_ABOVE else 0.0
        if hold != self._read_hold:
            self._read_hold = hold
            for connection in self.connections.values():
                connection.read_hold = hold

    # -- connection events --------------------------------------------------------------

    def _on_blocked(self, connection: Connection, reason: str) -> None:
        self._event(
            EventKind.BLOCKED,
            f"broker blocked connection {connection.name!r}: {reason}",
            {"connection": connection.name, "reason": reason, "worker": self.index},
        )

    def _on_unblocked(self, connection: Connection) -> None:
        for client in self._client_of.get(id(connection), []):
            if isinstance(client, Publisher):
                client.pump()
        self._event(
            EventKind.UNBLOCKED,
            f"broker unblocked connection {connection.name!r}",
            {"connection": connection.name, "worker": self.index},
        )

    def _on_lost(self, connection: Connection, reason: AmqpClosed) -> None:
        for client in list(self._client_of.get(id(connection), [])):
            self._client_lost(client, connection, reason)

    def _client_lost(
        self, client: PublisherClient | ConsumerClient, connection: Connection, reason: AmqpClosed
    ) -> None:
        if not isinstance(client, Publisher | Consumer):
            return  # the other protocols' clients do not reconnect
        if self.stopping or self.connections.get(client) is not connection:
            return  # a client being removed, or the run is over
        if self._outage_since is None:
            self._outage_since = time.time()
            self._outage_reason = str(reason)
            self._outage_clients = 0
            self._outage_unacked = 0
            self._event(
                EventKind.OUTAGE_STARTED,
                f"worker {self.index} lost its connection to the broker: {reason}; "
                "reconnecting with back-off",
                {"worker": self.index, "reason": str(reason), "connection": connection.name},
            )
        self._outage_clients += 1
        self._recover(client, reason, new_connection=True)

    def _on_client_trouble(self, client: Publisher | Consumer, reason: AmqpClosed) -> None:
        """A client's channel closed or its consumer was cancelled by the broker."""
        connection = self.connections.get(client)
        if self.stopping or connection is None:
            return
        if not connection.is_open:
            return  # the whole connection went: _on_lost reconnects
        if client in self._recovering:
            return
        role = "publisher" if isinstance(client, Publisher) else "consumer"
        client_id = client.publisher_id if isinstance(client, Publisher) else client.consumer_id
        self._error(
            f"{role} {client_id}: {reason}; trying again with back-off",
            {"connection": connection.name, "reply_code": reason.reply_code},
        )
        self._recover(client, reason, new_connection=False)

    def _recover(
        self, client: Publisher | Consumer, reason: AmqpClosed, new_connection: bool
    ) -> None:
        if isinstance(client, Consumer) and new_connection:
            self._outage_unacked += client.current.unacked if client.current else 0
        previous = self._recovering.pop(client, None)
        if previous is not None:
            previous.cancel()
        self._recovering[client] = asyncio.get_running_loop().create_task(
            self._recovery(client, reason, new_connection),
            name=f"flowdeck-recover-w{self.index}",
        )

    async def _recovery(
        self, client: Publisher | Consumer, reason: AmqpClosed, new_connection: bool
    ) -> None:
        """Back-off loop: first a connection (when it was lost), then the channel. Failing
        connects during an outage are expected and quiet; what the broker says when it
        refuses a channel or a consume is an ERROR event (once per distinct reply).
        """
        role = "publisher" if isinstance(client, Publisher) else "consumer"
        client_id = client.publisher_id if isinstance(client, Publisher) else client.consumer_id
        began = time.time()
        delay, recovered_at = self._backoff.get(client, (RECONNECT_FIRST, 0.0))
        if began - recovered_at > RECOVERY_SETTLE:
            delay = RECONNECT_FIRST
        attempts = 0
        last_error = str(reason)
        reconnected = not new_connection
        refused = 0  # channel or consume attempts the broker refused
        try:
            while not self.stopping and time.time() < self._give_up_at:
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * RECONNECT_GROWTH, RECONNECT_LONGEST)
                attempts += 1
                if not reconnected:
                    try:
                        fresh = await self._connect(role, client_id, attempts)
                    except BrokerUnavailable as exc:
                        last_error = str(exc)
                        continue
                    self._attach(client, fresh)
                    reconnected = True
                    self._connection_back()
                connection = self.connections[client]
                assert isinstance(connection, Connection)  # only AMQP 0.9.1 clients recover
                try:
                    if isinstance(client, Publisher):
                        channel = await self._publishing_channel(connection)
                        client.rebind(connection, channel)
                    else:
                        await client.resubscribe(connection)
                except AmqpClosed as exc:
                    if not connection.is_open:
                        return  # the connection went again: _on_lost started a new recovery
                    if str(exc) != last_error:
                        self._error(f"{role} {client_id}: {exc}; still trying")
                    last_error = str(exc)
                    refused += 1
                    continue
                self._backoff[client] = (delay, time.time())
                if not new_connection or refused:
                    self._event(
                        EventKind.INFO,
                        f"{role} {client_id} works again after {time.time() - began:.1f} s "
                        f"({attempts} attempt(s))",
                    )
                return
            if not self.stopping:
                self._error(
                    f"{role} {client_id} gave up at the run's end after {attempts} attempt(s) "
                    f"over {time.time() - began:.1f} s: {last_error}",
                )
        finally:
            if self._recovering.get(client) is asyncio.current_task():
                del self._recovering[client]

    def _connection_back(self) -> None:
        self._outage_clients -= 1
        if self._outage_clients <= 0 and self._outage_since is not None:
            self._end_outage(ended=True)

    def _end_outage(self, *, ended: bool) -> None:
        since = self._outage_since
        assert since is not None
        self._outage_since = None
        seconds = time.time() - since
        self.outages.append(seconds)
        abandoned = sum(p.abandoned for p in self.publishers + self.retired_publishers)
        how = "reconnected" if ended else "was still reconnecting when the run stopped"
        self._event(
            EventKind.OUTAGE_ENDED,
            f"worker {self.index} {how} after an outage of {seconds:.1f} s; "
            f"{abandoned} message(s) in flight at the drop(s) stay unconfirmed",
            {
                "worker": self.index,
                "seconds": round(seconds, 3),
                "reason": self._outage_reason,
                "recovered": ended,
                "unconfirmed_at_drop": abandoned,
                "unacked_at_drop": self._outage_unacked,
            },
        )

    def _error(self, message: str, detail: dict[str, Any] | None = None) -> None:
        self.errors.append(message)
        self._new_errors.append(message)
        self._event(EventKind.ERROR, message, {"worker": self.index, **(detail or {})})

    def _event(self, kind: EventKind, message: str, detail: dict[str, Any] | None = None) -> None:
        event = RunEvent(time.time(), kind, message, detail=detail or {"worker": self.index})
        self.emit(WorkerEvent(self.index, event))


def _needs(value: float | None) -> float:
    """The value of a numeric change (Change refuses one without, so this never raises
    for a change that was parsed or built)."""
    if value is None:
        raise ValueError("a numeric setting's change carries a value")
    return value


#: How a worker applies each change: one method per row of ``engine.settings``.
_APPLY: dict[Setting, Callable[[_Worker, float | None], Awaitable[None]]] = {
    Setting.INFLIGHT: _Worker._apply_inflight,
    Setting.PREFETCH: _Worker._apply_prefetch,
    Setting.ACK_EVERY: _Worker._apply_ack_every,
    Setting.RATE: _Worker._apply_rate,
    Setting.PUBLISHERS: _Worker._apply_publishers,
    Setting.CONSUMERS: _Worker._apply_consumers,
    Setting.WORK: _Worker._apply_work,
    Setting.REJECT: _Worker._apply_reject,
    Setting.POISON: _Worker._apply_poison,
    Setting.MESSAGE_SIZE: _Worker._apply_message_size,
    Setting.PAUSE: _Worker._apply_pause,
    Setting.RESUME: _Worker._apply_resume,
    Setting.MARK: _Worker._apply_mark,
}


def _unmarked(sets: dict[int, SequenceSet]) -> dict[int, SequenceSet]:
    """Sequence sets by publisher id without the poison mark (the dead-letter queue holds
    poison messages, counted there as their publisher id with the mark set)."""
    out: dict[int, SequenceSet] = {}
    for publisher, sequences in sets.items():
        merged = out.setdefault(publisher & PUBLISHER_BITS, SequenceSet())
        for start, end in sequences.ranges:
            merged.add_range(start, end)
    return out


def _ranges(sets: dict[int, SequenceSet]) -> tuple[SequenceRanges, ...]:
    return tuple(sets[p].to_ranges(p) for p in sorted(sets) if len(sets[p]))
