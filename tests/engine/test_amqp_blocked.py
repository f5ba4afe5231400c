"""connection.blocked / unblocked from a real memory alarm on a private node."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from flowdeck.collectors import LocalBroker
from flowdeck.engine.amqp import Connection, connect
from flowdeck.engine.publisher import Publisher
from flowdeck.engine.samples import LatencySamples
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    node = private_broker()
    yield node
    private_broker.discard(node)


async def test_memory_alarm_blocks_and_unblocks_the_connection(node: LocalBroker) -> None:
    events: list[tuple[str, str, float]] = []

    def blocked(connection: Connection, reason: str) -> None:
        events.append(("blocked", reason, time.monotonic()))

    def unblocked(connection: Connection) -> None:
        events.append(("unblocked", "", time.monotonic()))

    connection = await connect(node.uri, "test blocked", on_blocked=blocked, on_unblocked=unblocked)
    channel = await connection.channel()
    await channel.confirm_select()
    # RabbitMQ blocks a connection when it next publishes under an alarm: keep publishing.
    publisher = Publisher(
        publisher_id=0,
        connection=connection,
        channel=channel,
        exchange="",
        routing_key="flowdeck-test-nowhere",
        message_size=100,
        persistent=False,
        mandatory=False,
        confirms=True,
        inflight=100,
        rate=20.0,
        first_sequence=0,
        confirm_latency=LatencySamples(),
    )
    publisher.start()
    try:
        await asyncio.to_thread(node.set_memory_watermark, absolute="1MB")
        for _ in range(200):
            if connection.blocked:
                break
            await asyncio.sleep(0.05)
        assert connection.blocked, "the broker must send connection.blocked under an alarm"
        assert "memory" in (connection.blocked_reason or "")
    finally:
        await asyncio.to_thread(node.set_memory_watermark, 0.4)
    for _ in range(200):
        if not connection.blocked:
            break
        await asyncio.sleep(0.05)
    assert not connection.blocked
    assert [kind for kind, _, _ in events] == ["blocked", "unblocked"]
    assert connection.is_open
    publisher.stop()
    await connection.close()
