"""The management collector against a real private node: alarms, blocking, queue depth."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import aio_pika
import httpx
import pytest

from flowdeck.collectors import (
    BrokerSample,
    BrokerWatch,
    LocalBroker,
    ManagementCollector,
    NodeSample,
    SourceError,
)
from flowdeck.collectors.client_names import client_connection_name, new_run_tag
from flowdeck.collectors.local_broker import free_port
from tests.collectors.conftest import wait_for

pytestmark = [pytest.mark.private_broker, pytest.mark.slow]


@pytest.fixture
async def collector(node: LocalBroker) -> AsyncIterator[ManagementCollector]:
    async with ManagementCollector(
        node.management_url,
        username="guest",
        password="guest",
        statistics_interval=node.stats_interval_ms / 1000,
    ) as collector:
        yield collector


class Watched:
    """Runs a BrokerWatch in the background and keeps what it hands on."""

    def __init__(self, collector: ManagementCollector) -> None:
        self.samples: list[BrokerSample] = []
        self.stop = asyncio.Event()
        self.watch = BrokerWatch(collector, self.samples.append)
        self.task = asyncio.create_task(self.watch.run(self.stop))

    async def first(self, predicate: object, *, since: int = 0, limit: float = 30.0) -> float:
        """Seconds until a sample after index ``since`` satisfies ``predicate``."""
        began = time.monotonic()
        while time.monotonic() - began < limit:
            if any(predicate(s) for s in self.samples[since:]):  # type: ignore[operator]
                return time.monotonic() - began
            await asyncio.sleep(0.05)
        return float("inf")

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 10)


async def _publish_steadily(uri: str, queue: str, stop: asyncio.Event) -> int:
    """Publish about 50 msg/s until stopped (bounded to 60 s); returns how many."""
    published = 0
    connection = await aio_pika.connect(uri)
    try:
        channel = await connection.channel()
        await channel.declare_queue(queue, durable=False)
        began = time.monotonic()
        while not stop.is_set() and time.monotonic() - began < 60:
            await channel.default_exchange.publish(aio_pika.Message(b"tick"), routing_key=queue)
            published += 1
            await asyncio.sleep(0.02)
        await channel.queue_delete(queue)
    finally:
        await connection.close()
    return published


async def test_figures_are_complete_and_their_age_is_told(
    node: LocalBroker, collector: ManagementCollector, queue_name: str
) -> None:
    stop = asyncio.Event()
    publisher = asyncio.create_task(_publish_steadily(node.uri, queue_name, stop))
    collector.set_queue_names([queue_name])
    try:

        async def with_rates() -> BrokerSample | None:
            sample = await collector.sample()
            ready = sample.publish_rate and sample.nodes and sample.nodes[0].figures_at
            return sample if ready else None

        sample, _ = await wait_for(with_rates, limit=40, every=0.5)
        for _ in range(8):  # the queue's counters move every 5 s; rates span that
            await asyncio.sleep(1.0)
            later = await collector.sample()
    finally:
        stop.set()
        await publisher
    assert sample is not None, "no sample with rates and node figures"
    assert not sample.stale
    assert collector.statistics_interval == 1.0 and collector.statistics_interval_known
    assert 0 < sample.age <= collector.statistics_interval
    node_figures = sample.nodes[0]
    assert node_figures.mem_used and node_figures.mem_limit
    assert node_figures.mem_used < node_figures.mem_limit
    assert node_figures.disk_free and node_figures.disk_free_limit and node_figures.fd_total
    assert node_figures.figures_at is not None
    # Node figures refresh every 5 s; read on a one-second grid.
    assert 0 <= sample.taken_at - node_figures.figures_at <= 5.0 + 1.0
    assert sample.publish_rate is not None and sample.publish_rate > 0
    assert sample.broker_version.startswith("3.")
    # Per-queue rates come from the queue's counters between two polls (~50 msg/s here).
    (queue,) = later.queues
    assert queue.publish_rate is not None and queue.publish_rate > 0


async def test_interval_is_assumed_and_said_when_not_given(node: LocalBroker) -> None:
    async with ManagementCollector(
        node.management_url, username="guest", password="guest"
    ) as collector:
        line = await collector.check()
    assert collector.statistics_interval == 5.0 and not collector.statistics_interval_known
    assert "statistics every 5 s (assumed" in line


async def test_check_describes_the_broker(collector: ManagementCollector) -> None:
    line = await collector.check()
    assert "RabbitMQ 3." in line and "statistics every" in line


async def test_wrong_password_is_a_clear_error_and_a_stale_sample(node: LocalBroker) -> None:
    async with ManagementCollector(
        node.management_url, username="guest", password="not-the-password"
    ) as collector:
        with pytest.raises(SourceError) as raised:
            await collector.check()
        sample = await collector.sample()
    assert "401" in raised.value.message and "'guest'" in raised.value.message
    assert "not-the-password" not in raised.value.message
    assert sample.stale_reason == "management API: 401 unauthorized for user guest"


async def test_missing_vhost_is_named(node: LocalBroker) -> None:
    async with ManagementCollector(
        node.management_url, username="guest", password="guest", vhost="no-such-vhost"
    ) as collector:
        with pytest.raises(SourceError, match="vhost 'no-such-vhost' does not exist"):
            await collector.check()


async def test_nothing_listening_is_a_clear_error_and_a_stale_sample() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with ManagementCollector(url, username="guest", password="guest") as collector:
        with pytest.raises(SourceError, match=r"cannot connect .* rabbitmq_management"):
            await collector.check()
        sample = await collector.sample()
    assert sample.stale and "cannot connect" in sample.stale_reason


async def test_queue_depth_grows_while_nothing_consumes(
    node: LocalBroker, collector: ManagementCollector, queue_name: str
) -> None:
    collector.set_queue_names([queue_name, f"{queue_name}-absent"])
    connection = await aio_pika.connect_robust(node.uri)
    try:
        channel = await connection.channel()
        await channel.declare_queue(queue_name, durable=False)
        seen: list[int] = []
        for batch in range(3):
            for _ in range(50):
                await channel.default_exchange.publish(
                    aio_pika.Message(b"x" * 100), routing_key=queue_name
                )
            want = 50 * (batch + 1)

            async def depth_reached(want: int = want) -> int:
                sample = await collector.sample()
                return sample.queue_ready if sample.queue_ready >= want else 0

            depth, _ = await wait_for(depth_reached, limit=20)
            seen.append(depth)
        sample = await collector.sample()
        await channel.queue_delete(queue_name)
    finally:
        await connection.close()
    assert seen == [50, 100, 150]
    (queue,) = sample.queues
    assert (queue.name, queue.type, queue.consumers, queue.unacked) == (
        queue_name,
        "classic",
        0,
        0,
    )


async def _blocked_publish(channel: aio_pika.abc.AbstractChannel, queue: str) -> None:
    await channel.default_exchange.publish(aio_pika.Message(b"during alarm"), routing_key=queue)


@pytest.mark.parametrize("alarm", ["memory", "disk"])
async def test_alarm_shows_promptly_and_blocks_publishers_then_clears(
    node: LocalBroker, collector: ManagementCollector, queue_name: str, alarm: str
) -> None:
    connection = await aio_pika.connect(node.uri)
    watched = Watched(collector)
    publish: asyncio.Task[None] | None = None
    try:
        channel = await connection.channel()
        await channel.declare_queue(queue_name, durable=False, auto_delete=False)
        await watched.first(lambda s: not s.stale and s.nodes)
        started = len(watched.samples)
        raise_at = time.monotonic()
        if alarm == "memory":
            await asyncio.to_thread(node.set_memory_watermark, 0.000001)
        else:
            await asyncio.to_thread(node.set_disk_free_limit, 10**15)
        command_s = time.monotonic() - raise_at
        flag = "memory_alarm" if alarm == "memory" else "disk_alarm"
        alarm_s = await watched.first(lambda s: getattr(s, flag), since=started)
        # A publish on an alarmed broker makes the broker block that connection.
        publish = asyncio.create_task(_blocked_publish(channel, queue_name))
        blocked_s = await watched.first(lambda s: (s.connections_blocked or 0) >= 1, since=started)
        nodes_flag_s = await _nodes_flag_seen(node, alarm, True)
        cleared_from = len(watched.samples)
        if alarm == "memory":
            await asyncio.to_thread(node.set_memory_watermark, 0.4)
        else:
            await asyncio.to_thread(node.set_disk_free_limit, "50MB")
        clear_s = await watched.first(
            lambda s: not getattr(s, flag) and not s.connections_blocked, since=cleared_from
        )
        await asyncio.wait_for(publish, 30)
    finally:
        await watched.close()
        if alarm == "memory":
            await asyncio.to_thread(node.set_memory_watermark, 0.4)
        else:
            await asyncio.to_thread(node.set_disk_free_limit, "50MB")
        if publish is not None and not publish.done():
            publish.cancel()
        with contextlib.suppress(Exception):
            await (await connection.channel()).queue_delete(queue_name)
        await connection.close()
    print(
        f"\n{alarm} alarm: rabbitmqctl took {command_s:.2f} s; in a BrokerSample "
        f"{alarm_s:.2f} s after it was set; connection blocked in a sample after "
        f"{blocked_s:.2f} s; /api/nodes flag after another {nodes_flag_s:.2f} s; "
        f"alarm and block cleared in a sample {clear_s:.2f} s after restoring"
    )
    assert alarm_s < float("inf"), f"the {alarm} alarm never appeared in a sample"
    assert blocked_s < float("inf"), "the blocked publisher never appeared in a sample"
    assert clear_s < float("inf"), "the alarm or the block never cleared"
    # The prompt source: the alarm is in a sample no later than /api/nodes would say it.
    assert alarm_s <= blocked_s + nodes_flag_s + 1.0


async def _nodes_flag_seen(node: LocalBroker, alarm: str, wanted: bool) -> float:
    key = "mem_alarm" if alarm == "memory" else "disk_free_alarm"
    began = time.monotonic()
    async with httpx.AsyncClient(auth=("guest", "guest")) as http:
        while time.monotonic() - began < 30:
            nodes = (await http.get(f"{node.management_url}/api/nodes")).json()
            if nodes and nodes[0].get(key) is wanted:
                break
            await asyncio.sleep(0.2)
    return time.monotonic() - began


async def test_run_clients_and_their_messages_are_told_by_their_names(
    node: LocalBroker, queue_name: str
) -> None:
    """A tagged run's publisher and consumer (named as the engine names them), beside an
    untagged client: the sample counts the run's publisher, what the broker took from it and
    delivered to and was acked by its consumer, and every connection and channel by state
    on its node. The untagged client's message is accepted but not counted as the run's;
    delivered to the run's consumer, it counts as delivered to the run."""
    tag = new_run_tag()
    publisher_name = client_connection_name("figures", tag, 0, "publisher", 7)
    consumer_name = client_connection_name("figures", tag, 0, "consumer", 7)
    sent = 300
    stranger = await aio_pika.connect(node.uri, client_properties={"connection_name": "other"})
    publisher = await aio_pika.connect(
        node.uri, client_properties={"connection_name": publisher_name}
    )
    consumer = await aio_pika.connect(
        node.uri, client_properties={"connection_name": consumer_name}
    )
    received = 0
    try:
        consuming = await consumer.channel()
        await consuming.set_qos(prefetch_count=50)
        queue = await consuming.declare_queue(queue_name, durable=False)
        done = asyncio.Event()

        async def take(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal received
            await message.ack()
            received += 1
            if received == sent + 1:  # the stranger's message comes to the run's consumer too
                done.set()

        await queue.consume(take)
        channel = await publisher.channel()
        await (await stranger.channel()).default_exchange.publish(
            aio_pika.Message(b"not the run's"), routing_key=queue_name
        )
        for _ in range(sent):
            await channel.default_exchange.publish(aio_pika.Message(b"m"), routing_key=queue_name)
        await asyncio.wait_for(done.wait(), 30)
        async with ManagementCollector(
            node.management_url,
            username="guest",
            password="guest",
            statistics_interval=node.stats_interval_ms / 1000,
            run_tag=tag,
        ) as collector:

            async def counted() -> BrokerSample | None:
                # The counters and the gauges come from statistics the node emits apart: a
                # busy machine's sample had all 301 acks counted and 2 still unacked.
                # A connection's or channel's state comes with its first statistics
                # emission, after it is listed: a busy machine's sample listed 3 channels,
                # none of them running or in flow yet.
                sample = await collector.sample()
                settled = (
                    sample.run_accepted == sent
                    and sample.run_acked == sent + 1
                    and sample.run_unacked == 0
                    and sample.run_unconfirmed == 0
                    and len(sample.nodes) == 1
                    and states_known(sample.nodes[0], sample)
                )
                return sample if settled else None

            sample, _ = await wait_for(counted, limit=20)
        assert sample is not None, "the run's counts never reached what was sent"
        assert sample.run_publishers == 1
        assert sample.run_publishers_flow == 0 and sample.publishers_in_flow == ()
        # what the run's consumer took counts, whoever sent it; only the run's publishing
        assert sample.run_delivered == sent + 1
        assert sample.run_unacked == 0 and sample.run_unconfirmed == 0
        assert sample.connections == 3 and sample.connections_flow == 0
        (only,) = sample.nodes
        states = (
            only.connections_running,
            only.connections_flow,
            only.connections_blocking,
            only.connections_blocked,
        )
        assert states == (3, 0, 0, 0)
        assert sample.channels is not None and sample.channels >= 3
        assert (only.channels_running, only.channels_flow) == (sample.channels, 0)
    finally:
        for connection in (publisher, consumer, stranger):
            await connection.close()
        async with await aio_pika.connect(node.uri) as cleaner:
            await (await cleaner.channel()).queue_delete(queue_name)


def states_known(node: NodeSample, sample: BrokerSample) -> bool:
    """Whether every connection and channel ``sample`` lists has its state on ``node``
    (the sample's only node)."""
    connections = (
        (node.connections_running or 0)
        + (node.connections_flow or 0)
        + (node.connections_blocking or 0)
        + (node.connections_blocked or 0)
    )
    channels = (node.channels_running or 0) + (node.channels_flow or 0)
    return connections == sample.connections and channels == sample.channels
