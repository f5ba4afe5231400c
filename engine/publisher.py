"""One publisher on its own connection: paced, windowed, confirm-tracking.

The hot path: whenever the publisher wakes up (its pacing timer, a read that brought
confirms, the transport taking writes again) it works out how many messages it may send —
what the pacer says is due, capped by the room left in the in-flight window — copies its
prebuilt frames that many times, patches sequence and send times into each body with
``struct.pack_into`` and hands the whole batch to the transport in one write. Confirms
arrive as integers from the connection's reader; delivery tags are the channel's publish
order, so tag ``t`` on the publisher's first channel is its ``first_sequence + t - 1``.

When its channel or connection is lost the publisher keeps its counters: what was in flight
then can never be confirmed (delivery tags die with the channel) and is counted as
``abandoned`` (published, unconfirmed, not lost); :meth:`Publisher.rebind` puts it on a new
channel, where tags start again at 1 after the messages already published.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Callable
from functools import partial

from flowdeck.engine.amqp.connection import AmqpClosed, Channel, Connection, NullListener
from flowdeck.engine.amqp.frames import SEND_FIELDS, publish_template
from flowdeck.engine.pacer import Pacer, spread_phase
from flowdeck.engine.samples import LatencySamples
from flowdeck.engine.sequences import SequenceSet
from flowdeck.engine.snapshot import SequenceRanges

#: Most messages written in one go; then the loop gets a turn to read confirms.
MAX_BATCH = 1000
#: Shortest pacing sleep: below ~1 ms loops do not sleep reliably, the clock makes up.
MIN_SLEEP = 0.001
#: Confirmed send times are dropped from the front of the arrays in chunks this big.
_TRIM_EVERY = 65_536


class Publisher(NullListener):
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
    ) -> None:
        self.publisher_id = publisher_id
        #: The share of messages marked poison (0..1): sequence s is marked when
        #: floor((s + 1) × share) passes floor(s × share), so the share is exact.
        self.poison = poison / 100
        self.connection = connection
        self.channel = channel
        self.confirms = confirms
        self.inflight = inflight
        self.started = False
        self.first_sequence = first_sequence
        self.published = 0
        self.confirmed = 0
        self.nacked = 0
        self.returned = 0
        #: Unix ns of the first and last send and of the last confirm (0: none yet): the
        #: publishing time the run's rates are divided by comes from these.
        self.first_sent_ns = 0
        self.last_sent_ns = 0
        self.last_confirmed_ns = 0
        #: In flight when a channel was lost: never confirmed, never nacked.
        self.abandoned = 0
        #: Channels lost so far (each one ended with ``on_closed``).
        self.channels_lost = 0
        self.paused = False
        self.stopped = False
        self.error: AmqpClosed | None = None
        # Each publisher sends at its own point of the send interval (engine.pacer), so
        # publishers started together do not all send in the same instant.
        self.pacer = Pacer(
            rate, time.time_ns(), catch_up=catch_up, phase=spread_phase(publisher_id)
        )
        self._make_template = partial(
            publish_template,
            exchange=exchange,
            routing_key=routing_key,
            mandatory=mandatory,
            persistent=persistent,
            publisher_id=publisher_id,
            message_size=message_size,
        )
        self._template = self._make_template(channel=channel.id, frame_max=connection.frame_max)
        # Messages published on earlier channels: tag t here is published message base + t.
        self._channel_base = 0
        self._latency = confirm_latency
        # Send times by delivery tag - 1 - _trimmed, for confirm latency.
        self._sent_actual = array("q")
        self._sent_intended = array("q")
        self._trimmed = 0
        self._resolved_upto = 0  # every tag <= this is confirmed or nacked
        self._out_of_order: set[int] = set()
        self.confirmed_sequences = SequenceSet()
        self.nacked_sequences = SequenceSet()
        self.returned_sequences = SequenceSet()
        self._timer: asyncio.TimerHandle | None = None
        self._soon = False
        self._waiting_writable = False
        self._settled = asyncio.Event()
        channel.listener = self

    # -- control ------------------------------------------------------------------------

    @property
    def pending_confirms(self) -> int:
        if not self.confirms:
            return 0
        return self.published - self.confirmed - self.nacked - self.abandoned

    @property
    def next_sequence(self) -> int:
        return self.first_sequence + self.published

    def start(self) -> None:
        self.started = True
        self.pacer.restart(time.time_ns())
        self.pump()

    def rebind(self, connection: Connection, channel: Channel) -> None:
        """Carry on publishing on a new channel (confirm mode already selected on it).

        Counters and sequence numbers continue; the rate schedule starts afresh, as after a
        pause (the messages not sent while the channel was down are not owed).
        """
        if self.error is None:
            self._abandon_channel()
        self.connection = connection
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

    def set_rate(self, rate: float) -> None:
        self.pacer.set_rate(rate, time.time_ns())
        self._cancel_timer()
        self.pump()

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
            if int((sequence + i + 1) * share) > int((sequence + i) * share):
                batch[at + i * size] |= 0x80

    def set_inflight(self, inflight: int) -> None:
        self.inflight = inflight
        self.pump()

    def pause(self) -> None:
        self.paused = True
        self._cancel_timer()

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self.pacer.restart(time.time_ns())
            self.pump()

    def stop(self) -> None:
        """Publish no more; confirms still count."""
        self.stopped = True
        self._cancel_timer()
        self._check_settled()

    async def wait_confirms(self, timeout: float) -> bool:
        """Wait until every published message is confirmed or nacked; False on timeout."""
        self._check_settled()
        try:
            await asyncio.wait_for(self._settled.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def report_ranges(self) -> tuple[SequenceRanges, SequenceRanges]:
        """Confirmed (minus returned: routed nowhere, so never consumable) and nacked."""
        confirmed = self.confirmed_sequences
        if len(self.returned_sequences):
            kept = SequenceSet()
            returned = self.returned_sequences
            for start, end in confirmed.ranges:
                for number in range(start, end):
                    if number not in returned:
                        kept.add(number)
            confirmed = kept
        return (
            confirmed.to_ranges(self.publisher_id),
            self.nacked_sequences.to_ranges(self.publisher_id),
        )

    # -- the hot path -------------------------------------------------------------------

    def pump(self) -> None:
        """Send what is due and fits the window; arrange to be called again when needed."""
        self._soon = False
        if self.paused or self.stopped or self.error is not None:
            return
        connection = self.connection
        if connection.blocked_reason is not None:
            # The broker reads nothing from a blocked connection (an alarm): sending would
            # only fill socket buffers and show a publish rate that is not there. The rate
            # schedule runs on, so the intended-send latency shows the wait afterwards.
            self._cancel_timer()
            return
        if connection.writing_paused:
            if not self._waiting_writable:
                self._waiting_writable = True
                connection.when_writable(self._on_writable)
            return
        now = time.time_ns()
        pacer = self.pacer
        due = pacer.due(now)
        room = MAX_BATCH
        if self.confirms and self.inflight:
            room = min(room, self.inflight - self.pending_confirms)
        count = min(due, room)
        if count > 0:
            self._send(count, now)
        if due > count and count == room and room == MAX_BATCH:
            # Only the batch size held us back: continue after the loop has read.
            self._soon = True
            connection.loop.call_soon(self.pump)
        elif pacer.rate > 0 and due <= count and self._timer is None:
            delay = max((pacer.next_due_ns() - time.time_ns()) / 1e9, MIN_SLEEP)
            self._timer = connection.loop.call_later(delay, self._on_timer)
        # else: the window is full; the next confirms call pump() again.

    def _on_writable(self) -> None:
        self._waiting_writable = False
        self.pump()

    def _on_timer(self) -> None:
        self._timer = None
        if not self._soon:
            self.pump()

    def _send(self, count: int, now: int) -> None:
        template = self._template
        size = template.size
        batch = bytearray(template.frames) * count
        pack = SEND_FIELDS.pack_into
        offset = template.fields_offset
        sequence = self.first_sequence + self.published
        pacer = self.pacer
        if pacer.rate > 0:
            first = pacer.sent
            intended = [pacer.intended_ns(first + i) for i in range(count)]
            for i in range(count):
                pack(batch, offset, sequence + i, now, intended[i])
                offset += size
        else:
            intended = [now] * count
            for i in range(count):
                pack(batch, offset, sequence + i, now, now)
                offset += size
        if self.poison:
            self._mark_poison(batch, sequence, count)
        pacer.take(count)
        self.connection.write(batch)
        self.published += count
        if not self.first_sent_ns:
            self.first_sent_ns = now
        self.last_sent_ns = now
        if self.confirms:
            self._sent_actual.extend([now] * count)
            self._sent_intended.extend(intended)

    def on_read_done(self) -> None:
        if not self._soon and self._timer is None:
            self.pump()
        elif self.stopped:
            self._check_settled()

    def on_ack(self, tag: int, multiple: bool) -> None:
        self._resolve(tag, multiple, acked=True)

    def on_nack(self, tag: int, multiple: bool) -> None:
        self._resolve(tag, multiple, acked=False)

    def _resolve(self, tag: int, multiple: bool, acked: bool) -> None:
        upto = self._resolved_upto
        if tag <= upto or tag > self.published - self._channel_base:
            return  # already resolved, or not ours (a broker bug we will not act on)
        ooo = self._out_of_order
        base = self.first_sequence + self._channel_base - 1
        if multiple:
            if ooo:
                fresh = [t for t in range(upto + 1, tag + 1) if t not in ooo]
                for t in [t for t in ooo if t <= tag]:
                    ooo.discard(t)
            else:
                fresh = None
            count = len(fresh) if fresh is not None else tag - upto
            sequences = self.confirmed_sequences if acked else self.nacked_sequences
            if fresh is None:
                sequences.add_range(base + upto + 1, base + tag + 1)
            else:
                for t in fresh:
                    sequences.add(base + t)
            self._resolved_upto = tag
            if acked:
                self.confirmed += count
                self._record(upto + 1, tag + 1, fresh)
            else:
                self.nacked += count
        else:
            if tag in ooo:
                return
            if tag == upto + 1:
                upto += 1
                while upto + 1 in ooo:
                    upto += 1
                    ooo.discard(upto)
                self._resolved_upto = upto
            else:
                ooo.add(tag)
            if acked:
                self.confirmed += 1
                self.confirmed_sequences.add(base + tag)
                self._record(tag, tag + 1, None)
            else:
                self.nacked += 1
                self.nacked_sequences.add(base + tag)
        if self._resolved_upto - self._trimmed >= _TRIM_EVERY:
            drop = self._resolved_upto - self._trimmed
            del self._sent_actual[:drop]
            del self._sent_intended[:drop]
            self._trimmed += drop
        if self.stopped:
            self._check_settled()

    def _record(self, first_tag: int, end_tag: int, only: list[int] | None) -> None:
        now = time.time_ns()
        self.last_confirmed_ns = now
        lo = first_tag - 1 - self._trimmed
        hi = end_tag - 1 - self._trimmed
        if only is None:
            self._latency.actual.extend([now - t for t in self._sent_actual[lo:hi]])
            self._latency.intended.extend([now - t for t in self._sent_intended[lo:hi]])
        else:
            shift = 1 + self._trimmed
            self._latency.actual.extend([now - self._sent_actual[t - shift] for t in only])
            self._latency.intended.extend([now - self._sent_intended[t - shift] for t in only])

    def on_return(self, reply_code: int, reply_text: str, body: bytes = b"") -> None:
        self.returned += 1
        if len(body) >= 12:
            self.returned_sequences.add(int.from_bytes(body[4:12], "big"))

    def on_closed(self, reason: AmqpClosed) -> None:
        self._abandon_channel()
        self.error = reason
        self._cancel_timer()
        self._settled.set()
        if self.on_channel_lost is not None:
            self.on_channel_lost(self, reason)

    #: Told when the channel is lost (set by the worker, which reconnects).
    on_channel_lost: Callable[[Publisher, AmqpClosed], None] | None = None

    # -- helpers ------------------------------------------------------------------------

    def _abandon_channel(self) -> None:
        """Forget the current channel's delivery tags: what is in flight stays unconfirmed."""
        self.channels_lost += 1
        if self.confirms:
            self.abandoned += self.pending_confirms
        self._channel_base = self.published
        self._resolved_upto = 0
        self._out_of_order.clear()
        self._sent_actual = array("q")
        self._sent_intended = array("q")
        self._trimmed = 0
        self._soon = False
        self._waiting_writable = False

    def _check_settled(self) -> None:
        if self.pending_confirms == 0 or self.error is not None:
            self._settled.set()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
