"""The same small runs through flowdeck's lean path and through plain aio-pika give the
same counts: published, confirmed, nacked, returned, consumed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aio_pika
import pytest
from aiormq.exceptions import DeliveryError

from flowdeck.engine.amqp import connect
from flowdeck.engine.consumer import Consumer, ConsumerTally
from flowdeck.engine.publisher import Publisher
from flowdeck.engine.samples import LatencySamples

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

NOWHERE = "flowdeck-test-no-such-queue"


@dataclass(frozen=True)
class Case:
    name: str
    count: int
    queue_arguments: dict[str, Any]
    mandatory: bool = False
    to_nowhere: bool = False
    consume: bool = True


CASES = [
    Case("plain", 1500, {}),
    Case(
        "reject-publish", 300, {"x-max-length": 100, "x-overflow": "reject-publish"}, consume=False
    ),
    Case("returned", 50, {}, mandatory=True, to_nowhere=True, consume=False),
    Case("quorum", 800, {"x-queue-type": "quorum"}),
]


@dataclass
class Outcome:
    published: int = 0
    confirmed: int = 0
    nacked: int = 0
    returned: int = 0
    consumed: int = 0


async def until(condition: Callable[[], bool], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def lean(uri: str, queue: str, case: Case) -> Outcome:
    publisher_connection = await connect(uri, "differential lean publisher")
    consumer_connection = await connect(uri, "differential lean consumer")
    channel = await publisher_connection.channel()
    await channel.confirm_select()
    tally = ConsumerTally({})
    consumer = None
    if case.consume:
        consumer = Consumer(
            consumer_id=0,
            connection=consumer_connection,
            queue=queue,
            prefetch=100,
            ack_every=10,
            auto_ack=False,
            arguments=None,
            tally=tally,
            latency=LatencySamples(),
            run_start_ns=0,
        )
        await consumer.start()
    publisher = Publisher(
        publisher_id=0,
        connection=publisher_connection,
        channel=channel,
        exchange="",
        routing_key=NOWHERE if case.to_nowhere else queue,
        message_size=500,
        persistent=True,
        mandatory=case.mandatory,
        confirms=True,
        inflight=case.count,
        rate=0.0,
        first_sequence=0,
        confirm_latency=LatencySamples(),
    )
    publisher.start()
    await until(lambda: publisher.published >= case.count)
    publisher.stop()
    await publisher.wait_confirms(30)
    await until(lambda: publisher.returned >= case.count if case.to_nowhere else True, 10)
    if consumer is not None:
        await until(lambda: tally.consumed >= publisher.confirmed)
        await consumer.stop()
    await publisher_connection.close()
    await consumer_connection.close()
    return Outcome(
        publisher.published,
        publisher.confirmed,
        publisher.nacked,
        publisher.returned,
        tally.consumed,
    )


async def plain_aio_pika(uri: str, queue: str, case: Case, count: int) -> Outcome:
    """``count`` messages, one publish each (the lean path's count: it has no message limit
    and may publish a window more than ``case.count`` before the test stops it)."""
    outcome = Outcome()
    publish_connection = await aio_pika.connect(uri)
    consume_connection = await aio_pika.connect(uri)
    channel = await publish_connection.channel(publisher_confirms=True, on_return_raises=False)
    channel.return_callbacks.add(lambda *_: setattr(outcome, "returned", outcome.returned + 1))
    if case.consume:
        consume_channel = await consume_connection.channel()
        await consume_channel.set_qos(prefetch_count=100)
        source = await consume_channel.get_queue(queue)

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            outcome.consumed += 1
            await message.ack()

        await source.consume(on_message)
    key = NOWHERE if case.to_nowhere else queue

    async def publish_one() -> None:
        try:
            await channel.default_exchange.publish(
                aio_pika.Message(b"x" * 500, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=key,
                mandatory=case.mandatory,
            )
            outcome.confirmed += 1
        except DeliveryError:
            outcome.nacked += 1

    await asyncio.gather(*(publish_one() for _ in range(count)))
    outcome.published = count
    if case.consume:
        await until(lambda: outcome.consumed >= outcome.confirmed)
    await publish_connection.close()
    await consume_connection.close()
    return outcome


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_lean_and_aio_pika_agree(shared_uri: str, case: Case) -> None:
    admin = await aio_pika.connect(shared_uri)
    admin_channel = await admin.channel()

    async def on_a_fresh_queue(run: Callable[[str], Awaitable[Outcome]]) -> Outcome:
        queue = f"flowdeck-test-diff-{uuid.uuid4().hex[:8]}"
        await admin_channel.declare_queue(
            queue, durable=True, arguments=case.queue_arguments or None
        )
        try:
            return await run(queue)
        finally:
            await admin_channel.queue_delete(queue)

    try:
        lean_outcome = await on_a_fresh_queue(lambda q: lean(shared_uri, q, case))
        # The lean publisher stops when the test sees case.count published; unpaced, it
        # may have sent up to one more window by then. aio-pika publishes the same number.
        assert lean_outcome.published >= case.count
        plain_outcome = await on_a_fresh_queue(
            lambda q: plain_aio_pika(shared_uri, q, case, lean_outcome.published)
        )
    finally:
        await admin.close()
    assert lean_outcome == plain_outcome
