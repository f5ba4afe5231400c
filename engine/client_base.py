"""What every protocol's clients share: the paced, windowed publisher and the shapes the
worker drives publishers, consumers and their connections through.

A protocol (engine/protocols.py picks one by ``spec.protocol``) supplies how bytes reach the
broker; the rest — pacing, the in-flight window, confirm latency, which sequence numbers were
confirmed or refused, pause/resume/stop — is :class:`PacedPublisher`'s, the same for AMQP
0.9.1 (engine/publisher.py), the stream protocol (engine/stream/) and AMQP 1.0
(engine/amqp10/). A confirm arrives as a *tag*: the message's place in the publisher's send
order on its current link, 1 for the first (AMQP 0.9.1's delivery tag; a stream publishing
id or an AMQP 1.0 delivery maps onto it).
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

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


@dataclass(frozen=True, slots=True)
class Place:
    """Where one client connects and what it is called."""

    uri: str
    name: str
    #: The broker's stream protocol port (protocol = stream).
    stream_port: int
    #: The run's common start (unix seconds).
    start_at: float
    run_start_ns: int
    #: Told, with why, when the client's connection is lost.
    on_lost: Callable[[str], None]


class ClientConnection(Protocol):
    """What the worker asks of a client's connection, whatever its protocol."""

    name: str
    read_hold: float

    @property
    def is_open(self) -> bool: ...

    @property
    def blocked(self) -> bool: ...

    @property
    def blocked_reason(self) -> str | None: ...

    async def close(self, reason: str = ...) -> None: ...


class PublisherClient(Protocol):
    """A publisher as the worker drives it (:class:`PacedPublisher` and its kinds)."""

    publisher_id: int
    published: int
    confirmed: int
    nacked: int
    returned: int
    abandoned: int
    first_sent_ns: int
    last_sent_ns: int
    last_confirmed_ns: int

    @property
    def connection(self) -> ClientConnection: ...

    @property
    def pending_confirms(self) -> int: ...

    @property
    def next_sequence(self) -> int: ...

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def pump(self) -> None: ...
    def set_rate(self, rate: float) -> None: ...
    def set_inflight(self, inflight: int) -> None: ...
    async def wait_confirms(self, timeout: float) -> bool: ...
    def report_ranges(self) -> tuple[SequenceRanges, SequenceRanges]: ...


class ConsumerClient(Protocol):
    """A consumer as the worker drives it."""

    consumer_id: int
    queue: str
    consumed: int

    @property
    def connection(self) -> ClientConnection: ...

    @property
    def error(self) -> object:
        """None while it consumes; why it stopped otherwise."""

    @property
    def unacked(self) -> int: ...

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def set_prefetch(self, prefetch: int) -> None: ...
    def set_ack_every(self, ack_every: int) -> None: ...
    def flush(self) -> None: ...


class LinkConnection:
    """The connection of one client of a protocol whose library keeps its own socket (the
    stream protocol's, AMQP 1.0's): what the worker reads of it and how it is closed."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: Read holding is AMQP 0.9.1's (engine/amqp/connection.py); carried, not used.
        self.read_hold = 0.0
        self.open = True
        self.blocked_reason: str | None = None
        self._closers: list[object] = []

    @property
    def is_open(self) -> bool:
        return self.open

    @property
    def blocked(self) -> bool:
        return self.blocked_reason is not None

    async def close(self, reason: str = "flowdeck closed it") -> None:
        """Close what the client opened (its ``closing`` coroutine), once."""
        if not self.open:
            return
        self.open = False
        await self.closing(reason)

    async def closing(self, reason: str) -> None:
        """What closing does; the client sets it."""


class PacedPublisher:
    """Publishes paced by its rate, at most ``inflight`` unconfirmed, until stopped.

    A kind says how a batch goes out (:meth:`_write`), whether it may write now
    (:meth:`_held`) and calls :meth:`_resolve` as confirms arrive. ``inflight`` 0 means no
    window; with ``confirms`` off there is no window at all.
    """

    def __init__(
        self,
        *,
        publisher_id: int,
        loop: asyncio.AbstractEventLoop,
        confirms: bool,
        inflight: int,
        rate: float,
        first_sequence: int,
        confirm_latency: LatencySamples,
        catch_up: bool = True,
    ) -> None:
        self.publisher_id = publisher_id
        self.loop = loop
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
        #: In flight when a link was lost: never confirmed, never nacked.
        self.abandoned = 0
        #: Links (channels) lost so far.
        self.channels_lost = 0
        self.paused = False
        self.stopped = False
        # Each publisher sends at its own point of the send interval (engine.pacer), so
        # publishers started together do not all send in the same instant.
        self.pacer = Pacer(
            rate, time.time_ns(), catch_up=catch_up, phase=spread_phase(publisher_id)
        )
        # Messages published on earlier links: tag t here is published message base + t.
        self._channel_base = 0
        self._latency = confirm_latency
        # Send times by tag - 1 - _trimmed, for confirm latency.
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
        self._settled = asyncio.Event()

    # -- what a kind supplies -------------------------------------------------------------

    def _held(self) -> bool:
        """True when the link cannot take writes now (the kind arranges a later pump, and
        cancels the pacing timer when the wait may be long)."""
        return False

    def _failed(self) -> bool:
        """True when the link is lost (nothing more can be sent or confirmed on it)."""
        return False

    def _write(self, count: int, sequence: int, now: int, intended: list[int]) -> None:
        """Send ``count`` messages, sequences from ``sequence``, sent at ``now``."""
        raise NotImplementedError

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

    def set_rate(self, rate: float) -> None:
        self.pacer.set_rate(rate, time.time_ns())
        self._cancel_timer()
        self.pump()

    def set_inflight(self, inflight: int) -> None:
        """A new in-flight window; the rate schedule starts afresh with it, as with a new
        rate: what the old window held back is not owed to the new one (a sweep's step
        after a window that bound would otherwise send its whole debt above the target,
        the next steps judged as catching up)."""
        self.inflight = inflight
        if self.started and not self.stopped:
            self.pacer.restart(time.time_ns())
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
        # Not before start(): a read on the link (a confirm.select-ok, a heartbeat) or a
        # change that arrives while the worker waits for the run's start_at calls pump too,
        # and the pacer, made with the publisher, owed messages from then on. Sent early,
        # they were older than the run's start, so consumers counted them as not this run's
        # and the run reported them lost (seen once: lost 1 of 1,200 with every count equal).
        if not self.started or self.paused or self.stopped or self._failed():
            return
        if self._held():
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
            self.loop.call_soon(self.pump)
        elif pacer.rate > 0 and due <= count and self._timer is None:
            delay = max((pacer.next_due_ns() - time.time_ns()) / 1e9, MIN_SLEEP)
            self._timer = self.loop.call_later(delay, self._on_timer)
        # else: the window is full; the next confirms call pump() again.

    def _on_timer(self) -> None:
        self._timer = None
        if not self._soon:
            self.pump()

    def _send(self, count: int, now: int) -> None:
        sequence = self.first_sequence + self.published
        pacer = self.pacer
        if pacer.rate > 0:
            first = pacer.sent
            intended = [pacer.intended_ns(first + i) for i in range(count)]
        else:
            intended = [now] * count
        pacer.take(count)
        self._write(count, sequence, now, intended)
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

    # -- helpers ------------------------------------------------------------------------

    def _abandon_channel(self) -> None:
        """Forget the current link's tags: what is in flight stays unconfirmed."""
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

    def _check_settled(self) -> None:
        if self.pending_confirms == 0 or self._failed():
            self._settled.set()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
