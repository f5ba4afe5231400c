"""Clients of RabbitMQ's stream protocol (the ``rabbitmq_stream`` plugin), on ``rstream``.

The publisher's confirm window is the run's in-flight setting and the consumer's credit its
prefetch (counted in chunks, as the protocol counts credit), both steerable live; sub-entry
batching (``sub_entry_size``) with optional gzip compression; named producers for
deduplication (``dedup``); the consumer starts where ``stream_offset`` says. A stream keeps
what it delivered, so a message read again — by a second consumer, or by one re-reading
from an offset — counts as *replayed*, not as a duplicate (engine/consumer.py
``ConsumerTally.record``).
"""

from __future__ import annotations

from flowdeck.engine.stream.consumer import StreamConsumer, offset_specification
from flowdeck.engine.stream.link import open_client
from flowdeck.engine.stream.publisher import StreamPublisher

__all__ = ["StreamConsumer", "StreamPublisher", "offset_specification", "open_client"]
