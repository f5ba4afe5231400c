"""A stream-protocol consumer: reads one stream from an offset, credit as its prefetch.

The protocol's credit counts chunks (a chunk is a batch of messages the broker wrote
together): the subscription starts with ``prefetch`` credits and gives one back per chunk
handled, so at most ``prefetch`` chunks are on their way. A higher prefetch is granted at
once (the difference in credits); a lower one by not giving back the next credits. A stream
needs no acks: ``ack_every`` does nothing here and nothing is ever unacked.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

from rstream import schema
from rstream.client import Client
from rstream.constants import OffsetType

from flowdeck.engine.client_base import LinkConnection
from flowdeck.engine.consumer import ConsumerTally
from flowdeck.engine.samples import LatencySamples
from flowdeck.engine.sequences import SequenceSet
from flowdeck.engine.spec import stream_offset

#: The protocol's credit is a 16-bit number.
MAX_CREDIT = 65_535


def offset_specification(text: str, run_start: float) -> schema.OffsetSpec:
    """The protocol's offset for ``stream_offset`` (``start``: the run's start second)."""
    kind, value = stream_offset(text)
    if kind == "start":
        return schema.OffsetSpec.from_params(OffsetType.TIMESTAMP, int(run_start - 1) * 1000)
    if kind == "timestamp":
        return schema.OffsetSpec.from_params(OffsetType.TIMESTAMP, value * 1000)
    if kind == "offset":
        return schema.OffsetSpec.from_params(OffsetType.OFFSET, value)
    return schema.OffsetSpec.from_params(OffsetType[kind.upper()], None)


def amqp_offset(text: str, run_start: float) -> Any:
    """The ``x-stream-offset`` consume argument of AMQP 0.9.1 for ``stream_offset``."""
    kind, value = stream_offset(text)
    if kind == "start":
        return datetime.fromtimestamp(int(run_start) - 1, tz=UTC)
    if kind == "timestamp":
        return datetime.fromtimestamp(value, tz=UTC)
    if kind == "offset":
        return value
    return kind


class StreamConsumer:
    """Reads ``queue`` (a stream) on ``client`` from ``offset``."""

    def __init__(
        self,
        *,
        consumer_id: int,
        client: Client,
        connection: LinkConnection,
        queue: str,
        prefetch: int,
        offset: schema.OffsetSpec,
        tally: ConsumerTally,
        latency: LatencySamples,
        run_start_ns: int,
    ) -> None:
        self.consumer_id = consumer_id
        self.client = client
        self.connection = connection
        self.queue = queue
        self.prefetch = prefetch
        self.offset = offset
        self.tally = tally
        self.latency = latency
        self.run_start_ns = run_start_ns
        self.consumed = 0
        self.chunks = 0
        #: What this consumer has read: a message new to it that another read is a replay.
        self.reading = SequenceSet()
        self.error: str | None = None
        self._withheld = 0  # credits not to give back (a lowered prefetch)
        self._subscription = 0

    @property
    def unacked(self) -> int:
        return 0

    async def start(self) -> None:
        sub = self._subscription
        client = self.client
        client.add_handler(schema.Deliver, self._on_deliver, name=str(sub))
        await client.run_queue_listener_task(sub, self._on_deliver)
        await client.subscribe(
            self.queue,
            sub,
            offset_spec=self.offset,
            initial_credit=min(self.prefetch, MAX_CREDIT),
        )

    async def _on_deliver(self, frame: Any) -> None:
        if frame.subscription_id != self._subscription:
            return
        tally = self.tally
        record = tally.record
        start, latency, reading = self.run_start_ns, self.latency, self.reading
        messages = frame.get_messages()
        for message in messages:
            record(message, 0, len(message), start, latency, reading)
        self.consumed += len(messages)
        tally.consumed += len(messages)
        self.chunks += 1
        if self._withheld:
            self._withheld -= 1
        elif self.connection.open:
            await self.client.credit(self._subscription, 1)

    async def set_prefetch(self, prefetch: int) -> None:
        """Credit up to ``prefetch`` chunks from now on (see the module doc)."""
        more = prefetch - self.prefetch
        self.prefetch = prefetch
        if more < 0:
            self._withheld -= more
            return
        repaid = min(more, self._withheld)
        self._withheld -= repaid
        more -= repaid
        while more > 0 and self.connection.open:
            grant = min(more, MAX_CREDIT)
            await self.client.credit(self._subscription, grant)
            more -= grant

    def set_ack_every(self, ack_every: int) -> None:
        """A stream is not acked."""

    def flush(self) -> None:
        """Nothing is held: a stream is not acked."""

    def lost(self, reason: str) -> None:
        self.error = reason

    async def stop(self) -> None:
        if self.connection.open and self.error is None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.client.unsubscribe(self._subscription), 5)
