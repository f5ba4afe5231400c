"""The lean AMQP client against a real broker: every case a broker produces."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aio_pika
import pytest

from flowdeck.engine.amqp import AmqpClosed, Connection, NullListener, connect
from flowdeck.engine.consumer import Consumer, ConsumerTally
from flowdeck.engine.errors import BrokerUnavailable
from flowdeck.engine.publisher import Publisher
from flowdeck.engine.samples import LatencySamples

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]


@pytest.fixture
async def declare(shared_uri: str) -> AsyncIterator[Callable[..., Any]]:
    """Declare queues on the shared broker for one test; delete them afterwards."""
    connection = await aio_pika.connect(shared_uri)
    channel = await connection.channel()
    names: list[str] = []

    async def make(name: str, **arguments: Any) -> str:
        await channel.declare_queue(name, durable=True, arguments=arguments or None)
        names.append(name)
        return name

    yield make
    for name in names:
        await channel.queue_delete(name)
    await connection.close()


async def start_publisher(
    uri: str, queue: str, *, exchange: str = "", confirms: bool = True, **options: Any
) -> Publisher:
    connection = await connect(uri, f"test publisher {queue}")
    channel = await connection.channel()
    if confirms:
        await channel.confirm_select()
    settings: dict[str, Any] = {
        "message_size": 1000,
        "persistent": False,
        "mandatory": False,
        "inflight": 100,
        "rate": 0.0,
    }
    settings.update(options)
    return Publisher(
        publisher_id=7,
        connection=connection,
        channel=channel,
        exchange=exchange,
        routing_key=queue,
        confirms=confirms,
        first_sequence=0,
        confirm_latency=LatencySamples(),
        **settings,
    )


async def start_consumer(
    uri: str, queue: str, *, prefetch: int = 100, ack_every: int = 1
) -> tuple[Consumer, ConsumerTally]:
    connection = await connect(uri, f"test consumer {queue}")
    tally = ConsumerTally({})
    consumer = Consumer(
        consumer_id=1,
        connection=connection,
        queue=queue,
        prefetch=prefetch,
        ack_every=ack_every,
        auto_ack=False,
        arguments=None,
        tally=tally,
        latency=LatencySamples(),
        run_start_ns=0,
    )
    await consumer.start()
    return consumer, tally


async def until(condition: Callable[[], bool], limit: float = 30.0) -> bool:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def publish_count(publisher: Publisher, count: int) -> None:
    """Publish exactly ``count`` messages (window permitting) and stop: the publisher's
    sends are cut at ``count`` and it stops in the send that reaches it, before a confirm
    can open its window again (it sends nothing before ``start()``)."""
    send = publisher._send

    def up_to_count(batch: int, now: int) -> None:
        batch = min(batch, count - publisher.published)
        if batch > 0:
            send(batch, now)
        if publisher.published >= count:
            publisher.stop()

    publisher._send = up_to_count  # type: ignore[method-assign]
    publisher.set_inflight(count)
    publisher.start()
    assert await until(lambda: publisher.stopped)
    assert publisher.published == count


# -- connecting ------------------------------------------------------------------------


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_refused_connection_says_so() -> None:
    with pytest.raises(BrokerUnavailable, match="connection refused"):
        await connect(f"amqp://guest:guest@127.0.0.1:{unused_port()}/", "test")


async def test_wrong_password_says_authentication() -> None:
    with pytest.raises(BrokerUnavailable, match=r"refused user 'guest'.*password"):
        await connect("amqp://guest:wrong@127.0.0.1:5672/%2F", "test")


async def test_missing_vhost_says_vhost() -> None:
    with pytest.raises(BrokerUnavailable, match="vhost 'no-such-vhost'"):
        await connect("amqp://guest:guest@127.0.0.1:5672/no-such-vhost", "test")


async def test_silent_server_times_out() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(BrokerUnavailable, match=r"no answer .* within 0.5 s"):
            await connect(f"amqp://127.0.0.1:{port}/?connection_timeout=500", "test")
    finally:
        server.close()


# -- publishing and consuming ----------------------------------------------------------


async def test_connections_send_without_nagle(shared_uri: str) -> None:
    """A small frame goes out at once, not held for the broker's delayed ack (Nagle's
    algorithm would add up to tens of ms at low rates): the loop sets TCP_NODELAY, as
    PerfTest's client does."""
    connection = await connect(shared_uri, "test nodelay")
    try:
        assert connection.transport is not None
        sock = connection.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        await connection.close()


async def test_confirms_and_acks_every_n_with_last_partial_batch(
    shared_uri: str, declare: Callable[..., Any], unique_name: str
) -> None:
    queue = await declare(unique_name)
    consumer, tally = await start_consumer(shared_uri, queue, prefetch=100, ack_every=7)
    publisher = await start_publisher(shared_uri, queue)
    await publish_count(publisher, 1003)
    assert await publisher.wait_confirms(20)
    assert await until(lambda: tally.consumed == 1003)
    # 1003 = 143 * 7 + 2: two deliveries wait for the final flush.
    assert consumer.unacked == 2
    consumer.flush()
    await consumer.stop()
    assert publisher.confirmed == 1003 and publisher.nacked == 0
    assert tally.acked == 1003 and tally.duplicates == 0
    assert tally.sequences[7].ranges == ((0, 1003),)
    # Nothing left in the queue and, the channel being closed, nothing requeued.
    channel = await consumer.connection.channel()
    assert await channel.queue_message_count(queue) == 0
    await consumer.connection.close()
    await publisher.connection.close()


@pytest.mark.parametrize(("size", "frame_max"), [(200_000, 131_072), (10_000, 4096), (28, 4096)])
async def test_bodies_spanning_frames(
    shared_uri: str, declare: Callable[..., Any], unique_name: str, size: int, frame_max: int
) -> None:
    queue = await declare(unique_name)
    uri = f"{shared_uri}?frame_max={frame_max}"
    consumer, tally = await start_consumer(uri, queue, prefetch=50, ack_every=10)
    publisher = await start_publisher(uri, queue, message_size=size)
    assert publisher.connection.frame_max == frame_max
    await publish_count(publisher, 300)
    assert await publisher.wait_confirms(30)
    assert await until(lambda: tally.consumed == 300)
    consumer.flush()
    assert tally.sequences[7].ranges == ((0, 300),)
    assert tally.foreign == 0 and tally.duplicates == 0
    await consumer.stop()
    await consumer.connection.close()
    await publisher.connection.close()


async def test_mandatory_publish_to_nowhere_is_returned(shared_uri: str) -> None:
    publisher = await start_publisher(shared_uri, "flowdeck-test-no-such-queue", mandatory=True)
    await publish_count(publisher, 20)
    assert await publisher.wait_confirms(10)
    assert await until(lambda: publisher.returned == 20)
    # The broker confirms returned messages, but they are routed nowhere: not consumable.
    confirmed, nacked = publisher.report_ranges()
    assert publisher.confirmed == 20
    assert confirmed.ranges == () and nacked.ranges == ()
    assert publisher.returned_sequences.ranges == ((0, 20),)
    await publisher.connection.close()


async def test_reject_publish_overflow_is_nacked(
    shared_uri: str, declare: Callable[..., Any], unique_name: str
) -> None:
    queue = await declare(unique_name, **{"x-max-length": 10, "x-overflow": "reject-publish"})
    publisher = await start_publisher(shared_uri, queue)
    await publish_count(publisher, 50)
    assert await publisher.wait_confirms(10)
    assert (publisher.confirmed, publisher.nacked) == (10, 40)
    confirmed, nacked = publisher.report_ranges()
    assert confirmed.count() == 10 and nacked.count() == 40
    assert publisher.pending_confirms == 0
    await publisher.connection.close()


async def test_quorum_queue_confirms(
    shared_uri: str, declare: Callable[..., Any], unique_name: str
) -> None:
    queue = await declare(unique_name, **{"x-queue-type": "quorum"})
    consumer, tally = await start_consumer(shared_uri, queue, prefetch=200, ack_every=50)
    publisher = await start_publisher(shared_uri, queue, inflight=200, persistent=True)
    await publish_count(publisher, 2000)
    assert await publisher.wait_confirms(30)
    assert await until(lambda: tally.consumed == 2000)
    consumer.flush()
    assert publisher.confirmed == 2000
    assert tally.sequences[7].ranges == ((0, 2000),)
    await consumer.stop()
    await consumer.connection.close()
    await publisher.connection.close()


# -- connection and channel life -------------------------------------------------------


async def test_channel_closed_by_broker_carries_the_reason(shared_uri: str) -> None:
    connection = await connect(shared_uri, "test channel close")
    channel = await connection.channel()
    with pytest.raises(AmqpClosed, match="404 NOT_FOUND") as caught:
        await channel.consume("flowdeck-test-no-such-queue")
    assert caught.value.reply_code == 404
    # The connection survives a channel error.
    other = await connection.channel()
    assert other.is_open
    await connection.close("test done")
    assert connection.closed_reason is not None
    assert "test done" in str(connection.closed_reason)


async def test_heartbeats_keep_an_idle_connection_open(shared_uri: str) -> None:
    connection = await connect(f"{shared_uri}?heartbeat=1", "test heartbeat")
    assert connection.heartbeat == 1
    await asyncio.sleep(4.5)  # the broker closes a silent client after two intervals
    assert connection.is_open
    channel = await connection.channel()
    assert channel.is_open
    await connection.close()


async def test_back_pressure_pauses_and_resumes_publishing(
    shared_uri: str, declare: Callable[..., Any], unique_name: str
) -> None:
    queue = await declare(unique_name)
    consumer, tally = await start_consumer(shared_uri, queue, prefetch=500, ack_every=100)
    publisher = await start_publisher(
        shared_uri, queue, confirms=False, message_size=100_000, inflight=0
    )
    pauses = 0
    original = Connection.pause_writing

    def counting_pause(self: Connection) -> None:
        nonlocal pauses
        pauses += 1
        original(self)

    publisher.connection.pause_writing = counting_pause.__get__(publisher.connection)  # type: ignore[method-assign]
    publisher.start()
    await asyncio.sleep(1.5)
    publisher.stop()
    sent = publisher.published
    assert pauses >= 1, "100 kB messages as fast as possible must fill the socket"
    assert sent > 0
    assert await until(lambda: tally.consumed == sent, limit=60)
    consumer.flush()
    assert tally.sequences[7].ranges == ((0, sent),)
    await consumer.stop()
    await consumer.connection.close()
    await publisher.connection.close()


# -- out-of-order confirms (the broker decides the order; a fake connection records) ---


class RecordingConnection:
    """Just enough of a Connection for a Publisher whose confirms the test plays."""

    frame_max = 131_072
    writing_paused = False
    blocked_reason: str | None = None

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.writes: list[bytes] = []

    def write(self, data: bytes | bytearray) -> None:
        self.writes.append(bytes(data))

    def when_writable(self, callback: Callable[[], None]) -> None:
        raise AssertionError("not paused")


class RecordingChannel:
    id = 1
    listener: Any = NullListener()


async def test_out_of_order_single_and_multiple_confirms() -> None:
    samples = LatencySamples()
    publisher = Publisher(
        publisher_id=3,
        connection=RecordingConnection(),  # type: ignore[arg-type]
        channel=RecordingChannel(),  # type: ignore[arg-type]
        exchange="",
        routing_key="q",
        message_size=100,
        persistent=False,
        mandatory=False,
        confirms=True,
        inflight=10,
        rate=0.0,
        first_sequence=100,
        confirm_latency=samples,
    )
    publisher.start()
    assert publisher.published == 10 and publisher.pending_confirms == 10
    for tag, multiple, acked in [
        (3, False, True),
        (1, False, True),
        (5, False, False),
        (2, False, True),
        (3, False, True),  # repeated: ignored
        (8, True, True),  # 4, 6, 7, 8 (5 was nacked)
        (10, False, True),
        (9, False, True),
    ]:
        (publisher.on_ack if acked else publisher.on_nack)(tag, multiple)
    assert (publisher.confirmed, publisher.nacked, publisher.pending_confirms) == (9, 1, 0)
    confirmed, nacked = publisher.report_ranges()
    assert confirmed.ranges == ((100, 104), (105, 110))
    assert nacked.ranges == ((104, 105),)
    assert len(samples.actual) == len(samples.intended) == 9
    publisher.stop()


def test_works_on_uvloop(shared_uri: str, unique_name: str) -> None:
    """The worker host may pick uvloop: publish, confirm and consume there too."""
    import uvloop

    async def scenario() -> tuple[int, int]:
        admin = await aio_pika.connect(shared_uri)
        admin_channel = await admin.channel()
        await admin_channel.declare_queue(unique_name, durable=True)
        try:
            consumer, tally = await start_consumer(shared_uri, unique_name, ack_every=10)
            publisher = await start_publisher(shared_uri, unique_name)
            await publish_count(publisher, 500)
            assert await publisher.wait_confirms(20)
            assert await until(lambda: tally.consumed == 500)
            await consumer.stop()
            await consumer.connection.close()
            await publisher.connection.close()
            return publisher.confirmed, tally.consumed
        finally:
            await admin_channel.queue_delete(unique_name)
            await admin.close()

    assert uvloop.run(scenario()) == (500, 500)


async def test_a_new_window_does_not_inherit_the_old_one_s_debt() -> None:
    """A sweep's step at in-flight 20 held 2 publishers to 2,750 of their 4,000 msg/s for
    45 s (the seed redo); the steps after it sent that debt on top of the target (5,299
    and 4,843 msg/s, judged as catching up). A new window starts the schedule afresh."""
    publisher = Publisher(
        publisher_id=3,
        connection=RecordingConnection(),  # type: ignore[arg-type]
        channel=RecordingChannel(),  # type: ignore[arg-type]
        exchange="",
        routing_key="q",
        message_size=100,
        persistent=False,
        mandatory=False,
        confirms=True,
        inflight=10,
        rate=1000.0,
        first_sequence=0,
        confirm_latency=LatencySamples(),
    )
    publisher.start()
    # the window held it for the schedule's last second: 1,000 messages owed
    publisher.pacer.restart(time.time_ns() - 1_000_000_000)
    assert publisher.pacer.due(time.time_ns()) >= 990
    published = publisher.published
    publisher.set_inflight(2000)
    assert publisher.published - published <= 2
    assert publisher.pacer.due(time.time_ns()) <= 1
    publisher.stop()
