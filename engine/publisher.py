"""One AMQP 0.9.1 publisher on its own connection: paced, windowed, confirm-tracking.

The hot path: whenever the publisher wakes up (its pacing timer, a read that brought
confirms, the transport taking writes again) it works out how many messages it may send —
what the pacer says is due, capped by the room left in the in-flight window — copies its
prebuilt frames that many times, patches sequence and send times into each body with
``struct.pack_into`` and hands the whole batch to the transport in one write. Confirms
arrive as integers from the connection's reader; delivery tags are the channel's publish
order, so tag ``t`` on the publisher's first channel is its ``first_sequence + t - 1``.
Pacing, the window and the confirm accounting are every protocol's
(engine/client_base.py ``PacedPublisher``).

When its channel or connection is lost the publisher keeps its counters: what was in flight
then can never be confirmed (delivery tags die with the channel) and is counted as
``abandoned`` (published, unconfirmed, not lost); :meth:`Publisher.rebind` puts it on a new
channel, where tags start again at 1 after the messages already published.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial

from flowdeck.engine.amqp.connection import AmqpClosed, Channel, Connection
from flowdeck.engine.amqp.frames import SEND_FIELDS, publish_template
from flowdeck.engine.client_base import MAX_BATCH, MIN_SLEEP, PacedPublisher
from flowdeck.engine.samples import LatencySamples

__all__ = ["MAX_BATCH", "MIN_SLEEP", "Publisher"]


def is_marked(sequence: int, share: float) -> bool:
    """Whether a publisher's message ``sequence`` is among ``share`` (0..1) of its messages
    (poison, or at the high priority): when floor((s + 1) × share) passes floor(s × share),
    so any run of messages holds the share to within one."""
    return int((sequence + 1) * share) > int(sequence * share)


class Publisher(PacedPublisher):
    """Publishes to one exchange/routing key on ``channel`` until stopped.

    ``inflight`` 0 means no window; with ``confirms`` off there is no window at all and the
    transport's back-pressure (pause_writing) is the only brake.
    """

    def __init__(
        self,
        *,
        publisher_id: int,
        connection: Connection,
        channel: Channel,
        exchange: str,
        routing_key: str,
        message_size: int,
        persistent: bool,
        mandatory: bool,
        confirms: bool,
        inflight: int,
        rate: float,
        first_sequence: int,
        confirm_latency: LatencySamples,
        catch_up: bool = True,
        poison: float = 0.0,
        priority: int = 0,
        priority_distribution: str = "constant",
        priority_share: float = 0.0,
    ) -> None:
        super().__init__(
            publisher_id=publisher_id,
            loop=connection.loop,
            confirms=confirms,
            inflight=inflight,
            rate=rate,
            first_sequence=first_sequence,
            confirm_latency=confirm_latency,
            catch_up=catch_up,
        )
        #: The share of messages marked poison (0..1): sequence s is marked when
        #: floor((s + 1) × share) passes floor(s × share), so the share is exact.
        self.poison = poison / 100
        #: Message priorities (see ``RunSpec.message_priority``): the highest, how they are
        #: drawn, and for the share distribution the share at the highest (0..1), sequence s
        #: high as a poison message is marked. A constant priority is in the template.
        self.priority = priority
        self.priority_distribution = priority_distribution if priority else "constant"
        self.priority_share = priority_share / 100
        #: Each batch's priorities drawn per message (else the template's one value).
        self._draws_priorities = self.priority_distribution != "constant"
        self.connection = connection
        self.channel = channel
        self.error: AmqpClosed | None = None
        self._make_template = partial(
            publish_template,
            exchange=exchange,
            routing_key=routing_key,
            mandatory=mandatory,
            persistent=persistent,
            publisher_id=publisher_id,
            message_size=message_size,
            # None: no priority property; 0 where each message's is patched in per batch
            priority=None if not priority else 0 if self._draws_priorities else priority,
        )
        self._template = self._make_template(channel=channel.id, frame_max=connection.frame_max)
        self._waiting_writable = False
        channel.listener = self

    # -- control ------------------------------------------------------------------------

    def rebind(self, connection: Connection, channel: Channel) -> None:
        """Carry on publishing on a new channel (confirm mode already selected on it).

        Counters and sequence numbers continue; the rate schedule starts afresh, as after a
        pause (the messages not sent while the channel was down are not owed).
        """
        if self.error is None:
            self._abandon_channel()
        self.connection = connection
        self.loop = connection.loop
        self.channel = channel
        self._template = self._make_template(channel=channel.id, frame_max=connection.frame_max)
        self.error = None
        self._settled.clear()
        channel.listener = self
        if self.started and not self.stopped:
            self.pacer.restart(time.time_ns())
            self.pump()
        else:
            self._check_settled()

    def set_size(self, size: int) -> None:
        """Publish ``size``-byte messages from the next batch on."""
        self._make_template = partial(self._make_template, message_size=size)
        self._template = self._make_template(
            channel=self.channel.id, frame_max=self.connection.frame_max
        )

    def set_poison(self, percent: float) -> None:
        self.poison = percent / 100

    def _mark_poison(self, batch: bytearray, sequence: int, count: int) -> None:
        """Set the poison mark (the publisher id's top bit) on this batch's poison messages."""
        share = self.poison
        size = self._template.size
        at = self._template.fields_offset - 4  # the publisher id, before the sequence
        for i in range(count):
            if is_marked(sequence + i, share):
                batch[at + i * size] |= 0x80

    def _draw_priorities(self, batch: bytearray, sequence: int, count: int) -> None:
        """Set each message's priority of this batch: drawn evenly 0..priority (uniform), or
        the highest for the share's messages and 0 for the rest (share)."""
        size = self._template.size
        at = self._template.priority_offset
        highest = self.priority
        if self.priority_distribution == "uniform":
            draw = random.randint
            for i in range(count):
                batch[at + i * size] = draw(0, highest)
            return
        share = self.priority_share
        for i in range(count):
            if is_marked(sequence + i, share):
                batch[at + i * size] = highest

    # -- the hot path -------------------------------------------------------------------

    def _failed(self) -> bool:
        return self.error is not None

    def _held(self) -> bool:
        connection = self.connection
        if connection.blocked_reason is not None:
            # The broker reads nothing from a blocked connection (an alarm): sending would
            # only fill socket buffers and show a publish rate that is not there. The rate
            # schedule runs on, so the intended-send latency shows the wait afterwards.
            self._cancel_timer()
            return True
        if connection.writing_paused:
            if not self._waiting_writable:
                self._waiting_writable = True
                connection.when_writable(self._on_writable)
            return True
        return False

    def _on_writable(self) -> None:
        self._waiting_writable = False
        self.pump()

    def _write(self, count: int, sequence: int, now: int, intended: list[int]) -> None:
        template = self._template
        size = template.size
        batch = bytearray(template.frames) * count
        pack = SEND_FIELDS.pack_into
        offset = template.fields_offset
        for i in range(count):
            pack(batch, offset, sequence + i, now, intended[i])
            offset += size
        if self.poison:
            self._mark_poison(batch, sequence, count)
        if self._draws_priorities:
            self._draw_priorities(batch, sequence, count)
        self.connection.write(batch)

    # -- the channel's listener -----------------------------------------------------------

    def on_ack(self, tag: int, multiple: bool) -> None:
        self._resolve(tag, multiple, acked=True)

    def on_nack(self, tag: int, multiple: bool) -> None:
        self._resolve(tag, multiple, acked=False)

    def on_return(self, reply_code: int, reply_text: str, body: bytes = b"") -> None:
        self.returned += 1
        if len(body) >= 12:
            self.returned_sequences.add(int.from_bytes(body[4:12], "big"))

    def on_deliver(
        self, tag: int, redelivered: bool, buffer: bytes | bytearray, offset: int, size: int
    ) -> None:
        pass

    def on_cancelled(self, consumer_tag: str) -> None:
        pass

    def on_closed(self, reason: AmqpClosed) -> None:
        self._abandon_channel()
        self.error = reason
        self._cancel_timer()
        self._settled.set()
        if self.on_channel_lost is not None:
            self.on_channel_lost(self, reason)

    #: Told when the channel is lost (set by the worker, which reconnects).
    on_channel_lost: Callable[[Publisher, AmqpClosed], None] | None = None

    def _abandon_channel(self) -> None:
        super()._abandon_channel()
        self._waiting_writable = False
