"""AMQP 1.0 senders and receivers: flowdeck's pacing, window and accounting over proton links.

A sender's unsettled deliveries are the in-flight window (``settle_mode = unsettled``: the
broker settles each with its outcome, accepted = confirmed, rejected or released = nacked);
``settled`` sends pre-settled, at most once, with nothing confirmed. A receiver keeps its
link credit topped up to the prefetch and gives each delivery the run's ``outcome``
(accept, release: back to the queue and delivered again, or reject), settling at once, so
nothing is held unacknowledged and ``ack_every`` does nothing here.

Messages are a header section (durable when ``persistent``) and one data section holding
flowdeck's body; sequence and send times are patched into a copy of a prebuilt encoding.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import cproton
from proton import Delivery, Event, Link

from flowdeck.engine.amqp.frames import BODY_FIELDS, SEND_FIELDS
from flowdeck.engine.amqp10.link import OPEN_TIMEOUT, Amqp10Connection, remote_error
from flowdeck.engine.client_base import LinkConnection, PacedPublisher
from flowdeck.engine.consumer import ConsumerTally
from flowdeck.engine.errors import BrokerUnavailable
from flowdeck.engine.samples import LatencySamples

#: The header section: durable = true.
_DURABLE_HEADER = bytes([0x00, 0x53, 0x70, 0xC0, 0x02, 0x01, 0x41])
#: The data section's descriptor and binary constructors (vbin8, vbin32).
_DATA = b"\x00\x53\x75"
_VBIN8, _VBIN32 = 0xA0, 0xB0
#: Bytes waiting in the socket's buffer above which the sender waits for it to drain.
WRITE_BUFFER_LIMIT = 4 * 1024 * 1024
_OUTCOMES = {"accept": Delivery.ACCEPTED, "release": Delivery.RELEASED, "reject": Delivery.REJECTED}


def encode_message(body: bytes, durable: bool) -> tuple[bytes, int]:
    """A message of ``body`` as AMQP 1.0 sections, and where the body starts in it."""
    header = _DURABLE_HEADER if durable else b""
    data = _DATA + bytes([_VBIN32]) + struct.pack(">I", len(body))
    return header + data + body, len(header) + len(data)


def body_offset(message: bytes | bytearray) -> tuple[int, int]:
    """Where the data section's bytes start in an encoded ``message``, and how many;
    (0, 0) when it has none."""
    at = message.find(_DATA)
    while at >= 0:
        kind = message[at + 3] if at + 3 < len(message) else 0
        if kind == _VBIN32:
            return at + 8, int.from_bytes(message[at + 4 : at + 8], "big")
        if kind == _VBIN8:
            return at + 5, message[at + 4]
        at = message.find(_DATA, at + 1)
    return 0, 0


async def opened(connection: Amqp10Connection, link: Link, what: str) -> None:
    """Wait for the broker to open ``link``; BrokerUnavailable with its words if it will not."""
    future: asyncio.Future[None] = connection.loop.create_future()

    def on_event(event: Event) -> None:
        if future.done():
            return
        kind = event.type
        if (
            kind == Event.LINK_REMOTE_OPEN
            and event.link is not None
            and event.link.name == link.name
        ):
            future.set_result(None)
        elif (
            kind == Event.LINK_REMOTE_CLOSE
            and event.link is not None
            and event.link.name == link.name
        ):
            future.set_exception(BrokerUnavailable(f"{what}: {remote_error(link)}"))
        elif kind == Event.SESSION_REMOTE_CLOSE:
            future.set_exception(BrokerUnavailable(f"{what}: {remote_error(event.session)}"))
        elif kind in (Event.CONNECTION_REMOTE_CLOSE, Event.TRANSPORT_ERROR):
            why = (
                remote_error(connection.proton)
                if kind == Event.CONNECTION_REMOTE_CLOSE
                else (remote_error(connection.transport_engine))
            )
            future.set_exception(BrokerUnavailable(f"{what}: {why}"))

    connection.handler = on_event
    connection.flush()
    try:
        await asyncio.wait_for(future, OPEN_TIMEOUT)
    except TimeoutError:
        raise BrokerUnavailable(
            f"{what}: the broker did not answer in {OPEN_TIMEOUT:g} s"
        ) from None


class Amqp10Sender(PacedPublisher):
    """Sends to one queue on its own link until stopped."""

    def __init__(
        self,
        *,
        publisher_id: int,
        amqp: Amqp10Connection,
        link: Link,
        message_size: int,
        persistent: bool,
        settled: bool,
        inflight: int,
        rate: float,
        first_sequence: int,
        confirm_latency: LatencySamples,
        catch_up: bool = True,
    ) -> None:
        super().__init__(
            publisher_id=publisher_id,
            loop=amqp.loop,
            confirms=not settled,
            inflight=inflight,
            rate=rate,
            first_sequence=first_sequence,
            confirm_latency=confirm_latency,
            catch_up=catch_up,
        )
        self.amqp = amqp
        self.link = link
        self.settled = settled
        self.error: str | None = None
        body = bytearray(message_size)
        BODY_FIELDS.pack_into(body, 0, publisher_id, 0, 0, 0)
        self._message, start = encode_message(bytes(body), persistent)
        self._fields_at = start + 4
        self._retry: asyncio.TimerHandle | None = None
        amqp.handler = self.on_event
        amqp.on_delivery = self.on_delivery
        amqp.after_events = self.on_read_done

    @property
    def connection(self) -> LinkConnection:
        return self.amqp.link

    def _failed(self) -> bool:
        return self.error is not None or not self.amqp.link.open

    def _held(self) -> bool:
        if self.amqp.writing_buffered <= WRITE_BUFFER_LIMIT:
            return False
        if self._retry is None:
            self._retry = self.loop.call_later(0.002, self._again)
        return True

    def _again(self) -> None:
        self._retry = None
        self.pump()

    def _write(self, count: int, sequence: int, now: int, intended: list[int]) -> None:
        link = self.link
        message = bytearray(self._message)
        at = self._fields_at
        pack = SEND_FIELDS.pack_into
        tag = self.published + 1 - self._channel_base
        for i in range(count):
            pack(message, at, sequence + i, now, intended[i])
            delivery = link.delivery(str(tag + i))
            link.send(bytes(message))
            link.advance()
            if self.settled:
                delivery.settle()
        self.amqp.flush_soon()

    def on_event(self, event: Event) -> None:
        kind = event.type
        if kind == Event.DELIVERY:
            delivery = event.delivery
            if delivery is None:
                return
            state = delivery.remote_state
            if state is None:
                return
            tag = int(delivery.tag)
            self._resolve(tag, False, acked=state == Delivery.ACCEPTED)
            delivery.settle()
        elif kind == Event.LINK_REMOTE_CLOSE or kind == Event.CONNECTION_REMOTE_CLOSE:
            self.lost(f"the broker closed the link: {remote_error(event.link or event.connection)}")

    def on_delivery(self, delivery: Any) -> None:
        """The broker's outcome of a delivery (the engine's own object: the hot path)."""
        state = cproton.pn_delivery_remote_state(delivery)
        if not state:
            return
        tag = int(cproton.pn_delivery_tag(delivery))
        self._resolve(tag, False, acked=state == cproton.PN_ACCEPTED)
        cproton.pn_delivery_settle(delivery)

    def lost(self, reason: str) -> None:
        if self.error is None:
            self.error = reason
            self._abandon_channel()
            self._cancel_timer()
            self._settled.set()


class Amqp10Receiver:
    """Receives from one queue on its own link, credit topped up to the prefetch."""

    def __init__(
        self,
        *,
        consumer_id: int,
        amqp: Amqp10Connection,
        link: Link,
        queue: str,
        prefetch: int,
        outcome: str,
        tally: ConsumerTally,
        latency: LatencySamples,
        run_start_ns: int,
    ) -> None:
        self.consumer_id = consumer_id
        self.amqp = amqp
        self.link = link
        self.queue = queue
        self.prefetch = prefetch
        self.outcome = _OUTCOMES[outcome]
        self.tally = tally
        self.latency = latency
        self.run_start_ns = run_start_ns
        self.consumed = 0
        self.error: str | None = None
        self._link = link._impl
        self._outcome = int(self.outcome)
        amqp.handler = self.on_event
        amqp.on_delivery = self.on_delivery
        amqp.after_events = self._top_up

    @property
    def connection(self) -> LinkConnection:
        return self.amqp.link

    @property
    def unacked(self) -> int:
        return 0

    async def start(self) -> None:
        self._top_up()

    def _top_up(self) -> None:
        link = self.link
        want = self.prefetch - link.credit - link.queued
        if want > 0 and (link.credit <= self.prefetch // 2 or want >= self.prefetch // 2):
            link.flow(want)
            self.amqp.flush_soon()

    def on_event(self, event: Event) -> None:
        kind = event.type
        if kind == Event.DELIVERY:
            delivery = event.delivery
            if delivery is None or not delivery.readable or delivery.partial:
                return
            link = self.link
            message = link.recv(delivery.pending) or b""
            link.advance()
            tally = self.tally
            self.consumed += 1
            tally.consumed += 1
            start, size = body_offset(message)
            tally.record(message, start, size, self.run_start_ns, self.latency)
            delivery.update(self.outcome)
            delivery.settle()
            self.amqp.flush_soon()
        elif kind == Event.LINK_REMOTE_CLOSE or kind == Event.CONNECTION_REMOTE_CLOSE:
            self.error = (
                f"the broker closed the link: {remote_error(event.link or event.connection)}"
            )

    def on_delivery(self, delivery: Any) -> None:
        """One delivery (the engine's own object: the hot path): read, count, settle."""
        if not cproton.pn_delivery_readable(delivery) or cproton.pn_delivery_partial(delivery):
            return
        _, message = cproton.pn_link_recv(self._link, cproton.pn_delivery_pending(delivery))
        cproton.pn_link_advance(self._link)
        tally = self.tally
        self.consumed += 1
        tally.consumed += 1
        start, size = body_offset(message)
        tally.record(message, start, size, self.run_start_ns, self.latency)
        cproton.pn_delivery_update(delivery, self._outcome)
        cproton.pn_delivery_settle(delivery)
        self.amqp.flush_soon()

    async def set_prefetch(self, prefetch: int) -> None:
        """Top the link credit up to ``prefetch`` from now on (a lower one: the credit
        given runs out first)."""
        self.prefetch = prefetch
        self._top_up()

    def set_ack_every(self, ack_every: int) -> None:
        """Each delivery is settled as it arrives."""

    def flush(self) -> None:
        """Nothing is held: each delivery is settled as it arrives."""

    def lost(self, reason: str) -> None:
        self.error = reason

    async def stop(self) -> None:
        if self.amqp.link.open and self.error is None:
            self.link.close()
            self.amqp.flush()


def sender_link(amqp: Amqp10Connection, name: str, queue: str, settled: bool) -> Link:
    session = amqp.proton.session()
    session.open()
    link = session.sender(name)
    link.target.address = f"/amq/queue/{queue}"
    link.snd_settle_mode = Link.SND_SETTLED if settled else Link.SND_UNSETTLED
    link.open()
    return link


def receiver_link(amqp: Amqp10Connection, name: str, queue: str) -> Link:
    session = amqp.proton.session()
    session.open()
    link = session.receiver(name)
    link.source.address = f"/amq/queue/{queue}"
    link.open()
    return link
