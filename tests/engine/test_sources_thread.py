"""The broker sources on their own thread: the management API is polled there, and every
sample and event comes back to the run's loop, in the order the sources made them; the
thread ends with the run's last call. Served by the fake management API of
test_sources.py (no broker)."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from flowdeck.collectors import Broker as CollectorsBroker
from flowdeck.collectors import BrokerSample, ManagementCollector
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.sources_thread import SourcesThread
from flowdeck.engine.spec import RunSpec
from tests.engine.test_sources import Broker


class ThreadNoting(Broker):
    """The fake management API, noting which thread asked."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.threads.add(threading.current_thread().name)
        return await super().__call__(request)


async def test_polled_on_its_own_thread_with_every_update_back_here_in_order() -> None:
    broker = ThreadNoting()
    here = threading.current_thread()
    taken: list[tuple[threading.Thread, BrokerSample | RunEvent]] = []

    def take(update: BrokerSample | RunEvent) -> None:
        taken.append((threading.current_thread(), update))

    collector = ManagementCollector(
        "http://broker.test:15672",
        username="guest",
        password="secret",
        client=httpx.AsyncClient(transport=httpx.MockTransport(broker), timeout=5.0),
        statistics_interval=0.2,
    )
    sources = SourcesThread(
        RunSpec(publishers=2, consumers=2),
        broker=CollectorsBroker.parse(
            "amqp://guest:secret@localhost:5672/%2F",
            management_url="http://broker.test:15672",
            statistics_interval=0.2,
        ),
        on_sample=take,
        on_event=take,
        on_range=lambda rows: None,
        management=collector,
    )
    await sources.check_capacity()
    thread = sources.thread
    assert thread is not None and thread is not here and thread.is_alive()
    await sources.start()

    async def until(count: int) -> None:
        async with asyncio.timeout(10):
            while sum(isinstance(u, BrokerSample) for _, u in taken) < count:
                await asyncio.sleep(0.05)

    await until(2)
    broker.node["mem_alarm"] = True
    seen = sum(isinstance(u, BrokerSample) for _, u in taken)
    await until(seen + 2)
    await sources.stop()
    await sources.keep_range(0.0, 1.0)

    assert broker.threads == {"flowdeck-broker-sources"}
    assert {t for t, _ in taken} == {here}
    updates = [u for _, u in taken]
    raised = next(
        i
        for i, u in enumerate(updates)
        if isinstance(u, RunEvent) and u.kind is EventKind.ALARM_RAISED
    )
    # the sample that showed the alarm came just before the event it caused
    before = updates[raised - 1]
    assert isinstance(before, BrokerSample) and before.memory_alarm
    assert not any(isinstance(u, BrokerSample) and u.memory_alarm for u in updates[: raised - 1])
    # the thread ended with the run's last call
    assert sources.thread is None and not thread.is_alive()
    assert sources.management_sample is not None and sources.management_sample.memory_alarm


async def test_an_error_on_the_thread_is_raised_here_and_aclose_ends_the_thread() -> None:
    broker = Broker()
    broker.failing = True  # every answer a 500: the pre-flight cannot read the broker
    collector = ManagementCollector(
        "http://broker.test:15672",
        username="guest",
        password="secret",
        client=httpx.AsyncClient(transport=httpx.MockTransport(broker), timeout=5.0),
        statistics_interval=0.2,
    )
    events: list[RunEvent] = []
    sources = SourcesThread(
        RunSpec(publishers=2, consumers=2, queues=1, queue_type="quorum", quorum_size=3),
        broker=CollectorsBroker.parse(
            "amqp://guest:secret@localhost:5672/%2F", management_url="http://broker.test:15672"
        ),
        on_sample=lambda sample: None,
        on_event=events.append,
        on_range=lambda rows: None,
        management=collector,
    )
    with pytest.raises(FlowdeckError, match="replicated queues need the broker's node count"):
        await sources.prepare_queues()
    thread = sources.thread
    assert thread is not None
    await sources.aclose()
    assert sources.thread is None and not thread.is_alive()
