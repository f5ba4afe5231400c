"""The accounting of rejected and dead-lettered messages, from workers' reports alone: a
message is consumed, dead-lettered (taken off the run's dead-letter queue), dropped
(rejected for good and seen nowhere after) or lost, never two of them."""

from __future__ import annotations

from pamqp import commands, frame, header

from flowdeck.engine.accounting import data_safety
from flowdeck.engine.amqp.connection import Channel
from flowdeck.engine.snapshot import Counters, SequenceRanges, WorkerReport


def ranges(*spans: tuple[int, int]) -> tuple[SequenceRanges, ...]:
    return (SequenceRanges(0, spans),)


def test_dead_lettered_and_dropped_are_not_lost() -> None:
    # Publisher 0 sent 0..100, all confirmed. Worker 0 consumed 0..80 and rejected 80..100
    # for good; worker 1 took 80..90 off the dead-letter queue; 90..100 went nowhere.
    reports = [
        WorkerReport(
            worker=0,
            counters=Counters(published=100, confirmed=100, consumed=80, rejected=20),
            confirmed=ranges((0, 100)),
            consumed=ranges((0, 80)),
            discarded=ranges((80, 100)),
        ),
        WorkerReport(
            worker=1,
            counters=Counters(dead_lettered=10),
            dead_lettered=ranges((80, 90)),
        ),
    ]
    safety = data_safety(reports)
    assert (safety.consumed, safety.dead_lettered, safety.dropped) == (80, 10, 10)
    assert safety.rejected == 20 and safety.lost == 0


def test_a_message_neither_consumed_nor_rejected_is_lost_still() -> None:
    report = WorkerReport(
        worker=0,
        counters=Counters(published=10, confirmed=10, consumed=7, rejected=1),
        confirmed=ranges((0, 10)),
        consumed=ranges((0, 7)),
        discarded=ranges((7, 8)),
    )
    safety = data_safety([report])
    assert (safety.dropped, safety.lost) == (1, 2)


def _content_header(headers: dict[str, object] | None) -> bytes:
    properties = commands.Basic.Properties(delivery_mode=2, headers=headers)
    return frame.marshal(header.ContentHeader(0, 100, properties), 1)


def test_a_delivery_says_its_failed_deliveries_before_from_its_header() -> None:
    """The x-delivery-count a quorum queue puts on a redelivery, read from the content
    header found before the body in the read buffer (the usual case) or kept when the
    content came in pieces; a first delivery has none (0)."""
    channel = Channel(None, 1)  # type: ignore[arg-type]  # only the header is read
    body = bytes(range(100))
    body_frame = bytes([3, 0, 1]) + (100).to_bytes(4, "big") + body + bytes([0xCE])
    for headers, count in (({"x-delivery-count": 2}, 2), (None, 0), ({"a": "\x02"}, 0)):
        # a deliver method frame before it (its bytes could look like a frame header)
        buffer = bytearray(b"\x02\x00\x01" * 20) + _content_header(headers) + body_frame
        offset = len(buffer) - 101  # where the body starts
        assert channel.delivery_count(buffer, offset) == count, headers
    channel._on_header(100, _content_header(None))
    channel._content_kind = 0  # not a delivery being assembled: the header is not kept
    assert channel.delivery_count(b"", 0) == 0
    channel._content_kind = 1
    channel._on_header(100, _content_header({"x-delivery-count": 5, "other": "x"}))
    assert channel.delivery_count(body, 0) == 5
