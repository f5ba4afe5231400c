"""The clients of each wire protocol a run may speak (``spec.protocol``), made here.

``amqp0.9.1`` (the default) is flowdeck's own client (engine/amqp/, engine/publisher.py,
engine/consumer.py), which the worker opens itself as it always has, with reconnection. The
others are made by :func:`open_publisher` and :func:`open_consumer` on their library's
connection: ``stream`` (engine/stream/, rstream) and ``amqp1.0`` (engine/amqp10/,
python-qpid-proton). Every kind paces and windows through ``client_base.PacedPublisher``
and accounts deliveries through ``consumer.ConsumerTally``, so the worker steers and counts
them alike. A lost connection of these kinds is an error the run reports; they do not
reconnect.

What the protocols' settings mean:

* ``inflight``: AMQP 0.9.1's unconfirmed publishes; the stream protocol's confirm window;
  AMQP 1.0's unsettled deliveries (with ``settle_mode = settled`` nothing is confirmed).
* ``prefetch``: AMQP 0.9.1's basic.qos; the stream protocol's credit (in chunks); AMQP 1.0's
  link credit.
"""

from __future__ import annotations

from flowdeck.engine.client_base import ConsumerClient, Place, PublisherClient
from flowdeck.engine.consumer import ConsumerTally
from flowdeck.engine.errors import BrokerUnavailable
from flowdeck.engine.samples import LatencySamples
from flowdeck.engine.spec import RunSpec

#: What a run's header says of AMQP 1.0 on the broker it runs on.
AMQP10_NOTE = (
    "AMQP 1.0 on RabbitMQ 3.x is the rabbitmq_amqp1_0 plugin, which translates every "
    "message to AMQP 0.9.1 inside the broker; RabbitMQ 4.x speaks AMQP 1.0 natively, so "
    "these figures do not carry over between them"
)


def protocol_line(spec: RunSpec) -> str:
    """What a run's header says of its clients' protocol (other than AMQP 0.9.1)."""
    if spec.protocol == "stream":
        batching = (
            f", sub-entries of {spec.sub_entry_size}"
            + (f" ({spec.compression})" if spec.compression != "none" else "")
            if spec.sub_entry_size > 1
            else ""
        )
        return (
            f"clients speak the stream protocol: in-flight is each publisher's confirm window, "
            f"prefetch each consumer's credit in chunks; consumers start at "
            f"{spec.stream_offset}{batching}{', named producers (dedup)' if spec.dedup else ''}"
        )
    return (
        f"clients speak AMQP 1.0 ({spec.settle_mode} sends, receivers {spec.outcome} each "
        f"delivery): in-flight is each sender's unsettled window, prefetch each receiver's link "
        f"credit. {AMQP10_NOTE}"
    )


async def open_publisher(
    spec: RunSpec,
    place: Place,
    *,
    publisher_id: int,
    queue: str,
    inflight: int,
    rate: float,
    first_sequence: int,
    confirm_latency: LatencySamples,
    run_tag: str,
) -> PublisherClient:
    """A publisher of ``spec.protocol`` (not amqp0.9.1) to ``queue``, connected."""
    if spec.protocol == "stream":
        from flowdeck.engine.stream import StreamPublisher, open_client

        holder: list[StreamPublisher] = []

        def lost(reason: str) -> None:
            for publisher in holder:
                publisher.lost(reason)
            place.on_lost(reason)

        client, connection = await open_client(
            place.uri, place.stream_port, queue, place.name, lost
        )
        reference = f"flowdeck-{run_tag or spec.name}-{publisher_id}" if spec.dedup else None
        try:
            id_base = await StreamPublisher.declare(client, queue, reference)
        except Exception as exc:
            await connection.close()
            raise BrokerUnavailable(
                f"publisher {publisher_id} could not publish to stream {queue!r}: {exc}"
            ) from None
        stream_publisher = StreamPublisher(
            publisher_id=publisher_id,
            client=client,
            connection=connection,
            stream=queue,
            message_size=spec.message_size,
            inflight=inflight,
            rate=rate,
            first_sequence=first_sequence,
            confirm_latency=confirm_latency,
            catch_up=spec.catch_up,
            sub_entry_size=spec.sub_entry_size,
            compression=spec.compression,
            id_base=id_base,
        )
        holder.append(stream_publisher)
        return stream_publisher
    if spec.protocol == "amqp1.0":
        from flowdeck.engine.amqp10 import open_sender

        return await open_sender(
            spec,
            place,
            publisher_id=publisher_id,
            queue=queue,
            inflight=inflight,
            rate=rate,
            first_sequence=first_sequence,
            confirm_latency=confirm_latency,
        )
    raise ValueError(f"the worker opens {spec.protocol} clients itself")


async def open_consumer(
    spec: RunSpec,
    place: Place,
    *,
    consumer_id: int,
    queue: str,
    prefetch: int,
    ack_every: int,
    tally: ConsumerTally,
    latency: LatencySamples,
) -> ConsumerClient:
    """A consumer of ``spec.protocol`` (not amqp0.9.1) of ``queue``, consuming."""
    if spec.protocol == "stream":
        from flowdeck.engine.stream import StreamConsumer, offset_specification, open_client

        holder: list[StreamConsumer] = []

        def lost(reason: str) -> None:
            for consumer in holder:
                consumer.lost(reason)
            place.on_lost(reason)

        client, connection = await open_client(
            place.uri, place.stream_port, queue, place.name, lost
        )
        stream_consumer = StreamConsumer(
            consumer_id=consumer_id,
            client=client,
            connection=connection,
            queue=queue,
            prefetch=prefetch,
            offset=offset_specification(spec.stream_offset, place.start_at),
            tally=tally,
            latency=latency,
            run_start_ns=place.run_start_ns,
        )
        holder.append(stream_consumer)
        try:
            await stream_consumer.start()
        except Exception as exc:
            await connection.close()
            raise BrokerUnavailable(
                f"consumer {consumer_id} could not read stream {queue!r}: {exc}"
            ) from None
        return stream_consumer
    if spec.protocol == "amqp1.0":
        from flowdeck.engine.amqp10 import open_receiver

        return await open_receiver(
            spec,
            place,
            consumer_id=consumer_id,
            queue=queue,
            prefetch=prefetch,
            ack_every=ack_every,
            tally=tally,
            latency=latency,
        )
    raise ValueError(f"the worker opens {spec.protocol} clients itself")
