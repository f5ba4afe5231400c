"""One consumer on its own connection: prefetch, acks every N, sequence tracking.

Deliveries arrive from the connection's reader as (tag, redelivered, buffer, offset); the
body's publisher id, sequence and send times are read in place with ``struct``. Acks are
a prebuilt Basic.Ack frame with the delivery tag patched in (multiple flag when
``ack_every`` > 1), gathered over one read and written once at the end of it.

A new basic.qos does not change the prefetch of a consumer that already exists (RabbitMQ
applies it to consumers started afterwards), so :meth:`Consumer.set_prefetch` opens a
second channel with the new qos, consumes there, and only then cancels the old consumer
and acks what it still held: consumption never stops and the new value is really in force.

A consumer whose channel is closed or whose consumer the broker cancels (queue deleted)
tells ``on_trouble``; the worker then calls :meth:`Consumer.resubscribe`, on a new
connection when the old one is gone. The tally goes on: redeliveries of what was unacked at
the drop are counted, and deliveries of sequences already consumed count as duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from flowdeck.engine.amqp.connection import AmqpClosed, Channel, Connection, NullListener
from flowdeck.engine.amqp.frames import ACK_FIELDS, ACK_TAG_OFFSET, BODY_FIELDS, ack_frame
from flowdeck.engine.samples import LatencySamples
from flowdeck.engine.sequences import SequenceSet

_unpack_body = BODY_FIELDS.unpack_from
_pack_ack = ACK_FIELDS.pack_into


class ConsumerTally:
    """Counts and sequence sets shared by every channel of one consumer (and, for the
    sequence sets, by every consumer of a worker: a publisher's messages may reach any of
    them).
    """

    __slots__ = (
        "acked",
        "consumed",
        "duplicates",
        "first_ns",
        "foreign",
        "last_ns",
        "redelivered",
        "replayed",
        "sequences",
    )

    def __init__(self, sequences: dict[int, SequenceSet]) -> None:
        self.consumed = 0
        self.acked = 0
        self.redelivered = 0
        self.duplicates = 0
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
        tally = consumer.tally
        tally.consumed += 1
        if redelivered:
            tally.redelivered += 1
        tally.record(
            buffer, offset, size, consumer.run_start_ns, consumer.latency, consumer.reading
        )
        if consumer.auto_ack:
            return
        self._last_tag = tag
        self.unacked += 1
        if self.unacked >= consumer.ack_every:
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
        stream: bool = False,
    ) -> None:
        self.consumer_id = consumer_id
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
        return self.current.unacked if self.current is not None else 0

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
                    current.flush()
                    await current.channel.close("run finished")
                except AmqpClosed:
                    pass

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
