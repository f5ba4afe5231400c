"""One consumer on its own connection: prefetch, acks every N, sequence tracking.

Deliveries arrive from the connection's reader as (tag, redelivered, buffer, offset); the
body's publisher id, sequence and send times are read in place with ``struct``. Acks are
a prebuilt Basic.Ack frame with the delivery tag patched in (multiple flag when
``ack_every`` > 1), gathered over one read and written once at the end of it.

A new basic.qos does not change the prefetch of a consumer that already exists (RabbitMQ
applies it to consumers started afterwards), so :meth:`Consumer.set_prefetch` opens a
second channel with the new qos, consumes there, and only then cancels the old consumer
and acks what it still held: consumption never stops and the new value is really in force.

A consumer that works or rejects (:class:`Handling`, shared by a worker's consumers and
changed live) takes its deliveries one at a time, as an application does: each one is
counted when it arrives (its latency too, as PerfTest counts it), then waits its turn in the
consumer's work lane, is worked on for its drawn work time (``asyncio.sleep`` on the
consumer's own task: the worker's other consumers go on meanwhile) and only then acked, or
rejected (basic.nack, requeued or not). The lane keeps the consumer's clock: a message's
work starts when the one before it ended, or when it arrived if the consumer was idle, so a
timer that wakes late does not slow a busy consumer down. A rejected delivery is not
consumed: it counts as rejected (and requeued when sent back); a poison message (marked by
its publisher, the top bit of the publisher id) is rejected at every delivery. Deliveries
rejected for good are kept by sequence, so the run's accounting can tell them from lost.

A consumer whose channel is closed or whose consumer the broker cancels (queue deleted)
tells ``on_trouble``; the worker then calls :meth:`Consumer.resubscribe`, on a new
connection when the old one is gone. The tally goes on: redeliveries of what was unacked at
the drop are counted, and deliveries of sequences already consumed count as duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from flowdeck.engine.amqp.connection import AmqpClosed, Channel, Connection, NullListener
from flowdeck.engine.amqp.frames import (
    ACK_FIELDS,
    ACK_TAG_OFFSET,
    BODY_FIELDS,
    ack_frame,
    nack_frame,
)
from flowdeck.engine.samples import LatencySamples
from flowdeck.engine.sequences import SequenceSet

_unpack_body = BODY_FIELDS.unpack_from
_pack_ack = ACK_FIELDS.pack_into
#: The publisher id's top bit marks a poison message (publisher ids stay below it).
POISON_MARK = 0x8000_0000
#: The publisher id without the mark.
PUBLISHER_BITS = POISON_MARK - 1


class Handling:
    """How a worker's consumers treat each delivery: work time, rejections, poison. One
    object shared by them all, changed in place when a setting changes (``active`` says
    whether there is anything to do beyond acking)."""

    __slots__ = (
        "active",
        "delivery_limit",
        "distribution",
        "poison_seen",
        "reject",
        "requeue",
        "spread",
        "work",
    )

    def __init__(
        self,
        *,
        work_ms: float = 0.0,
        distribution: str = "constant",
        spread_ms: float = 0.0,
        reject: float = 0.0,
        requeue: bool = True,
        poison: float = 0.0,
        delivery_limit: int = 0,
    ) -> None:
        self.distribution = distribution
        #: The queues' delivery limit (quorum queues' x-delivery-limit; 0: none): a message
        #: requeued after that many failed deliveries is dead-lettered or dropped by the
        #: broker, so it is rejected for good; a poison message always is in the end.
        self.delivery_limit = delivery_limit
        self.spread = spread_ms / 1000
        self.requeue = requeue
        self.work = 0.0
        self.reject = 0.0
        #: Once poison messages were published in the run, every delivery is looked at.
        self.poison_seen = False
        self.active = False
        self.set(work_ms=work_ms, reject=reject, poison=poison)

    def set(
        self,
        *,
        work_ms: float | None = None,
        reject: float | None = None,
        poison: float | None = None,
    ) -> None:
        if work_ms is not None:
            self.work = work_ms / 1000
        if reject is not None:
            self.reject = reject / 100
        if poison:
            self.poison_seen = True
        self.active = bool(self.work or self.reject or self.poison_seen)

    def draw(self) -> float:
        """One message's work time in seconds."""
        work = self.work
        if not work or self.distribution == "constant":
            return work
        if self.distribution == "uniform":
            return max(0.0, random.uniform(work - self.spread, work + self.spread))
        return random.expovariate(1 / work)


class ConsumerTally:
    """Counts and sequence sets shared by every channel of one consumer (and, for the
    sequence sets, by every consumer of a worker: a publisher's messages may reach any of
    them).
    """

    __slots__ = (
        "acked",
        "consumed",
        "discarded",
        "duplicates",
        "first_ns",
        "foreign",
        "last_ns",
        "poison",
        "redelivered",
        "rejected",
        "replayed",
        "requeued",
        "sequences",
    )

    def __init__(self, sequences: dict[int, SequenceSet]) -> None:
        self.consumed = 0
        self.acked = 0
        self.redelivered = 0
        self.duplicates = 0
        #: Deliveries rejected (basic.nack), of them sent back to the queue, and of them
        #: poison messages.
        self.rejected = 0
        self.requeued = 0
        self.poison = 0
        #: This run's messages rejected without requeue, by publisher: the broker
        #: dead-lettered or dropped them.
        self.discarded: dict[int, SequenceSet] = {}
        #: Stream messages read again (another reader, or a re-read from an offset): a
        #: stream keeps what it delivered, so these are not duplicates.
        self.replayed = 0
        self.foreign = 0  # messages not from this run (too short, or sent before it began)
        self.sequences = sequences
        #: Unix ns of the first and last delivery of this run's messages (0: none yet).
        self.first_ns = 0
        self.last_ns = 0

    def record(
        self,
        buffer: bytes | bytearray | memoryview,
        offset: int,
        size: int,
        run_start_ns: int,
        latency: LatencySamples,
        reading: SequenceSet | None = None,
    ) -> None:
        """Account one delivered body (any protocol's): whose message, consumed before or
        not, its end-to-end latency. ``reading`` is a stream reader's own set: a sequence
        new to it but consumed before is a replay; one it read twice is a duplicate."""
        if size < 28:
            self.foreign += 1
            return
        publisher, sequence, actual, intended = _unpack_body(buffer, offset)
        if actual < run_start_ns:
            self.foreign += 1
            return
        tracker = self.sequences.get(publisher)
        if tracker is None:
            tracker = self.sequences[publisher] = SequenceSet()
        if reading is not None:
            if not reading.add((publisher << 40) | sequence):
                self.duplicates += 1
                return
            if not tracker.add(sequence):
                self.replayed += 1
                return
        elif not tracker.add(sequence):
            self.duplicates += 1
        now = time.time_ns()
        if not self.first_ns:
            self.first_ns = now
        self.last_ns = now
        latency.actual.append(now - actual)
        latency.intended.append(now - intended)


class ConsumerChannel(NullListener):
    """The listener of one consuming channel."""

    def __init__(
        self,
        consumer: Consumer,
        channel: Channel,
    ) -> None:
        self.consumer = consumer
        self.channel = channel
        self.consumer_tag = ""
        self.unacked = 0
        self._last_tag = 0
        self._ack = ack_frame(channel.id)
        self._out = bytearray()
        channel.listener = self

    def on_deliver(
        self, tag: int, redelivered: bool, buffer: bytes | bytearray, offset: int, size: int
    ) -> None:
        consumer = self.consumer
        consumer.consumed += 1
        shaped = consumer.handling.active
        if shaped and self._rejected(tag, redelivered, buffer, offset, size):
            return
        tally = consumer.tally
        tally.consumed += 1
        if redelivered:
            tally.redelivered += 1
        tally.record(
            buffer, offset, size, consumer.run_start_ns, consumer.latency, consumer.reading
        )
        if consumer.auto_ack:
            return
        if shaped:  # acked after its work
            consumer.settle(self, tag, False, rejected=False)
            return
        self._last_tag = tag
        self.unacked += 1
        if self.unacked >= consumer.ack_every:
            self._queue_ack()

    def _rejected(
        self, tag: int, redelivered: bool, buffer: bytes | bytearray, offset: int, size: int
    ) -> bool:
        """Whether a consumer that rejects rejects this delivery (a poison message, or its
        share of the rest; see the module doc): counted and settled here if so. An
        accepted delivery is never poison, so its publisher id carries no mark."""
        consumer = self.consumer
        handling = consumer.handling
        poison = size >= 28 and buffer[offset] & 0x80
        if not (poison or (handling.reject and random.random() < handling.reject)):
            return False
        tally = consumer.tally
        tally.rejected += 1
        if redelivered:
            tally.redelivered += 1
        if poison:
            tally.poison += 1
        requeue = handling.requeue
        if requeue:
            tally.requeued += 1
        limit = handling.delivery_limit
        # The broker drops (or dead-letters) a message requeued once its failed deliveries
        # before this one (x-delivery-count) reached the limit; a first delivery has none,
        # so its header is not looked at.
        last = (
            bool(limit)
            and requeue
            and (
                bool(poison)
                or (redelivered and self.channel.delivery_count(buffer, offset) >= limit)
            )
        )
        if (not requeue or last) and size >= 28:
            publisher, sequence, actual, _ = _unpack_body(buffer, offset)
            if actual >= consumer.run_start_ns:
                publisher &= PUBLISHER_BITS
                kept = tally.discarded.get(publisher)
                if kept is None:
                    kept = tally.discarded[publisher] = SequenceSet()
                kept.add(sequence)
        consumer.settle(self, tag, requeue, rejected=True)
        return True

    def settle(self, tag: int, requeue: bool, *, rejected: bool) -> None:
        """Ack (every ``ack_every``) or reject one delivery now; written at the read's end
        (or at once when called from the work lane)."""
        if rejected:
            self._out += nack_frame(self.channel.id, tag, requeue)
            return
        self._last_tag = tag
        self.unacked += 1
        if self.unacked >= self.consumer.ack_every:
            self._queue_ack()

    def _queue_ack(self) -> None:
        ack = self._ack
        _pack_ack(ack, ACK_TAG_OFFSET, self._last_tag, 1 if self.unacked > 1 else 0)
        self._out += ack
        self.consumer.tally.acked += self.unacked
        self.unacked = 0

    def on_read_done(self) -> None:
        if self._out:
            self.channel.write(self._out)
            self._out = bytearray()

    def flush(self) -> None:
        """Ack whatever is held now (the last partial batch)."""
        if self.unacked:
            self._queue_ack()
        self.on_read_done()

    def on_cancelled(self, consumer_tag: str) -> None:
        self.consumer.on_broker_cancel(consumer_tag)

    def on_closed(self, reason: AmqpClosed) -> None:
        self.consumer.on_channel_closed(self, reason)


class Consumer:
    """Consumes one queue on ``connection``; ``ack_every`` can change at any time."""

    def __init__(
        self,
        *,
        consumer_id: int,
        connection: Connection,
        queue: str,
        prefetch: int,
        ack_every: int,
        auto_ack: bool,
        arguments: dict[str, Any] | None,
        tally: ConsumerTally,
        latency: LatencySamples,
        run_start_ns: int,
        handling: Handling | None = None,
        stream: bool = False,
    ) -> None:
        self.consumer_id = consumer_id
        self.handling = handling if handling is not None else Handling()
        #: Deliveries waiting for their work (see the module doc): when each came (loop
        #: time), the channel it came on, its tag, whether it is requeued and rejected.
        self._lane: deque[tuple[float, ConsumerChannel, int, bool, bool]] = deque()
        self._lane_wake: asyncio.Event | None = None
        self._lane_task: asyncio.Task[None] | None = None
        self._lane_busy_until = 0.0
        #: Lane entries per channel: a retired channel closes once its are settled.
        self._lane_held: dict[ConsumerChannel, int] = {}
        self.connection = connection
        self.queue = queue
        self.prefetch = prefetch
        self.ack_every = ack_every
        self.auto_ack = auto_ack
        self.arguments = arguments
        self.tally = tally
        self.latency = latency
        self.run_start_ns = run_start_ns
        #: On a stream queue, what this consumer has read (re-reads by others are replays).
        self.reading: SequenceSet | None = SequenceSet() if stream else None
        self.consumed = 0
        self.current: ConsumerChannel | None = None
        self.error: AmqpClosed | None = None
        self.cancelled_by_broker = False
        #: Told when consuming stopped for a reason of the broker's (set by the worker).
        self.on_trouble: Callable[[Consumer, AmqpClosed], None] | None = None
        self._lock = asyncio.Lock()

    @property
    def unacked(self) -> int:
        held = self.current.unacked if self.current is not None else 0
        return held + len(self._lane)

    def settle(self, channel: ConsumerChannel, tag: int, requeue: bool, *, rejected: bool) -> None:
        """Settle a delivery of ``channel`` now, or after its work in the lane."""
        if not self.handling.work and not self._lane:
            channel.settle(tag, requeue, rejected=rejected)
            return
        loop = asyncio.get_running_loop()
        self._lane.append((loop.time(), channel, tag, requeue, rejected))
        self._lane_held[channel] = self._lane_held.get(channel, 0) + 1
        if self._lane_task is None:
            self._lane_wake = asyncio.Event()
            self._lane_task = loop.create_task(self._work())
        elif self._lane_wake is not None:
            self._lane_wake.set()

    async def _work(self) -> None:
        """The consumer's work lane: one delivery at a time, each for its drawn work time
        from when the one before it ended (or it arrived), then settled."""
        lane = self._lane
        wake = self._lane_wake
        assert wake is not None
        loop = asyncio.get_running_loop()
        while True:
            while not lane:
                wake.clear()
                await wake.wait()
            # From when it came, or when the one before it ended: a timer that woke late
            # does not make the next message start late.
            until = max(lane[0][0], self._lane_busy_until) + self.handling.draw()
            self._lane_busy_until = until
            while (delay := until - loop.time()) > 0:
                await asyncio.sleep(delay)
            if not lane:  # settled meanwhile (the consumer stopped)
                continue
            _, channel, tag, requeue, rejected = lane.popleft()
            self._release(channel)
            if channel.channel.is_open and channel.channel.closed_reason is None:
                channel.settle(tag, requeue, rejected=rejected)
                channel.on_read_done()

    def _release(self, channel: ConsumerChannel) -> None:
        held = self._lane_held.get(channel, 0) - 1
        if held > 0:
            self._lane_held[channel] = held
        else:
            self._lane_held.pop(channel, None)

    async def _lane_done(self, channel: ConsumerChannel) -> None:
        """Wait until the lane holds nothing of ``channel`` (its work done and settled)."""
        while self._lane_held.get(channel) and self._lane_task is not None:
            await asyncio.sleep(min(0.05, max(self.handling.work, 0.001)))

    def _settle_lane_now(self) -> None:
        """Settle what waits in the lane at once (the run is stopping): each delivery was
        counted when it came, so it must not go back to the queue."""
        lane = self._lane
        while lane:
            _, channel, tag, requeue, rejected = lane.popleft()
            self._release(channel)
            if channel.channel.is_open and channel.channel.closed_reason is None:
                channel.settle(tag, requeue, rejected=rejected)
                channel.on_read_done()

    def _stop_lane(self) -> None:
        task, self._lane_task = self._lane_task, None
        if task is not None:
            task.cancel()

    async def start(self) -> None:
        self.current = await self._subscribe(self.prefetch)

    async def _subscribe(self, prefetch: int) -> ConsumerChannel:
        channel = await self.connection.channel()
        listener = ConsumerChannel(self, channel)
        if not self.auto_ack:
            await channel.qos(prefetch)
        listener.consumer_tag = await channel.consume(
            self.queue,
            consumer_tag=f"flowdeck-{self.consumer_id}-{channel.id}",
            no_ack=self.auto_ack,
            arguments=self.arguments,
        )
        return listener

    async def set_prefetch(self, prefetch: int) -> None:
        """Put ``prefetch`` in force without a gap in consumption (see the module doc)."""
        async with self._lock:
            self.prefetch = prefetch
            if self.auto_ack or self.current is None or self.error is not None:
                return
            old = self.current
            self.current = await self._subscribe(prefetch)
            await self._retire(old)

    def set_ack_every(self, ack_every: int) -> None:
        self.ack_every = ack_every
        current = self.current
        if current is not None and current.unacked >= ack_every:
            current.flush()

    async def _retire(self, old: ConsumerChannel) -> None:
        # Deliveries before Cancel-Ok are all read by the time it returns; ack them before
        # closing, or closing the channel would requeue them.
        try:
            await old.channel.cancel(old.consumer_tag)
            await self._lane_done(old)
            old.flush()
            await old.channel.close("prefetch changed")
        except AmqpClosed:
            pass

    def flush(self) -> None:
        if self.current is not None and self.error is None:
            self.current.flush()

    async def stop(self) -> None:
        """Stop consuming: cancel, ack what is held, close the channel."""
        async with self._lock:
            current, self.current = self.current, None
            if current is not None and self.error is None:
                try:
                    await current.channel.cancel(current.consumer_tag)
                    self._settle_lane_now()
                    current.flush()
                    await current.channel.close("run finished")
                except AmqpClosed:
                    pass
            self._stop_lane()

    async def resubscribe(self, connection: Connection | None = None) -> None:
        """Consume again after trouble: on ``connection`` when the old one is gone, else on
        a new channel of the same connection. Raises :class:`AmqpClosed` if the broker
        refuses (e.g. the queue is still missing); call again later.
        """
        async with self._lock:
            if connection is not None:
                self.connection = connection
            old, self.current = self.current, None
            if old is not None and old.channel.is_open and old.channel.closed_reason is None:
                self._settle_lane_now()
                old.flush()
                with contextlib.suppress(AmqpClosed):
                    await old.channel.close("consuming again")
            self.current = await self._subscribe(self.prefetch)
            self.error = None
            self.cancelled_by_broker = False

    def on_broker_cancel(self, consumer_tag: str) -> None:
        current = self.current
        if current is None or current.consumer_tag != consumer_tag:
            return
        self.cancelled_by_broker = True
        reason = AmqpClosed(
            f"the broker cancelled consumer {self.consumer_id} on queue {self.queue!r} "
            "(the queue was deleted or its node went down)",
            0,
        )
        self.error = reason
        if self.on_trouble is not None:
            self.on_trouble(self, reason)

    def on_channel_closed(self, channel: ConsumerChannel, reason: AmqpClosed) -> None:
        if channel is self.current:
            self.error = reason
            if self.on_trouble is not None:
                self.on_trouble(self, reason)
