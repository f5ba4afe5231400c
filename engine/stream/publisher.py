"""A stream-protocol publisher: flowdeck's pacing and window over a stream's publishing ids.

Publish frames are built here from one prebuilt message (sequence and send times patched
in with ``struct.pack_into``, as the AMQP 0.9.1 publisher does) and written to the
connection's socket in one go. A message's tag (its place in the send order, from 1) is its
publishing id less the producer's base: 0, or with ``dedup`` the last id the broker kept for
this producer's name, so a re-sent message is dropped by the broker. With sub-entry batching
a batch of ``sub_entry_size`` messages is one entry whose publishing id is its last
message's, and its confirm confirms the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import struct
from typing import Any

from rstream import schema
from rstream.client import Client

from flowdeck.engine.amqp.frames import BODY_FIELDS, SEND_FIELDS
from flowdeck.engine.client_base import LinkConnection, PacedPublisher
from flowdeck.engine.samples import LatencySamples

#: The Publish command (key 2), version 1: size, key, version, publisher id, entries.
_HEADER = struct.Struct(">IHHBi")
_ENTRY = struct.Struct(">QI")  # publishing id, size
_SUB_ENTRY = struct.Struct(">QBHII")  # publishing id, type, messages, plain size, data size
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_PUBLISH_KEY = 2
#: Bytes waiting in the socket's buffer above which the publisher waits for it to drain.
WRITE_BUFFER_LIMIT = 4 * 1024 * 1024
_GZIP = 1


class StreamPublisher(PacedPublisher):
    """Publishes to one stream on ``client`` until stopped; every message is confirmed."""

    def __init__(
        self,
        *,
        publisher_id: int,
        client: Client,
        connection: LinkConnection,
        stream: str,
        message_size: int,
        inflight: int,
        rate: float,
        first_sequence: int,
        confirm_latency: LatencySamples,
        catch_up: bool = True,
        sub_entry_size: int = 1,
        compression: str = "none",
        id_base: int = 0,
    ) -> None:
        super().__init__(
            publisher_id=publisher_id,
            loop=asyncio.get_running_loop(),
            confirms=True,
            inflight=inflight,
            rate=rate,
            first_sequence=first_sequence,
            confirm_latency=confirm_latency,
            catch_up=catch_up,
        )
        self.client = client
        self.connection = connection
        self.stream = stream
        self.sub_entry_size = sub_entry_size
        self.compression = compression
        #: Publishing id of tag 0 (with dedup: the last id the broker has for the name).
        self.id_base = id_base
        self.error: str | None = None
        body = bytearray(message_size)
        BODY_FIELDS.pack_into(body, 0, publisher_id, 0, 0, 0)
        self._body = bytes(body)
        self._entry = _ENTRY.pack(0, message_size) + self._body
        self._link = 0  # the protocol's publisher id on this connection
        self._draining = False
        writer = getattr(getattr(client, "_conn", None), "_writer", None)
        if writer is None:
            raise RuntimeError("the stream client is not connected")
        self._writer: asyncio.StreamWriter = writer
        client.add_handler(
            schema.PublishConfirm, self._on_confirm, name=f"flowdeck-p{publisher_id}"
        )
        client.add_handler(schema.PublishError, self._on_error, name=f"flowdeck-p{publisher_id}")

    @classmethod
    async def declare(cls, client: Client, stream: str, reference: str | None) -> int:
        """Declare the protocol's publisher (id 0) for ``stream``; the publishing id base:
        with a ``reference`` (dedup) the last id the broker kept for it, else 0."""
        await client.declare_publisher(stream=stream, reference=reference, publisher_id=0)
        if reference is None:
            return 0
        return int(await client.query_publisher_sequence(stream=stream, reference=reference))

    # -- PacedPublisher's hooks ---------------------------------------------------------

    def _failed(self) -> bool:
        return self.error is not None or not self.connection.open

    def _held(self) -> bool:
        if self._writer.transport.get_write_buffer_size() <= WRITE_BUFFER_LIMIT:
            return False
        if not self._draining:
            self._draining = True
            self.loop.create_task(self._drain())
        return True

    async def _drain(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()
        self._draining = False
        self.pump()

    def _write(self, count: int, sequence: int, now: int, intended: list[int]) -> None:
        tag = self.published + 1  # the first message's tag
        if self.sub_entry_size > 1:
            frame = self._sub_entries(count, sequence, tag, now, intended)
        else:
            frame = self._entries(count, sequence, tag, now, intended)
        self._writer.write(frame)

    def _entries(
        self, count: int, sequence: int, tag: int, now: int, intended: list[int]
    ) -> bytearray:
        entry = self._entry
        size = len(entry)
        frame = bytearray(_HEADER.size) + bytearray(entry) * count
        _HEADER.pack_into(frame, 0, len(frame) - 4, _PUBLISH_KEY, 1, self._link, count)
        offset = _HEADER.size
        pack_id, pack_fields = _U64.pack_into, SEND_FIELDS.pack_into
        publishing_id = self.id_base + tag
        for i in range(count):
            pack_id(frame, offset, publishing_id + i)
            pack_fields(frame, offset + 16, sequence + i, now, intended[i])
            offset += size
        return frame

    def _sub_entries(
        self, count: int, sequence: int, tag: int, now: int, intended: list[int]
    ) -> bytearray:
        body = self._body
        record = _U32.pack(len(body)) + body
        size = len(record)
        parts: list[bytes] = []
        done = 0
        while done < count:
            n = min(self.sub_entry_size, count - done)
            plain = bytearray(record) * n
            offset = 4
            for i in range(done, done + n):
                SEND_FIELDS.pack_into(plain, offset + 4, sequence + i, now, intended[i])
                offset += size
            data = gzip.compress(bytes(plain), 1) if self.compression == "gzip" else plain
            kind = 0x80 | ((_GZIP if self.compression == "gzip" else 0) << 4)
            last = self.id_base + tag + done + n - 1
            parts.append(_SUB_ENTRY.pack(last, kind, n, len(plain), len(data)))
            parts.append(bytes(data))
            done += n
        frame = bytearray(_HEADER.size) + b"".join(parts)
        _HEADER.pack_into(frame, 0, len(frame) - 4, _PUBLISH_KEY, 1, self._link, len(parts) // 2)
        return frame

    # -- the broker's answers -----------------------------------------------------------

    def _on_confirm(self, frame: Any) -> None:
        if frame.publisher_id != self._link:
            return
        ids = sorted(frame.publishing_ids)
        base = self.id_base
        if self.sub_entry_size > 1:
            # A batch's id is its last message's: its confirm settles the batch.
            self._resolve(ids[-1] - base, True, acked=True)
        elif ids[-1] - ids[0] + 1 == len(ids) and ids[0] - base == self._resolved_upto + 1:
            self._resolve(ids[-1] - base, True, acked=True)
        else:
            for publishing_id in ids:
                self._resolve(publishing_id - base, False, acked=True)
        self.on_read_done()

    def _on_error(self, frame: Any) -> None:
        if frame.publisher_id != self._link:
            return
        multiple = self.sub_entry_size > 1
        for error in frame.errors:
            self._resolve(error.publishing_id - self.id_base, multiple, acked=False)
        self.on_read_done()

    def lost(self, reason: str) -> None:
        """The connection went: what is in flight stays unconfirmed."""
        if self.error is None:
            self.error = reason
            self._abandon_channel()
            self._cancel_timer()
            self._settled.set()
