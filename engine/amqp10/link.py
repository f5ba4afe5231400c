"""One AMQP 1.0 connection: python-qpid-proton's protocol engine driven by asyncio.

Proton's engine does no I/O of its own: bytes read from the socket are pushed into its
transport, bytes it wants sent are taken from it, and what happened (a link opened, a
delivery updated, credit arrived) comes out of its collector as events, handled here and
passed to the connection's links. One session per connection, one link per client.

RabbitMQ 3.x speaks AMQP 1.0 through the ``rabbitmq_amqp1_0`` plugin on its AMQP port,
translating each message to AMQP 0.9.1 inside the broker; 4.x speaks it natively.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import cproton
from proton import Collector, Connection, Event, Transport

from flowdeck.engine.amqp.connection import parse_uri
from flowdeck.engine.client_base import LinkConnection
from flowdeck.engine.errors import BrokerUnavailable

#: Seconds an AMQP 1.0 connection and its link may take to open.
OPEN_TIMEOUT = 15.0
#: Seconds between the engine's timer ticks (heartbeats are sent from them).
TICK_SECONDS = 5.0
#: Bytes pushed into the engine at most at once (its capacity says how many it takes).
_READ_LIMIT = 1 << 20

Handler = Callable[[Event], None]


class Amqp10Connection(asyncio.Protocol):
    """The socket side of one proton connection; ``handler`` gets every engine event."""

    def __init__(self, name: str, user: str, password: str, vhost: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.link = LinkConnection(name)
        self.proton = Connection()
        self.proton.container = name
        self.proton.hostname = f"vhost:{vhost}"
        self.proton.user = user
        self.proton.password = password
        self.proton.properties = {"connection_name": name}
        self.transport_engine = Transport()
        sasl = self.transport_engine.sasl()
        sasl.allowed_mechs("PLAIN")
        sasl.allow_insecure_mechs = True  # PLAIN over plain TCP, as AMQP 0.9.1's login
        self.collector = Collector()
        self.proton.collect(self.collector)
        self.transport_engine.bind(self.proton)
        self.transport: asyncio.Transport | None = None
        self.handler: Handler = lambda event: None
        self.on_lost: Callable[[str], None] = lambda reason: None
        #: Told of each delivery event with the engine's own delivery (``pn_delivery_t``):
        #: the hot path, without proton's per-event Python objects (None: as any event).
        self.on_delivery: Callable[[Any], None] | None = None
        #: Told after each batch of events (a publisher pumps then).
        self.after_events: Callable[[], None] = lambda: None
        self._flush_soon = False
        self.closed = asyncio.Event()

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.proton.open()
        self.flush()
        self._tick()

    def _tick(self) -> None:
        """Let the engine send its heartbeats (the broker closes a silent connection)."""
        if self.transport is None:
            return
        self.transport_engine.tick(time.monotonic())
        self.flush()
        self.loop.call_later(TICK_SECONDS, self._tick)

    def data_received(self, data: bytes) -> None:
        engine = self.transport_engine
        view = memoryview(data)
        while view:
            room = engine.capacity()
            if room <= 0:
                break
            take = min(room, len(view), _READ_LIMIT)
            engine.push(bytes(view[:take]))
            view = view[take:]
            self.process()
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.closed.set()
        if self.link.open:
            self.link.open = False
            self.on_lost(f"AMQP 1.0 connection {self.link.name!r} lost: {exc or 'closed'}")

    # -- the engine ---------------------------------------------------------------------

    def process(self) -> None:
        """Handle every event the engine has."""
        impl = self.collector._impl
        handler, on_delivery = self.handler, self.on_delivery
        peek, pop, isnull = cproton.pn_collector_peek, cproton.pn_collector_pop, cproton.isnull
        kind_of, delivery_of = cproton.pn_event_type, cproton.pn_event_delivery
        while not isnull(raw := peek(impl)):
            if on_delivery is not None and kind_of(raw) == cproton.PN_DELIVERY:
                on_delivery(delivery_of(raw))
            else:
                handler(Event.wrap(raw))  # type: ignore[no-untyped-call]
            pop(impl)
        self.after_events()

    def flush(self) -> None:
        """Write what the engine has to send."""
        self._flush_soon = False
        transport = self.transport
        engine = self.transport_engine
        if transport is None:
            return
        pending = engine.pending()
        while pending > 0:
            data = engine.peek(pending) or b""
            transport.write(data)
            engine.pop(len(data))
            pending = engine.pending()
        if pending < 0 and not transport.is_closing():
            transport.close()

    def flush_soon(self) -> None:
        """Write at the end of this turn of the loop (several sends, one write)."""
        if not self._flush_soon:
            self._flush_soon = True
            self.loop.call_soon(self.flush)

    @property
    def writing_buffered(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    async def close(self, reason: str) -> None:
        self.link.open = False
        try:
            self.proton.close()
            self.flush()
            await asyncio.wait_for(self.closed.wait(), 2)
        except (TimeoutError, Exception):
            pass
        if self.transport is not None:
            self.transport.close()


async def open_connection(uri: str, name: str, on_lost: Callable[[str], None]) -> Amqp10Connection:
    """An AMQP 1.0 connection to the broker at ``uri`` (its AMQP port). BrokerUnavailable
    when it cannot be opened."""
    params = parse_uri(uri)
    loop = asyncio.get_running_loop()
    try:
        _, protocol = await asyncio.wait_for(
            loop.create_connection(
                lambda: Amqp10Connection(name, params.username, params.password, params.vhost),
                params.host,
                params.port,
            ),
            OPEN_TIMEOUT,
        )
    except (OSError, TimeoutError) as exc:
        raise BrokerUnavailable(
            f"could not open an AMQP 1.0 connection to {params.host}:{params.port}: "
            f"{exc or type(exc).__name__}"
        ) from None
    protocol.on_lost = on_lost

    async def closing(reason: str) -> None:
        await protocol.close(reason)

    protocol.link.closing = closing  # type: ignore[method-assign]
    return protocol


def remote_error(endpoint: Any) -> str:
    """What the broker said when it closed ``endpoint`` (a link or the connection)."""
    condition = getattr(endpoint, "remote_condition", None)
    if condition is None:
        return "closed by the broker"
    return f"{condition.name}: {condition.description}"
