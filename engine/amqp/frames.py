"""AMQP 0-9-1 frame layout for the hot path: prebuilt publish frames and acks.

pamqp builds every frame once (its definitions are the AMQP spec); after that only the
bytes that change per message are patched with ``struct.pack_into``. The constants below
are what the readers compare against to recognise the few frames that arrive per message
(Basic.Ack/Nack at a publisher, Basic.Deliver at a consumer) without unmarshalling them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pamqp import commands, frame, header

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
#: Type, channel, size before every frame's payload; one end byte after it.
FRAME_OVERHEAD = 8

# class id << 16 | method id, as a method frame's payload starts.
BASIC_ACK = (60 << 16) | 80
BASIC_NACK = (60 << 16) | 120
BASIC_DELIVER = (60 << 16) | 60
BASIC_RETURN = (60 << 16) | 50
BASIC_GET_OK = (60 << 16) | 71

FRAME_HEADER_STRUCT = struct.Struct(">BHI")
METHOD_ID = struct.Struct(">I")
ACK_FIELDS = struct.Struct(">QB")  # delivery tag, bits (multiple = 1; nack requeue = 2)
U64 = struct.Struct(">Q")
SHORTSTR_LEN = struct.Struct(">B")
#: Body layout every flowdeck message starts with: publisher id, sequence, actual and
#: intended send time (unix ns).
BODY_FIELDS = struct.Struct(">IQQQ")
SEND_FIELDS = struct.Struct(">QQQ")  # sequence, actual ns, intended ns (after publisher id)
BODY_FIELDS_SIZE = BODY_FIELDS.size

HEARTBEAT_FRAME = bytes([FRAME_HEARTBEAT, 0, 0, 0, 0, 0, 0, FRAME_END])

_ACK_FRAME = struct.Struct(">BHIIQBB")


def ack_frame(channel: int) -> bytearray:
    """A Basic.Ack frame for ``channel``; patch tag and multiple with :func:`patch_ack`."""
    return bytearray(_ACK_FRAME.pack(FRAME_METHOD, channel, 13, BASIC_ACK, 0, 0, FRAME_END))


def nack_frame(channel: int, tag: int, requeue: bool) -> bytes:
    """A Basic.Nack frame for one delivery on ``channel``, requeued or not (the broker
    dead-letters or drops a message not requeued)."""
    return _ACK_FRAME.pack(
        FRAME_METHOD, channel, 13, BASIC_NACK, tag, 2 if requeue else 0, FRAME_END
    )


#: Offset of the delivery tag in an ack frame (then one byte of bits).
ACK_TAG_OFFSET = 11


@dataclass(frozen=True, slots=True)
class PublishTemplate:
    """Basic.Publish + content header + body frame(s) of one message, built once.

    ``frames`` holds one whole message on the wire; ``fields_offset`` is where the body's
    sequence and send times go (after the publisher id, which is fixed per publisher);
    ``priority_offset`` is where the priority property's octet is (-1: no priority).
    Bodies larger than the negotiated frame_max are split over several body frames; the
    patched fields always sit in the first one.
    """

    frames: bytes
    fields_offset: int
    priority_offset: int = -1

    @property
    def size(self) -> int:
        return len(self.frames)


def publish_template(
    *,
    channel: int,
    exchange: str,
    routing_key: str,
    mandatory: bool,
    persistent: bool,
    publisher_id: int,
    message_size: int,
    frame_max: int,
    priority: int | None = None,
) -> PublishTemplate:
    """One message's frames; ``priority`` (0..255) sets the priority property, which
    the publisher may then patch per message at ``priority_offset``."""
    if message_size < BODY_FIELDS_SIZE:
        raise ValueError(f"message_size must be at least {BODY_FIELDS_SIZE}, got {message_size}")
    method = frame.marshal(
        commands.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory),
        channel,
    )
    properties = commands.Basic.Properties(delivery_mode=2 if persistent else 1, priority=priority)
    content_header = frame.marshal(
        header.ContentHeader(weight=0, body_size=message_size, properties=properties), channel
    )
    body = bytearray(message_size)
    BODY_FIELDS.pack_into(body, 0, publisher_id, 0, 0, 0)
    chunk = max(frame_max - FRAME_OVERHEAD, BODY_FIELDS_SIZE) if frame_max else message_size
    parts = [method, content_header]
    for start in range(0, message_size, chunk):
        payload = bytes(body[start : start + chunk])
        parts.append(
            FRAME_HEADER_STRUCT.pack(FRAME_BODY, channel, len(payload))
            + payload
            + bytes([FRAME_END])
        )
    fields_offset = len(method) + len(content_header) + 7 + 4
    # The content header: frame header (7), class, weight, body size, property flags (14),
    # then the properties set, in order: delivery mode (1), priority (1).
    priority_offset = -1 if priority is None else len(method) + 7 + 14 + 1
    return PublishTemplate(b"".join(parts), fields_offset, priority_offset)
