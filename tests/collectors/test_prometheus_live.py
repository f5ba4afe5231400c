"""The Prometheus collector against a real Prometheus server scraping a real private node.

The server scrapes the node three ways (``/metrics``, the per-queue families of
``/metrics/detailed``, ``/metrics/per-object``) and at two addresses of the same node
(127.0.0.1 and localhost): the double-counting traps a real set-up has. What the collector
says is compared with the management API of the same node, read at the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator

import aio_pika
import httpx
import pytest

from flowdeck.collectors import (
    BrokerSample,
    LocalBroker,
    ManagementCollector,
    PrometheusCollector,
    PrometheusServer,
)
from tests.collectors.conftest import wait_for

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def prometheus(node: LocalBroker) -> Iterator[PrometheusServer]:
    port = node.prometheus_port
    with PrometheusServer([f"127.0.0.1:{port}", f"localhost:{port}"], per_object=True) as server:
        scraped_s = server.wait_scraped(60)
        print(
            f"\nPrometheus started in {server.started_in:.1f} s, every target scraped "
            f"{scraped_s:.1f} s later"
        )
        yield server


@pytest.fixture
async def collector(prometheus: PrometheusServer) -> AsyncIterator[PrometheusCollector]:
    async with PrometheusCollector(prometheus.url) as collector:
        yield collector


@pytest.fixture
async def management(node: LocalBroker) -> AsyncIterator[ManagementCollector]:
    async with ManagementCollector(
        node.management_url,
        username="guest",
        password="guest",
        statistics_interval=node.stats_interval_ms / 1000,
    ) as management:
        yield management


def _naive_sum(prometheus: PrometheusServer, metric: str) -> float:
    """What a plain ``sum(metric)`` over every job and address says."""
    answer = httpx.get(
        f"{prometheus.url}/api/v1/query", params={"query": f"sum({metric})"}, timeout=5
    ).json()
    return float(answer["data"]["result"][0]["value"][1])


class HeldMessages:
    """A queue with ``published`` messages, ``prefetch`` of them delivered and not acked."""

    def __init__(self, uri: str, queue: str, published: int, prefetch: int) -> None:
        self.uri, self.queue, self.published, self.prefetch = uri, queue, published, prefetch
        self.connections: list[aio_pika.abc.AbstractConnection] = []

    async def __aenter__(self) -> HeldMessages:
        publisher = await aio_pika.connect(self.uri)
        self.connections.append(publisher)
        channel = await publisher.channel(publisher_confirms=True)
        await channel.declare_queue(self.queue, durable=False)
        for _ in range(self.published):
            await channel.default_exchange.publish(aio_pika.Message(b"x" * 64), self.queue)
        consumer = await aio_pika.connect(self.uri)
        self.connections.append(consumer)
        consuming = await consumer.channel()
        await consuming.set_qos(prefetch_count=self.prefetch)
        queue = await consuming.get_queue(self.queue)
        self.held: list[aio_pika.abc.AbstractIncomingMessage] = []

        async def hold(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            self.held.append(message)  # never acked: stays unacked at the broker

        await queue.consume(hold, no_ack=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            channel = await self.connections[0].channel()
            await channel.queue_delete(self.queue)
        for connection in reversed(self.connections):
            with contextlib.suppress(Exception):
                await connection.close()


def _settled(sample: BrokerSample, ready: int, unacked: int) -> bool:
    return (
        not sample.stale
        and sample.queue_ready == ready
        and sample.queue_unacked == unacked
        and sample.unacked == unacked
    )


async def test_check_names_the_job_it_reads_and_the_others(
    node: LocalBroker, collector: PrometheusCollector
) -> None:
    line = await collector.check()
    print(f"\n{line}")
    assert "job 'rabbitmq'" in line  # the one with the alarm gauges
    assert "'rabbitmq-per-object'" in line and "give --job" in line
    assert line.count(node.nodename) == 1  # scraped at two addresses, one node
    assert "scraped every 1 s" in line
    assert collector.statistics_interval == 1.0


async def test_figures_equal_the_management_api(
    node: LocalBroker,
    prometheus: PrometheusServer,
    collector: PrometheusCollector,
    management: ManagementCollector,
    queue_name: str,
) -> None:
    published, prefetch = 300, 40
    collector.set_queue_names([queue_name])
    management.set_queue_names([queue_name])
    async with HeldMessages(node.uri, queue_name, published, prefetch):

        async def management_settled() -> BrokerSample | None:
            sample = await management.sample()
            return sample if _settled(sample, published - prefetch, prefetch) else None

        async def prometheus_settled() -> BrokerSample | None:
            sample = await collector.sample()
            return sample if _settled(sample, published - prefetch, prefetch) else None

        (mgmt, mgmt_s), (prom, prom_s) = await asyncio.gather(
            wait_for(management_settled, limit=60), wait_for(prometheus_settled, limit=60)
        )
        assert mgmt is not None, "the management API never showed the held messages"
        assert prom is not None, "Prometheus never showed the held messages"
        # Both now, side by side.
        mgmt, prom = await asyncio.gather(management.sample(), collector.sample())
        naive_connections = _naive_sum(prometheus, "rabbitmq_connections")
        naive_ready = _naive_sum(
            prometheus,
            f'{{__name__=~"rabbitmq_(detailed_)?queue_messages_ready", queue="{queue_name}"}}',
        )
    interval = node.stats_interval_ms / 1000 + prometheus.scrape_interval
    print(
        f"\nheld {published} messages, {prefetch} unacked: management API showed them after "
        f"{mgmt_s:.1f} s, Prometheus after {prom_s:.1f} s (statistics {node.stats_interval_ms} "
        f"ms + scrape {prometheus.scrape_interval:g} s); figures {prom.age:.1f} s old; naive "
        f"sums over every job and address: connections {naive_connections:g}, ready "
        f"{naive_ready:g}"
    )
    assert prom.source == "prometheus" and mgmt.source == "management"
    (queue,) = prom.queues
    assert (queue.name, queue.ready, queue.unacked, queue.consumers) == (
        queue_name,
        published - prefetch,
        prefetch,
        1,
    )
    assert (prom.queue_ready, prom.queue_unacked) == (mgmt.queue_ready, mgmt.queue_unacked)
    assert prom.queues[0].consumers == mgmt.queues[0].consumers
    assert prom.unacked == mgmt.unacked == prefetch
    assert prom.unconfirmed == mgmt.unconfirmed == 0
    assert prom.connections == mgmt.connections == 2
    # The same broker read through three jobs at two addresses counts once.
    assert naive_connections == 4 * prom.connections
    assert naive_ready == 4 * queue.ready
    (pnode,), (mnode,) = prom.nodes, mgmt.nodes
    assert pnode.name == mnode.name == node.nodename
    assert pnode.mem_limit == mnode.mem_limit
    assert pnode.disk_free_limit == mnode.disk_free_limit
    assert pnode.fd_total == mnode.fd_total
    assert pnode.mem_used is not None and mnode.mem_used is not None
    assert pnode.mem_used == pytest.approx(mnode.mem_used, rel=0.25)
    assert pnode.disk_free == pytest.approx(mnode.disk_free, rel=0.05)
    assert prom.broker_version == mgmt.broker_version
    # Figures are as old as the last scrape at most, which is what the sample says.
    assert prom.age <= 2 * interval + prom_s
    assert prom_s <= mgmt_s + 5 * interval


async def test_memory_and_disk_alarms_show_in_both_and_clear(
    node: LocalBroker, collector: PrometheusCollector, management: ManagementCollector
) -> None:
    async def both_say(state: bool) -> bool:
        mgmt, prom = await asyncio.gather(management.sample_alarms(), collector.sample())
        return not prom.stale and all(
            sample.memory_alarm is state and sample.disk_alarm is state for sample in (mgmt, prom)
        )

    async def prometheus_has(flag: str) -> bool:
        return bool(getattr(await collector.sample(), flag))

    assert await both_say(False)
    try:
        await asyncio.to_thread(node.set_memory_watermark, 0.000001)
        await asyncio.to_thread(node.set_disk_free_limit, 10**15)
        memory, memory_s = await wait_for(lambda: prometheus_has("memory_alarm"))
        disk, disk_s = await wait_for(lambda: prometheus_has("disk_alarm"))
        raised, _ = await wait_for(lambda: both_say(True))
    finally:
        await asyncio.to_thread(node.set_memory_watermark, 0.4)
        await asyncio.to_thread(node.set_disk_free_limit, "50MB")
    cleared, clear_s = await wait_for(lambda: both_say(False))
    print(
        f"\nalarms in a Prometheus sample: memory {memory_s:.1f} s, then disk {disk_s:.1f} s "
        f"after rabbitmqctl returned; cleared in both {clear_s:.1f} s after the limits were "
        "restored"
    )
    assert memory and disk, "Prometheus never showed the alarms"
    assert raised, "the management API and Prometheus never agreed on the alarms"
    assert cleared, "the alarms never cleared in both"


async def test_an_explicit_job_is_read_alone(
    node: LocalBroker, prometheus: PrometheusServer, management: ManagementCollector
) -> None:
    connection = await aio_pika.connect(node.uri)
    try:
        async with PrometheusCollector(prometheus.url, job="rabbitmq-per-object") as per_object:

            async def one_connection() -> BrokerSample | None:
                sample = await per_object.sample()
                return sample if sample.connections == 1 else None

            sample, _ = await wait_for(one_connection)
            line = await per_object.check()
    finally:
        await connection.close()
    assert sample is not None and not sample.stale, "the per-object job never showed 1"
    assert "also scraped" not in line and "job 'rabbitmq-per-object'" in line
    (only,) = sample.nodes
    assert only.mem_used is not None and only.fd_total is not None


async def test_range_query_returns_the_run_window(
    node: LocalBroker,
    prometheus: PrometheusServer,
    collector: PrometheusCollector,
    queue_name: str,
) -> None:
    collector.set_queue_names([queue_name])
    start = time.time()
    async with HeldMessages(node.uri, queue_name, 120, 20):

        async def settled() -> bool:
            return _settled(await collector.sample(), 100, 20)

        assert (await wait_for(settled, limit=60))[0]
        await asyncio.sleep(2 * prometheus.scrape_interval)
        end = time.time()
        rows = await collector.range_query(start, end, step=1.0)
    metrics = {metric for _, metric, _, _ in rows}
    print(f"\n{len(rows)} rows over {end - start:.1f} s: {len(metrics)} series names")
    assert all(start - 1 <= at <= end + 1 for at, *_ in rows)
    assert all(isinstance(json.loads(labels), dict) for _, _, labels, _ in rows)
    ready = [
        (at, value)
        for at, metric, labels, value in rows
        if metric.endswith("queue_messages_ready") and json.loads(labels)["queue"] == queue_name
    ]
    assert ready and max(ready)[1] == 100  # the latest point, once, not per job
    assert len({at for at, _ in ready}) == len(ready)
    received = [
        v for _, m, _, v in rows if m == "rate(rabbitmq_global_messages_received_total[5s])"
    ]
    assert received and max(received) > 0
    memory = [
        json.loads(labels)
        for _, metric, labels, _ in rows
        if metric == "rabbitmq_process_resident_memory_bytes"
    ]
    assert memory and {(m["job"], m["instance"]) for m in memory} == {
        ("rabbitmq", f"127.0.0.1:{node.prometheus_port}")
    }
    assert "rabbitmq_alarms_memory_used_watermark" in metrics


async def test_a_stopped_scrape_target_is_a_stale_sample_with_the_reason(
    prometheus: PrometheusServer,
) -> None:
    async with PrometheusCollector(prometheus.url, job="rabbitmq", instance="127.0.0.1:1") as gone:
        sample = await gone.sample()
    assert sample.stale
    assert "has no rabbitmq_* series for job 'rabbitmq' and instance '127.0.0.1:1'" in (
        sample.stale_reason
    )
    assert "is it scraping the broker's :15692?" in sample.stale_reason


async def test_a_prometheus_that_goes_away_keeps_the_last_figures_and_says_why(
    node: LocalBroker,
) -> None:
    server = PrometheusServer([f"127.0.0.1:{node.prometheus_port}"], per_queue=False)
    with server:
        await asyncio.to_thread(server.wait_scraped, 60)
        async with PrometheusCollector(server.url) as collector:
            good = await collector.sample()
            await asyncio.to_thread(server.stop)
            gone = await collector.sample()
    assert not good.stale and good.nodes
    assert gone.stale and gone.stale_reason == (
        f"Prometheus: cannot connect to {server.url} (connection refused)"
    )
    assert gone.nodes == good.nodes and gone.figures_at == good.figures_at
    assert gone.taken_at > good.taken_at
    assert not server.base_dir.exists()  # its TSDB went with it
