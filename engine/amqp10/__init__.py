"""Clients of AMQP 1.0 (python-qpid-proton's engine on asyncio), to classic and quorum queues.

On RabbitMQ 3.x AMQP 1.0 is the ``rabbitmq_amqp1_0`` plugin, which translates every message
to AMQP 0.9.1 inside the broker; 4.x speaks AMQP 1.0 natively, so figures do not carry over
between them (engine/protocols.py ``AMQP10_NOTE``, said in every AMQP 1.0 run's header).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowdeck.engine.amqp10.clients import (
    Amqp10Receiver,
    Amqp10Sender,
    opened,
    receiver_link,
    sender_link,
)
from flowdeck.engine.amqp10.link import open_connection
from flowdeck.engine.consumer import ConsumerTally
from flowdeck.engine.samples import LatencySamples
from flowdeck.engine.spec import RunSpec

if TYPE_CHECKING:
    from flowdeck.engine.client_base import Place

__all__ = ["Amqp10Receiver", "Amqp10Sender", "open_receiver", "open_sender"]


async def open_sender(
    spec: RunSpec,
    place: Place,
    *,
    publisher_id: int,
    queue: str,
    inflight: int,
    rate: float,
    first_sequence: int,
    confirm_latency: LatencySamples,
) -> Amqp10Sender:
    """A sender to ``queue`` on a connection of its own, its link open."""
    holder: list[Amqp10Sender] = []

    def lost(reason: str) -> None:
        for sender in holder:
            sender.lost(reason)
        place.on_lost(reason)

    amqp = await open_connection(place.uri, place.name, lost)
    settled = spec.settle_mode == "settled"
    link = sender_link(amqp, f"flowdeck-sender-{publisher_id}", queue, settled)
    try:
        await opened(amqp, link, f"publisher {publisher_id} could not send to queue {queue!r}")
    except BaseException:
        await amqp.link.close()
        raise
    sender = Amqp10Sender(
        publisher_id=publisher_id,
        amqp=amqp,
        link=link,
        message_size=spec.message_size,
        persistent=spec.persistent,
        settled=settled,
        inflight=inflight,
        rate=rate,
        first_sequence=first_sequence,
        confirm_latency=confirm_latency,
        catch_up=spec.catch_up,
    )
    holder.append(sender)
    return sender


async def open_receiver(
    spec: RunSpec,
    place: Place,
    *,
    consumer_id: int,
    queue: str,
    prefetch: int,
    ack_every: int,
    tally: ConsumerTally,
    latency: LatencySamples,
) -> Amqp10Receiver:
    """A receiver of ``queue`` on a connection of its own, its credit given."""
    holder: list[Amqp10Receiver] = []

    def lost(reason: str) -> None:
        for receiver in holder:
            receiver.lost(reason)
        place.on_lost(reason)

    amqp = await open_connection(place.uri, place.name, lost)
    link = receiver_link(amqp, f"flowdeck-receiver-{consumer_id}", queue)
    try:
        await opened(amqp, link, f"consumer {consumer_id} could not receive from queue {queue!r}")
    except BaseException:
        await amqp.link.close()
        raise
    receiver = Amqp10Receiver(
        consumer_id=consumer_id,
        amqp=amqp,
        link=link,
        queue=queue,
        prefetch=prefetch,
        outcome=spec.outcome,
        tally=tally,
        latency=latency,
        run_start_ns=place.run_start_ns,
    )
    holder.append(receiver)
    await receiver.start()
    return receiver
