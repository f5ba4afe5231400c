"""Message and consumer priorities: what a spec may ask for on which queue type, how a
PerfTest line sets them, how each message's priority is put on the wire, and, against the
real broker, that a classic queue with x-max-priority hands out the high-priority backlog
first and that a consumer of higher priority takes the deliveries while it has room."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import aio_pika
import httpx
import pytest
from pamqp import frame, header

from flowdeck.cli.run import clients_line
from flowdeck.collectors import Broker
from flowdeck.engine.amqp.frames import publish_template
from flowdeck.engine.controller import Controller
from flowdeck.engine.errors import SpecError
from flowdeck.engine.perftest import spec_from_perftest
from flowdeck.engine.publisher import Publisher, is_marked
from flowdeck.engine.spec import RunSpec, consumer_priorities
from flowdeck.engine.topology import queue_arguments
from tests.engine.test_worker import base_spec


def test_a_classic_queue_keeps_priorities_and_messages_and_consumers_carry_them() -> None:
    spec = RunSpec(
        max_priority=10,
        message_priority=9,
        priority_distribution="share",
        priority_share=20,
        consumer_priority="10, 0",
    )
    assert queue_arguments(spec)["x-max-priority"] == 10
    assert consumer_priorities(spec.consumer_priority) == (10, 0)
    assert consumer_priorities("") == ()
    line = clients_line(spec)
    assert "queues keep priorities 0..10" in line
    assert "message priority 9 for 20 %, 0 for the rest" in line
    assert "consumer priority 10,0" in line
    assert spec.redacted()["message_priority"] == 9  # recorded with the spec


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"queue_type": "quorum", "message_priority": 5}, "message priorities apply to classic"),
        ({"queue_type": "quorum", "max_priority": 5}, "quorum queues on RabbitMQ 3.10 deliver"),
        (
            {"queue_type": "quorum", "queue_args": {"x-max-priority": 5}},
            "set queue_type = classic or drop max_priority",
        ),
        (
            {"queue_type": "stream", "prefetch": 10, "message_priority": 5},
            "stream queues on RabbitMQ 3.10",
        ),
        (
            {"queue_type": "stream", "prefetch": 10, "consumer_priority": "5"},
            "every stream consumer reads every message",
        ),
        ({"max_priority": 5, "queue_args": {"x-max-priority": 5}}, "drop x-max-priority"),
        ({"max_priority": 5, "message_priority": 9}, "over the queues' max priority (5)"),
        ({"priority_distribution": "uniform"}, "set message_priority above 0"),
        ({"message_priority": 5, "priority_share": 10}, "set priority_distribution = share"),
        ({"consumer_priority": "high"}, "consumer_priority must be a whole number"),
        ({"consumer_priority": str(2**31)}, "a signed 32-bit x-priority"),
        ({"protocol": "amqp1.0", "message_priority": 5}, "AMQP 0.9.1 clients"),
    ],
)
def test_priorities_a_queue_type_cannot_keep_are_refused_in_one_line(
    fields: dict[str, Any], says: str
) -> None:
    with pytest.raises(SpecError) as caught:
        RunSpec(**fields)
    assert says in caught.value.message and "\n" not in caught.value.message


def test_a_quorum_queue_takes_consumer_priorities() -> None:
    assert RunSpec(queue_type="quorum", consumer_priority="3").consumer_priority == "3"


def test_perftest_priority_options_map_onto_the_settings() -> None:
    spec = spec_from_perftest("-x 1 -y 2 -qa x-max-priority=10 -mp priority=7 -ca x-priority=5")
    assert (spec.max_priority, spec.message_priority, spec.consumer_priority) == (10, 7, "5")
    assert "x-max-priority" not in spec.queue_args
    with pytest.raises(SpecError) as caught:
        spec_from_perftest("-mp priority=2,contentType=text/plain -ca x-priority=1,x-other=2")
    message = caught.value.message
    assert "-mp contentType (flowdeck sets only the priority property)" in message
    assert "-ca x-other (flowdeck sets only the x-priority consumer argument)" in message
    with pytest.raises(SpecError, match="message priorities apply to classic"):
        spec_from_perftest("-qq -mp priority=2")


def _priority_of(frames: bytes, method_size: int) -> int | None:
    content = frame.unmarshal(frames[method_size:])[2]
    assert isinstance(content, header.ContentHeader)
    value = content.properties.priority
    return None if value is None else int(value)


def test_the_template_carries_the_priority_where_the_publisher_patches_it() -> None:
    common: dict[str, Any] = {
        "channel": 1,
        "exchange": "",
        "routing_key": "q",
        "mandatory": False,
        "persistent": True,
        "publisher_id": 3,
        "message_size": 100,
        "frame_max": 131_072,
    }
    plain = publish_template(**common)
    assert plain.priority_offset == -1
    method_size = plain.frames.index(bytes([2, 0, 1]))  # the content header frame's start
    assert _priority_of(plain.frames, method_size) is None
    marked = publish_template(**common, priority=0)
    frames = bytearray(marked.frames)
    frames[marked.priority_offset] = 7
    assert _priority_of(bytes(frames), method_size) == 7


def test_the_share_at_high_priority_is_exact_over_any_run_of_messages() -> None:
    marked = [s for s in range(1000) if is_marked(s, 0.2)]
    assert len(marked) == 200
    assert all(sum(is_marked(s, 0.2) for s in range(a, a + 50)) in (10, 11) for a in range(900))


def _drop_queue(uri: str, name: str) -> None:
    async def drop() -> None:
        connection = await aio_pika.connect(uri)
        async with connection:
            channel = await connection.channel()
            await channel.queue_delete(name)

    asyncio.run(drop())


@pytest.mark.broker
@pytest.mark.timeout(120)
def test_a_backlog_comes_out_high_priority_first(shared_uri: str, unique_name: str) -> None:
    """3 s of publishing at 300 msg/s, a fifth at priority 9, into a classic queue with
    x-max-priority 10 and no consumer; then the backlog is read: every priority-9 message
    comes before every priority-0 one, and they are the publisher's marked sequences."""
    spec = base_spec(
        unique_name,
        shared_uri,
        publishers=1,
        consumers=0,
        rate=300.0,
        duration=3,
        max_priority=10,
        message_priority=9,
        priority_distribution="share",
        priority_share=20,
    )

    async def publish_then_read() -> tuple[int, list[tuple[int, int]]]:
        controller = Controller(spec, broker=Broker.parse(spec.uri), drain_seconds=0)
        await controller.start()
        await asyncio.sleep(spec.duration)
        await controller.stop("the backlog is published")
        summary = controller.summary
        assert summary is not None
        read: list[tuple[int, int]] = []
        connection = await aio_pika.connect(shared_uri)
        async with connection:
            channel = await connection.channel()
            queue = await channel.get_queue(spec.queue_name(0))
            while (message := await queue.get(no_ack=True, fail=False)) is not None:
                sequence = int.from_bytes(message.body[4:12], "big")
                read.append((int(message.priority or 0), sequence))
        return summary.safety.confirmed, read

    try:
        confirmed, read = asyncio.run(publish_then_read())
    finally:
        _drop_queue(shared_uri, spec.queue_name(0))
    priorities = [priority for priority, _ in read]
    high = priorities.count(9)
    print(f"\nread {len(read)} of {confirmed} confirmed: {high} at priority 9 first")
    assert len(read) == confirmed > 500
    assert set(priorities) == {9, 0}
    assert priorities == sorted(priorities, reverse=True), "a priority-0 message came first"
    assert all(is_marked(sequence, 0.2) == (priority == 9) for priority, sequence in read)
    assert abs(high - len(read) / 5) <= 1


def _consumers_of(management_url: str, queue: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=management_url, auth=("guest", "guest"), timeout=10) as api:
        consumers = api.get("/api/consumers/%2F").json()
        out = []
        for consumer in consumers:
            details = consumer.get("channel_details")
            # (the API gives [] for the details of a channel being closed)
            if consumer.get("queue", {}).get("name") != queue or not isinstance(details, dict):
                continue
            name = details["name"]
            channel = api.get(f"/api/channels/{quote(name, safe='')}").json()
            stats = channel.get("message_stats", {}) if isinstance(channel, dict) else {}
            out.append(
                {
                    "x-priority": consumer.get("arguments", {}).get("x-priority"),
                    "delivered": int(stats.get("deliver_get", 0)),
                }
            )
        return out


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_the_higher_priority_consumer_takes_the_deliveries_while_it_has_room(
    shared_uri: str, unique_name: str, management_url: str
) -> None:
    """Two consumers, x-priority 10 and 0, prefetch 100, 100 msg/s that the first keeps up
    with: the broker's own channel statistics show every delivery went to the first."""
    spec = base_spec(
        unique_name,
        shared_uri,
        publishers=1,
        consumers=2,
        consumer_priority="10,0",
        prefetch=100,
        rate=100.0,
        duration=10,
    )
    seen: list[dict[str, Any]] = []

    async def run_and_look() -> None:
        controller = Controller(spec, broker=Broker.parse(spec.uri), drain_seconds=1)
        await controller.start()
        deadline = time.monotonic() + spec.duration - 1
        while time.monotonic() < deadline:
            await asyncio.sleep(1)
            seen[:] = await asyncio.to_thread(_consumers_of, management_url, spec.queue_name(0))
            if len(seen) == 2 and max(c["delivered"] for c in seen) >= 200:
                break
        await controller.stop("the test has seen the consumers")

    asyncio.run(run_and_look())
    print(f"\nconsumers (management API): {seen}")
    by_priority = {c["x-priority"]: c["delivered"] for c in seen}
    assert set(by_priority) == {10, 0}, seen
    assert by_priority[10] >= 200 and by_priority[0] == 0, seen


def test_a_batch_gets_each_messages_priority_drawn_as_the_distribution_says() -> None:
    template = publish_template(
        channel=1,
        exchange="",
        routing_key="q",
        mandatory=False,
        persistent=False,
        publisher_id=0,
        message_size=64,
        frame_max=131_072,
        priority=0,
    )

    def drawn(distribution: str, share: float = 0.0) -> list[int]:
        publisher = SimpleNamespace(
            _template=template,
            priority=9,
            priority_distribution=distribution,
            priority_share=share,
        )
        batch = bytearray(template.frames) * 1000
        Publisher._draw_priorities(publisher, batch, 0, 1000)  # type: ignore[arg-type]
        at, size = template.priority_offset, template.size
        return [batch[at + i * size] for i in range(1000)]

    uniform = drawn("uniform")
    assert set(uniform) == set(range(10))  # 0..9, every value drawn
    share = drawn("share", 0.2)
    assert share.count(9) == 200 and share.count(0) == 800
    assert [p == 9 for p in share] == [is_marked(s, 0.2) for s in range(1000)]
