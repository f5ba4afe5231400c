"""A lean AMQP 0-9-1 connection on an asyncio Protocol.

pamqp marshals and unmarshals the control frames (handshake, channel open/close, qos,
consume, cancel, confirm.select); the few frames that arrive once per message
(Basic.Ack/Nack at a publisher, Basic.Deliver + content at a consumer) are recognised by
their fixed layout and read with ``struct`` straight from the receive buffer, then handed
to the channel's listener as plain integers. Everything else is general: content split
over several body frames, frames of other channels in between, heartbeats, broker-side
channel and connection close, connection.blocked/unblocked and TCP back-pressure.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

from pamqp import commands, frame, header
from pamqp import exceptions as pamqp_exceptions
from pamqp.base import Frame

from flowdeck.collectors.broker_uri import BrokerUriError, parse_broker_uri
from flowdeck.engine.amqp.frames import (
    BASIC_ACK,
    BASIC_DELIVER,
    BASIC_NACK,
    BASIC_RETURN,
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEADER_STRUCT,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    HEARTBEAT_FRAME,
    METHOD_ID,
    U64,
)
from flowdeck.engine.errors import BrokerUnavailable, FlowdeckError
from flowdeck.engine.tls import context_for_uri

PRODUCT = "flowdeck"
DEFAULT_HEARTBEAT = 60
DEFAULT_FRAME_MAX = 131_072
DEFAULT_CHANNEL_MAX = 2047
DEFAULT_CONNECT_TIMEOUT = 10.0

_ACK_BITS = struct.Struct(">QB")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_TAG_BITS = struct.Struct(">QB")

#: What OpenSSL says when a TLS 1.3 server wanted a client certificate and got none.
CERTIFICATE_REQUIRED = "CERTIFICATE_REQUIRED"

ACCESS_REFUSED = 403
NOT_ALLOWED = 530


class AmqpClosed(FlowdeckError):
    """The broker closed a channel or the connection; the message carries its reason."""

    def __init__(self, message: str, reply_code: int = 0) -> None:
        super().__init__(message)
        self.reply_code = reply_code


@dataclass(frozen=True, slots=True)
class ConnectionParams:
    host: str
    port: int
    vhost: str
    username: str
    password: str
    tls: bool
    heartbeat: int = DEFAULT_HEARTBEAT
    frame_max: int = DEFAULT_FRAME_MAX
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    channel_max: int = DEFAULT_CHANNEL_MAX
    #: The socket's TCP_NODELAY (Nagle off) and send and receive buffer sizes in bytes
    #: (0 = the system's).
    tcp_nodelay: bool = True
    tcp_send_buffer: int = 0
    tcp_receive_buffer: int = 0

    @property
    def where(self) -> str:
        scheme = "amqps" if self.tls else "amqp"
        return f"{scheme}://{self.host}:{self.port}/{self.vhost}"


def parse_uri(uri: str) -> ConnectionParams:
    """Connection parameters from an AMQP URI (RabbitMQ's URI spec: vhost is the path,
    ``%2F`` is ``/``, an empty path is ``/``; ``heartbeat``, ``frame_max`` and
    ``connection_timeout`` (ms) query parameters are honoured).
    """
    try:
        parsed = parse_broker_uri(uri)
    except BrokerUriError as exc:
        raise BrokerUnavailable(f"broker {exc.message}") from None
    tls = parsed.tls
    vhost = parsed.vhost
    query = parsed.query_params
    timeout = DEFAULT_CONNECT_TIMEOUT
    if "connection_timeout" in query:
        timeout = float(query["connection_timeout"]) / 1000
    return ConnectionParams(
        host=parsed.host,
        port=parsed.effective_port,
        vhost=vhost,
        username=parsed.login,
        password=parsed.secret,
        tls=tls,
        heartbeat=int(query.get("heartbeat", DEFAULT_HEARTBEAT)),
        frame_max=int(query.get("frame_max", DEFAULT_FRAME_MAX)),
        connect_timeout=timeout,
    )


class ChannelListener(Protocol):
    """What a publisher or consumer hears from its channel; every call is synchronous and
    made from inside the connection's read, so it must not block.
    """

    def on_ack(self, tag: int, multiple: bool) -> None: ...
    def on_nack(self, tag: int, multiple: bool) -> None: ...
    def on_return(self, reply_code: int, reply_text: str, body: bytes) -> None: ...
    def on_deliver(
        self, tag: int, redelivered: bool, buffer: bytes | bytearray, offset: int, size: int
    ) -> None: ...
    def on_read_done(self) -> None: ...
    def on_cancelled(self, consumer_tag: str) -> None: ...
    def on_closed(self, reason: AmqpClosed) -> None: ...


class NullListener:
    """A listener that ignores everything (control channels, tests)."""

    def on_ack(self, tag: int, multiple: bool) -> None:
        pass

    def on_nack(self, tag: int, multiple: bool) -> None:
        pass

    def on_return(self, reply_code: int, reply_text: str, body: bytes) -> None:
        pass

    def on_deliver(
        self, tag: int, redelivered: bool, buffer: bytes | bytearray, offset: int, size: int
    ) -> None:
        pass

    def on_read_done(self) -> None:
        pass

    def on_cancelled(self, consumer_tag: str) -> None:
        pass

    def on_closed(self, reason: AmqpClosed) -> None:
        pass


#: The furthest back from its end a content header frame's start is looked for (its
#: properties, headers included, are far smaller in flowdeck's runs).
_LONGEST_HEADER = 65_536
_NO_CONTENT = 0
_DELIVER_CONTENT = 1
_RETURN_CONTENT = 2
_OTHER_CONTENT = 3


class Channel:
    """One AMQP channel: synchronous control methods as coroutines, and the listener
    that hears acks, nacks, returns and deliveries.
    """

    def __init__(self, connection: Connection, channel_id: int) -> None:
        self.connection = connection
        self.id = channel_id
        self.listener: ChannelListener = NullListener()
        self.is_open = False
        self.closed_reason: AmqpClosed | None = None
        self._waiters: deque[tuple[tuple[type[Frame], ...], asyncio.Future[Frame]]] = deque()
        # Content being assembled when it did not arrive in one piece.
        self._content_kind = _NO_CONTENT
        self._content_tag = 0
        self._content_redelivered = False
        self._content_size = 0
        self._content_body = bytearray()
        self._return_code = 0
        self._return_text = ""
        #: The content header frame of the last delivery that came in pieces (one that
        #: came whole has it in the read buffer, just before its body).
        self._delivery_header = b""

    def delivery_count(self, buffer: bytes | bytearray, offset: int) -> int:
        """The x-delivery-count header of the delivery being handed to the listener (a
        quorum queue's count of its earlier failed deliveries), 0 when it has none; call
        only from ``on_deliver``, with its buffer and body offset.

        Found from the body so that the reader does nothing more per delivery: a delivery
        that came whole has its content header frame right before its body frame in the
        read buffer (offset > 0), found by walking back to the frame header whose size ends
        there; one assembled from pieces is handed over alone (offset 0) and its header
        was kept when it came."""
        raw = self._delivery_header
        if offset > 0:
            end = offset - 8  # the content header frame's end octet, before the body frame's
            for at in range(end - 21, max(-1, end - _LONGEST_HEADER), -1):
                if buffer[at] == FRAME_HEADER and FRAME_HEADER_STRUCT.unpack_from(buffer, at) == (
                    FRAME_HEADER,
                    self.id,
                    end - at - 7,
                ):
                    raw = bytes(buffer[at : end + 1])
                    break
            else:
                return 0
        try:
            content = frame.unmarshal(raw)[2]
        except (pamqp_exceptions.UnmarshalingException, ValueError, IndexError):
            return 0
        if not isinstance(content, header.ContentHeader):
            return 0
        count = (content.properties.headers or {}).get("x-delivery-count", 0)
        return count if isinstance(count, int) and not isinstance(count, bool) else 0

    # -- control ------------------------------------------------------------------------

    async def rpc(self, method: Frame, *replies: type[Frame]) -> Frame:
        if self.closed_reason is not None:
            raise self.closed_reason
        waiter: asyncio.Future[Frame] = self.connection.loop.create_future()
        self._waiters.append((replies, waiter))
        self.connection.write(frame.marshal(method, self.id))
        return await waiter

    async def open(self) -> None:
        await self.rpc(commands.Channel.Open(), commands.Channel.OpenOk)
        self.is_open = True

    async def confirm_select(self) -> None:
        await self.rpc(commands.Confirm.Select(), commands.Confirm.SelectOk)

    async def qos(self, prefetch: int) -> None:
        await self.rpc(commands.Basic.Qos(prefetch_count=prefetch), commands.Basic.QosOk)

    async def consume(
        self,
        queue: str,
        *,
        consumer_tag: str = "",
        no_ack: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> str:
        reply = await self.rpc(
            commands.Basic.Consume(
                queue=queue, consumer_tag=consumer_tag, no_ack=no_ack, arguments=arguments
            ),
            commands.Basic.ConsumeOk,
        )
        assert isinstance(reply, commands.Basic.ConsumeOk)
        return str(reply.consumer_tag)

    async def cancel(self, consumer_tag: str) -> None:
        await self.rpc(commands.Basic.Cancel(consumer_tag=consumer_tag), commands.Basic.CancelOk)

    async def queue_message_count(self, queue: str) -> int:
        """Messages ready in ``queue`` (a passive declare; a missing queue closes the
        channel with 404, raised as :class:`AmqpClosed`).
        """
        reply = await self.rpc(
            commands.Queue.Declare(queue=queue, passive=True), commands.Queue.DeclareOk
        )
        assert isinstance(reply, commands.Queue.DeclareOk)
        return int(reply.message_count or 0)

    async def close(self, reason: str = "flowdeck done") -> None:
        if not self.is_open or self.closed_reason is not None:
            return
        self.is_open = False
        with contextlib.suppress(AmqpClosed):
            await self.rpc(
                commands.Channel.Close(reply_code=200, reply_text=reason, class_id=0, method_id=0),
                commands.Channel.CloseOk,
            )
        self.closed_reason = AmqpClosed(f"channel {self.id} closed by flowdeck: {reason}", 200)
        self.connection.forget_channel(self.id)

    def write(self, data: bytes | bytearray) -> None:
        self.connection.write(data)

    # -- from the connection ------------------------------------------------------------

    def _on_method(self, method: Frame) -> None:
        if isinstance(method, commands.Channel.Close):
            reason = AmqpClosed(
                f"broker closed channel {self.id}: {method.reply_code} {method.reply_text}",
                int(method.reply_code or 0),
            )
            self.connection.write(frame.marshal(commands.Channel.CloseOk(), self.id))
            self._fail(reason)
            self.connection.forget_channel(self.id)
            self.listener.on_closed(reason)
            return
        if isinstance(method, commands.Basic.Cancel):
            self.listener.on_cancelled(str(method.consumer_tag))
            return
        if isinstance(method, commands.Basic.Ack | commands.Basic.Nack):
            # Reached only through the general path (never in practice: kept for safety).
            on = (
                self.listener.on_ack
                if isinstance(method, commands.Basic.Ack)
                else (self.listener.on_nack)
            )
            on(int(method.delivery_tag or 0), bool(method.multiple))
            return
        if isinstance(method, commands.Basic.Deliver):
            self._start_content(
                _DELIVER_CONTENT, int(method.delivery_tag or 0), bool(method.redelivered)
            )
            return
        if isinstance(method, commands.Basic.Return):
            self._return_code = int(method.reply_code or 0)
            self._return_text = str(method.reply_text)
            self._start_content(_RETURN_CONTENT, 0, False)
            return
        if isinstance(method, commands.Basic.GetOk):
            self._start_content(_OTHER_CONTENT, 0, False)
            return
        if self._waiters:
            replies, waiter = self._waiters[0]
            if isinstance(method, replies):
                self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(method)
                return
        self.connection.protocol_error(f"unexpected {method.name} on channel {self.id}")

    def _start_content(self, kind: int, tag: int, redelivered: bool) -> None:
        self._content_kind = kind
        self._content_tag = tag
        self._content_redelivered = redelivered
        self._content_size = -1
        self._content_body = bytearray()

    def _on_header(self, body_size: int, raw: bytes) -> None:
        if self._content_kind == _DELIVER_CONTENT:
            self._delivery_header = raw
        self._content_size = body_size
        if body_size == 0:
            self._content_done()

    def _on_body(self, buffer: bytearray, offset: int, size: int) -> None:
        self._content_body += buffer[offset : offset + size]
        if len(self._content_body) >= self._content_size:
            self._content_done()

    def _content_done(self) -> None:
        kind, self._content_kind = self._content_kind, _NO_CONTENT
        body = bytes(self._content_body)
        self._content_body = bytearray()
        if kind == _DELIVER_CONTENT:
            self.listener.on_deliver(
                self._content_tag, self._content_redelivered, body, 0, len(body)
            )
        elif kind == _RETURN_CONTENT:
            self.listener.on_return(self._return_code, self._return_text, body)

    def _fail(self, reason: AmqpClosed) -> None:
        self.is_open = False
        self.closed_reason = reason
        while self._waiters:
            _, waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(reason)


class Connection(asyncio.Protocol):
    """One AMQP connection. Use :func:`connect`; then :meth:`channel` for channels."""

    def __init__(
        self,
        params: ConnectionParams,
        name: str,
        *,
        on_blocked: Callable[[Connection, str], None] | None = None,
        on_unblocked: Callable[[Connection], None] | None = None,
        on_lost: Callable[[Connection, AmqpClosed], None] | None = None,
    ) -> None:
        self.params = params
        self.name = name
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.on_blocked = on_blocked
        self.on_unblocked = on_unblocked
        self.on_lost = on_lost
        self.blocked_reason: str | None = None
        self.closed_reason: AmqpClosed | None = None
        self.frame_max = params.frame_max
        self.heartbeat = params.heartbeat
        self.channel_max = params.channel_max
        self.server_properties: dict[str, Any] = {}
        #: Seconds to hold a read that brought little, so the next read brings more
        #: (fewer wake-ups under load). 0 = off. Set by whoever knows the load.
        self.read_hold = 0.0
        #: Reads smaller than this many bytes are held when ``read_hold`` is on.
        self.read_hold_below = 16 * 1024
        self.writing_paused = False
        self._resume_writing: list[Callable[[], None]] = []
        self._buffer = bytearray()
        self._channels: dict[int, Channel] = {}
        self._next_channel = 1
        self._handshake: asyncio.Future[None] = self.loop.create_future()
        self._closed: asyncio.Future[None] = self.loop.create_future()
        self._close_waiter: asyncio.Future[None] | None = None
        self._heard = True
        self._sent = False
        self._heartbeat_timer: asyncio.TimerHandle | None = None
        self._silent_ticks = 0
        self._holding: asyncio.TimerHandle | None = None

    # -- public -------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return (
            self.closed_reason is None
            and self._handshake.done()
            and (not self._handshake.cancelled() and self._handshake.exception() is None)
        )

    @property
    def blocked(self) -> bool:
        return self.blocked_reason is not None

    def write(self, data: bytes | bytearray) -> None:
        if self.transport is not None and self.closed_reason is None:
            self.transport.write(data)
            self._sent = True

    def when_writable(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the transport takes writes again (after pause_writing)."""
        self._resume_writing.append(callback)

    async def channel(self, listener: ChannelListener | None = None) -> Channel:
        if self.closed_reason is not None:
            raise self.closed_reason
        channel_id = self._free_channel_id()
        channel = Channel(self, channel_id)
        if listener is not None:
            channel.listener = listener
        self._channels[channel_id] = channel
        await channel.open()
        return channel

    def _free_channel_id(self) -> int:
        # Ids go up and wrap: a client that re-opens its channel again and again (a queue
        # missing for hours) must not run out of ids; a just-closed id is reused last.
        for _ in range(self.channel_max):
            channel_id = self._next_channel
            self._next_channel = channel_id % self.channel_max + 1
            if channel_id not in self._channels:
                return channel_id
        raise AmqpClosed(
            f"connection {self.name} has all {self.channel_max} channels open; "
            "close some before opening more",
            NOT_ALLOWED,
        )

    def forget_channel(self, channel_id: int) -> None:
        self._channels.pop(channel_id, None)

    async def close(self, reason: str = "flowdeck done", timeout: float = 5.0) -> None:
        """Close with a reason the broker shows; wait for Close-Ok up to ``timeout``."""
        if self.transport is None or self.closed_reason is not None:
            return
        self._close_waiter = self.loop.create_future()
        self.write(
            frame.marshal(
                commands.Connection.Close(
                    reply_code=200, reply_text=reason, class_id=0, method_id=0
                ),
                0,
            )
        )
        with contextlib.suppress(asyncio.TimeoutError, AmqpClosed):
            await asyncio.wait_for(asyncio.shield(self._close_waiter), timeout)
        self._shutdown(AmqpClosed(f"connection {self.name} closed by flowdeck: {reason}", 200))

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    def protocol_error(self, what: str) -> None:
        reason = AmqpClosed(f"AMQP protocol error on {self.name}: {what}", 505)
        self.write(
            frame.marshal(
                commands.Connection.Close(
                    reply_code=505, reply_text=what[:200], class_id=0, method_id=0
                ),
                0,
            )
        )
        self._shutdown(reason)

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = cast(asyncio.Transport, transport)
        _socket_options(self.transport, self.params)
        self.transport.write(frame.marshal(header.ProtocolHeader(), 0))

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        callbacks, self._resume_writing = self._resume_writing, []
        for callback in callbacks:
            callback()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed_reason is None:
            detail = f": {exc}" if exc else ""
            self._shutdown(AmqpClosed(f"connection {self.name} lost{detail}", 0), lost=True)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._heard = True
        if self.read_hold and self._holding is None and len(data) < self.read_hold_below:
            if self.transport is not None:
                self.transport.pause_reading()
            self._holding = self.loop.call_later(self.read_hold, self._release_hold)
            return
        if self._holding is None:
            self._parse()

    def _release_hold(self) -> None:
        self._holding = None
        if self.transport is not None and self.closed_reason is None:
            self.transport.resume_reading()
        self._parse()

    # -- parsing ------------------------------------------------------------------------

    def _parse(self) -> None:
        try:
            self._parse_frames()
        except AmqpClosed as exc:
            self._shutdown(exc, lost=True)

    def _parse_frames(self) -> None:
        buf = self._buffer
        n = len(buf)
        pos = 0
        channels = self._channels
        unpack_header = FRAME_HEADER_STRUCT.unpack_from
        unpack_method = METHOD_ID.unpack_from
        unpack_tag = _ACK_BITS.unpack_from
        touched: set[Channel] = set()
        try:
            while n - pos >= 8:
                ftype, channel_id, size = unpack_header(buf, pos)
                end = pos + 7 + size
                if end >= n:
                    break
                if buf[end] != FRAME_END:
                    self.protocol_error(f"frame without end marker at byte {pos}")
                    return
                if channel_id == 0:
                    self._on_control_frame(ftype, buf, pos, end)
                    pos = end + 1
                    continue
                channel = channels.get(channel_id)
                if channel is None:  # late frames for a channel already closed
                    pos = end + 1
                    continue
                touched.add(channel)
                if ftype == FRAME_METHOD:
                    method_id = unpack_method(buf, pos + 7)[0]
                    if method_id == BASIC_ACK:
                        tag, bits = unpack_tag(buf, pos + 11)
                        channel.listener.on_ack(tag, bool(bits & 1))
                    elif method_id == BASIC_DELIVER:
                        after = self._deliver(channel, buf, pos, end, n)
                        if after:
                            pos = after
                            continue
                    elif method_id == BASIC_NACK:
                        tag, bits = unpack_tag(buf, pos + 11)
                        channel.listener.on_nack(tag, bool(bits & 1))
                    elif method_id == BASIC_RETURN:
                        self._return(channel, buf, pos)
                    else:
                        channel._on_method(self._unmarshal(buf, pos, end))
                elif ftype == FRAME_HEADER:
                    if channel._content_kind == _NO_CONTENT:
                        self.protocol_error(f"content header without a method on {channel_id}")
                        return
                    channel._on_header(U64.unpack_from(buf, pos + 11)[0], bytes(buf[pos : end + 1]))
                elif ftype == FRAME_BODY:
                    if channel._content_kind == _NO_CONTENT or channel._content_size < 0:
                        self.protocol_error(f"content body without a header on {channel_id}")
                        return
                    channel._on_body(buf, pos + 7, size)
                else:
                    self.protocol_error(f"unexpected frame type {ftype} on channel {channel_id}")
                    return
                pos = end + 1
        finally:
            if pos:
                del buf[:pos]
        for channel in touched:
            channel.listener.on_read_done()

    def _deliver(self, channel: Channel, buf: bytearray, pos: int, end: int, n: int) -> int:
        """Basic.Deliver: when method, header and the single body frame are all in the
        buffer (the usual case), hand the body to the listener in place and return the
        position after the body; otherwise start assembling the content and return 0.
        """
        p = pos + 11
        p += 1 + buf[p]  # consumer tag
        tag, bits = _TAG_BITS.unpack_from(buf, p)
        redelivered = bool(bits & 1)
        h = end + 1
        if n - h >= 22:
            htype, hchannel, hsize = FRAME_HEADER_STRUCT.unpack_from(buf, h)
            hend = h + 7 + hsize
            if htype == FRAME_HEADER and hchannel == channel.id and hend < n - 7:
                body_size = U64.unpack_from(buf, h + 11)[0]
                b = hend + 1
                btype, bchannel, bsize = FRAME_HEADER_STRUCT.unpack_from(buf, b)
                bend: int = b + 7 + bsize
                if (
                    btype == FRAME_BODY
                    and bchannel == channel.id
                    and bsize == body_size
                    and bend < n
                    and buf[bend] == FRAME_END
                    and buf[hend] == FRAME_END
                ):
                    channel.listener.on_deliver(tag, redelivered, buf, b + 7, bsize)
                    return bend + 1
        channel._start_content(_DELIVER_CONTENT, tag, redelivered)
        return 0

    def _return(self, channel: Channel, buf: bytearray, pos: int) -> None:
        p = pos + 11
        reply_code = _U16.unpack_from(buf, p)[0]
        length = buf[p + 2]
        text = bytes(buf[p + 3 : p + 3 + length]).decode("utf-8", "replace")
        channel._return_code = reply_code
        channel._return_text = text
        channel._start_content(_RETURN_CONTENT, 0, False)

    def _unmarshal(self, buf: bytearray, pos: int, end: int) -> Frame:
        try:
            _, _, value = frame.unmarshal(bytes(buf[pos : end + 1]))
        except pamqp_exceptions.UnmarshalingException as exc:
            raise AmqpClosed(f"AMQP frame flowdeck cannot read on {self.name}: {exc}") from exc
        assert isinstance(value, Frame)
        return value

    def _on_control_frame(self, ftype: int, buf: bytearray, pos: int, end: int) -> None:
        if ftype == FRAME_HEARTBEAT:
            return
        if ftype != FRAME_METHOD:
            self.protocol_error(f"frame type {ftype} on channel 0")
            return
        method = self._unmarshal(buf, pos, end)
        if isinstance(method, commands.Connection.Start):
            self._start_ok(method)
        elif isinstance(method, commands.Connection.Tune):
            self._tune_ok(method)
        elif isinstance(method, commands.Connection.OpenOk):
            if not self._handshake.done():
                self._handshake.set_result(None)
            self._schedule_heartbeat()
        elif isinstance(method, commands.Connection.Blocked):
            self.blocked_reason = str(method.reason or "blocked")
            if self.on_blocked is not None:
                self.on_blocked(self, self.blocked_reason)
        elif isinstance(method, commands.Connection.Unblocked):
            self.blocked_reason = None
            if self.on_unblocked is not None:
                self.on_unblocked(self)
        elif isinstance(method, commands.Connection.Close):
            self.write(frame.marshal(commands.Connection.CloseOk(), 0))
            self._shutdown(
                AmqpClosed(
                    f"broker closed connection {self.name}: "
                    f"{method.reply_code} {method.reply_text}",
                    int(method.reply_code or 0),
                ),
                lost=True,
            )
        elif (
            isinstance(method, commands.Connection.CloseOk)
            and self._close_waiter is not None
            and not self._close_waiter.done()
        ):
            self._close_waiter.set_result(None)

    def _start_ok(self, start: commands.Connection.Start) -> None:
        self.server_properties = dict(start.server_properties or {})
        p = self.params
        client_properties: dict[str, Any] = {
            "product": PRODUCT,
            "connection_name": self.name,
            "capabilities": {
                "publisher_confirms": True,
                "basic.nack": True,
                "connection.blocked": True,
                "consumer_cancel_notify": True,
                "authentication_failure_close": True,
                "exchange_exchange_bindings": True,
            },
        }
        self.write(
            frame.marshal(
                commands.Connection.StartOk(
                    client_properties=client_properties,
                    mechanism="PLAIN",
                    response=f"\0{p.username}\0{p.password}",
                    locale="en_US",
                ),
                0,
            )
        )

    def _tune_ok(self, tune: commands.Connection.Tune) -> None:
        def negotiate(client: int, server: int) -> int:
            if client == 0 or server == 0:
                return max(client, server)
            return min(client, server)

        self.frame_max = negotiate(self.params.frame_max, int(tune.frame_max))
        self.heartbeat = negotiate(self.params.heartbeat, int(tune.heartbeat))
        channel_max = negotiate(self.params.channel_max, int(tune.channel_max))
        self.channel_max = channel_max
        self.write(
            frame.marshal(
                commands.Connection.TuneOk(
                    channel_max=channel_max, frame_max=self.frame_max, heartbeat=self.heartbeat
                ),
                0,
            )
        )
        self.write(frame.marshal(commands.Connection.Open(virtual_host=self.params.vhost), 0))

    # -- heartbeats and shutdown --------------------------------------------------------

    def _schedule_heartbeat(self) -> None:
        if self.heartbeat > 0 and self.closed_reason is None:
            self._heartbeat_timer = self.loop.call_later(self.heartbeat / 2, self._heartbeat_tick)

    def _heartbeat_tick(self) -> None:
        if self.closed_reason is not None:
            return
        if not self._sent:
            self.write(HEARTBEAT_FRAME)
        self._sent = False
        if self._heard:
            self._silent_ticks = 0
        else:
            self._silent_ticks += 1
            if self._silent_ticks >= 4:  # two heartbeat intervals without a byte
                self._shutdown(
                    AmqpClosed(
                        f"connection {self.name}: no heartbeat from the broker for "
                        f"{2 * self.heartbeat} s",
                        0,
                    ),
                    lost=True,
                )
                return
        self._heard = False
        self._schedule_heartbeat()

    def _shutdown(self, reason: AmqpClosed, lost: bool = False) -> None:
        if self.closed_reason is not None:
            return
        self.closed_reason = reason
        if self._heartbeat_timer is not None:
            self._heartbeat_timer.cancel()
        if self._holding is not None:
            self._holding.cancel()
            self._holding = None
        if not self._handshake.done():
            self._handshake.set_exception(reason)
        for channel in list(self._channels.values()):
            channel._fail(reason)
            if lost:
                channel.listener.on_closed(reason)
        self._channels.clear()
        if self._close_waiter is not None and not self._close_waiter.done():
            self._close_waiter.set_result(None)
        if not self._closed.done():
            self._closed.set_result(None)
        if self.transport is not None:
            self.transport.close()
        if lost and self.on_lost is not None and self._handshake.done():
            self.on_lost(self, reason)


def _socket_options(transport: asyncio.Transport, params: ConnectionParams) -> None:
    """TCP_NODELAY and the buffer sizes ``params`` asks for, on the connection's socket."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if params.tcp_nodelay else 0)
        if params.tcp_send_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, params.tcp_send_buffer)
        if params.tcp_receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, params.tcp_receive_buffer)


@dataclass(frozen=True, slots=True)
class Tuning:
    """What a run asks of its connections beyond the uri: heartbeat (s), frame-max and
    channel-max (None: the uri's query or flowdeck's default), TCP_NODELAY and buffers."""

    heartbeat: int | None = None
    frame_max: int | None = None
    channel_max: int | None = None
    tcp_nodelay: bool = True
    tcp_send_buffer: int = 0
    tcp_receive_buffer: int = 0

    def applied(self, params: ConnectionParams) -> ConnectionParams:
        return replace(
            params,
            heartbeat=params.heartbeat if self.heartbeat is None else self.heartbeat,
            frame_max=params.frame_max if self.frame_max is None else self.frame_max,
            channel_max=params.channel_max if self.channel_max is None else self.channel_max,
            tcp_nodelay=self.tcp_nodelay,
            tcp_send_buffer=self.tcp_send_buffer,
            tcp_receive_buffer=self.tcp_receive_buffer,
        )


async def connect(
    uri: str,
    name: str,
    *,
    ssl_context: ssl.SSLContext | None = None,
    on_blocked: Callable[[Connection, str], None] | None = None,
    on_unblocked: Callable[[Connection], None] | None = None,
    on_lost: Callable[[Connection, AmqpClosed], None] | None = None,
    tuning: Tuning | None = None,
) -> Connection:
    """Open an AMQP connection named ``name`` (shown in the management UI), tuned as
    ``tuning`` says (else as the uri's query says).

    Raises :class:`BrokerUnavailable` saying which of timeout, refused, authentication
    or vhost stopped it, with what to check.
    """
    params = parse_uri(uri)
    if tuning is not None:
        params = tuning.applied(params)
    loop = asyncio.get_running_loop()
    context: ssl.SSLContext | None = None
    if params.tls:
        context = ssl_context or context_for_uri(uri)
    where = params.where
    holder: list[Connection] = []

    def factory() -> Connection:
        connection = Connection(
            params, name, on_blocked=on_blocked, on_unblocked=on_unblocked, on_lost=on_lost
        )
        holder.append(connection)
        return connection

    async def open_and_handshake() -> Connection:
        await loop.create_connection(
            factory,
            params.host,
            params.port,
            ssl=context,
            server_hostname=params.host if context else None,
        )
        connection = holder[0]
        await connection._handshake
        return connection

    try:
        return await asyncio.wait_for(open_and_handshake(), params.connect_timeout)
    except TimeoutError:
        _abort(holder)
        raise BrokerUnavailable(
            f"no answer from the broker at {where} within {params.connect_timeout:g} s; "
            "check the host and port and that RabbitMQ is up"
        ) from None
    except ConnectionRefusedError:
        raise BrokerUnavailable(
            f"connection refused at {where}: is RabbitMQ running and listening there?"
        ) from None
    except ssl.SSLError as exc:
        _abort(holder)
        raise BrokerUnavailable(f"TLS handshake with {where} failed: {tls_advice(exc)}") from None
    except OSError as exc:
        raise BrokerUnavailable(
            f"cannot reach the broker at {where}: {exc.strerror or exc}"
        ) from None
    except AmqpClosed as exc:
        _abort(holder)
        if params.tls and CERTIFICATE_REQUIRED in str(exc):
            raise BrokerUnavailable(
                f"the broker at {where} requires a client certificate and got none: give "
                "--cert-file and --key-file (uri parameters certfile=, keyfile=)"
            ) from None
        if not params.tls and exc.reply_code == 0:
            raise BrokerUnavailable(
                f"the broker at {where} closed the connection before the AMQP handshake "
                f"({exc}); if that port speaks TLS, use amqps:// (usually port 5671)"
            ) from None
        if exc.reply_code == ACCESS_REFUSED:
            raise BrokerUnavailable(
                f"the broker at {where} refused user {params.username!r}: wrong user name or "
                f"password ({exc})"
            ) from None
        if exc.reply_code == NOT_ALLOWED:
            raise BrokerUnavailable(
                f"vhost {params.vhost!r} at {where} does not exist or user "
                f"{params.username!r} may not use it ({exc})"
            ) from None
        raise BrokerUnavailable(
            f"the broker at {where} closed the connection during the handshake: {exc}"
        ) from None


def tls_advice(exc: ssl.SSLError) -> str:
    """What a TLS failure means for the operator, with the library's reason."""
    reason = str(exc.reason or exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        detail = exc.verify_message or reason
        return (
            f"the broker's certificate is not trusted ({detail}); give the CA that signed it "
            "with --ca-file (uri parameter cacertfile=), or --insecure for a lab broker"
        )
    return tls_hint(reason) or reason


def tls_hint(text: str) -> str | None:
    """What an OpenSSL reason found in ``text`` means for the operator; None if none is."""
    for reason in _NOT_TLS:
        if reason in text:
            return (
                f"the port does not speak TLS ({reason}); it looks like a plain AMQP port: use "
                "amqp:// (usually port 5672) or the broker's TLS port (usually 5671)"
            )
    if CERTIFICATE_REQUIRED in text or "HANDSHAKE_FAILURE" in text:
        return (
            "the broker refused the TLS handshake; it requires a client certificate: give "
            "--cert-file and --key-file (uri parameters certfile=, keyfile=)"
        )
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            "the broker's certificate is not trusted; give the CA that signed it with "
            "--ca-file (uri parameter cacertfile=), or --insecure for a lab broker"
        )
    return None


_NOT_TLS = ("WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "PACKET_LENGTH_TOO_LONG")


def _abort(holder: list[Connection]) -> None:
    for connection in holder:
        if connection.transport is not None:
            connection.transport.abort()
