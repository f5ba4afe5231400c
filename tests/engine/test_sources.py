"""The broker sources without a broker: odd management answers a real one cannot be made
to give on cue (an alarm now, a 500 next, a foreign broker's listeners), served by
httpx.MockTransport, and the events the sources make of them."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from flowdeck.collectors import Broker as CollectorsBroker
from flowdeck.collectors import BrokerSample, ManagementCollector
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.sinks import PrometheusRow
from flowdeck.engine.sources import BrokerSources
from flowdeck.engine.spec import RunSpec
from tests.collectors.fake_management import NODES as QUIET_NODES
from tests.collectors.fake_management import OVERVIEW as QUIET_OVERVIEW

OVERVIEW = {
    **QUIET_OVERVIEW,
    "message_stats": {},
    "listeners": [{"protocol": "amqp", "port": 5672}, {"protocol": "http", "port": 15672}],
}
NODE: dict[str, Any] = {**QUIET_NODES[0], "sockets_used": 10, "sockets_total": 100}


class Broker:
    """A management API whose node, listeners and health the test sets."""

    def __init__(self) -> None:
        self.node = copy.deepcopy(NODE)
        self.overview = copy.deepcopy(OVERVIEW)
        self.failing = False
        self.requests = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.failing:
            return httpx.Response(500, json={"error": "internal"})
        path = request.url.path
        if path == "/api/overview":
            return httpx.Response(200, json=self.overview)
        if path == "/api/nodes":
            return httpx.Response(200, json=[self.node])
        if path.startswith("/api/queues/"):
            return httpx.Response(200, json={"items": []})
        if path == "/api/health/checks/alarms":
            if not self.node["mem_alarm"]:
                return httpx.Response(200, json={"status": "ok"})
            alarms = [{"node": self.node["name"], "resource": "memory"}]
            return httpx.Response(503, json={"status": "failed", "alarms": alarms})
        return httpx.Response(200, json=[])


class Taken:
    """What the sources hand the controller, in order."""

    def __init__(self) -> None:
        self.updates: list[BrokerSample | RunEvent] = []
        self.ranges: list[Sequence[PrometheusRow]] = []

    @property
    def events(self) -> list[RunEvent]:
        return [u for u in self.updates if isinstance(u, RunEvent)]

    def messages(self, kind: EventKind) -> list[str]:
        return [e.message for e in self.events if e.kind is kind]


def _sources(
    broker: Broker, taken: Taken, spec: RunSpec | None = None
) -> tuple[BrokerSources, ManagementCollector]:
    client = httpx.AsyncClient(transport=httpx.MockTransport(broker), timeout=5.0)
    collector = ManagementCollector(
        "http://broker.test:15672",
        username="guest",
        password="secret",
        client=client,
        statistics_interval=0.2,
    )
    sources = BrokerSources(
        spec or RunSpec(publishers=2, consumers=2),
        broker=CollectorsBroker.parse(
            "amqp://guest:secret@localhost:5672/%2F",
            management_url="http://broker.test:15672",
            statistics_interval=0.2,
        ),
        on_sample=taken.updates.append,
        on_event=taken.updates.append,
        on_range=taken.ranges.append,
        management=collector,
    )
    return sources, collector


async def test_samples_become_stale_recovered_and_alarm_edges_once_each() -> None:
    broker, taken = Broker(), Taken()
    sources, collector = _sources(broker, taken)
    healthy = await collector.sample()
    sources.on_sample(healthy)
    sources.on_sample(healthy)
    broker.node["mem_alarm"] = True
    alarmed = await collector.sample()
    sources.on_sample(alarmed)
    sources.on_sample(alarmed)
    broker.failing = True
    stale = await collector.sample()
    sources.on_sample(stale)
    sources.on_sample(stale)
    broker.failing = False
    broker.node["mem_alarm"] = False
    recovered = await collector.sample()
    sources.on_sample(recovered)
    await sources.aclose()

    assert [u for u in taken.updates if isinstance(u, BrokerSample)] == [
        healthy,
        healthy,
        alarmed,
        alarmed,
        stale,
        stale,
        recovered,
    ]
    assert [(e.kind, e.message) for e in taken.events] == [
        (EventKind.ALARM_RAISED, "memory alarm raised (from management)"),
        (EventKind.SOURCE_STALE, f"management: {stale.stale_reason}"),
        (EventKind.SOURCE_RECOVERED, "management answers again"),
        (EventKind.ALARM_CLEARED, "memory alarm cleared (from management)"),
    ]
    raised = taken.events[0]
    assert raised.detail == {"alarm": "memory", "source": "management"}
    # The report pairs a stale source with its recovery by the source named in both.
    assert [e.detail for e in taken.events[1:3]] == [{"source": "management"}] * 2
    # The sample comes first, then the event it causes.
    assert taken.updates.index(raised) == taken.updates.index(alarmed) + 1
    assert "secret" not in " ".join(e.message for e in taken.events)
    # A stale sample is not the last fresh figures the capacity warning reads.
    assert sources.management_sample is recovered


async def test_preflight_refuses_a_run_the_broker_has_no_sockets_for() -> None:
    broker, taken = Broker(), Taken()
    broker.node["sockets_used"] = 95
    sources, _ = _sources(broker, taken, RunSpec(publishers=10, consumers=10))
    with pytest.raises(FlowdeckError, match=r"needs 20 connections .* has 5 of 100 sockets free"):
        await sources.check_capacity()
    await sources.aclose()
    [wait] = taken.messages(EventKind.INFO)
    assert wait.startswith("the broker shows 5 of 100 sockets free for the run's 20 connections")


async def test_preflight_skipped_warns_and_the_same_client_then_watches() -> None:
    broker, taken = Broker(), Taken()
    broker.node["sockets_used"] = 95
    sources, _ = _sources(broker, taken, RunSpec(publishers=10, consumers=10))
    await sources.check_capacity(skip=True)
    [warning] = taken.messages(EventKind.INFO)
    assert "opens 20 connections but the broker has 5 of 100 sockets free" in warning
    before = broker.requests
    await sources.start()
    for _ in range(100):
        if any(isinstance(u, BrokerSample) for u in taken.updates):
            break
        await asyncio.sleep(0.05)
    await sources.stop()
    samples = [u for u in taken.updates if isinstance(u, BrokerSample)]
    assert samples and not samples[0].stale
    assert broker.requests > before


async def test_a_management_api_of_another_broker_turns_the_broker_figures_off() -> None:
    broker, taken = Broker(), Taken()
    broker.overview["listeners"] = [{"protocol": "amqp", "port": 5673}]
    sources, _ = _sources(broker, taken)
    await sources.check_capacity()
    [warning] = taken.messages(EventKind.INFO)
    assert "belongs to another broker" in warning and "4 connections unchecked" in warning
    await sources.start()
    [stale] = taken.messages(EventKind.SOURCE_STALE)
    assert "listening for AMQP on 5673, not on 5672" in stale
    assert "--management-url" in stale
    await sources.stop()
    assert not [u for u in taken.updates if isinstance(u, BrokerSample)]


async def test_an_unreadable_socket_limit_refuses_only_a_large_run() -> None:
    broker, taken = Broker(), Taken()
    broker.failing = True
    small, _ = _sources(broker, taken)
    await small.check_capacity()
    [warning] = taken.messages(EventKind.INFO)
    assert warning.startswith("warning: the broker's socket limit was not checked")
    assert "HTTP 500" in warning
    await small.aclose()
    large, _ = _sources(broker, taken, RunSpec(publishers=500, consumers=500))
    with pytest.raises(FlowdeckError, match=r"opens 1000 connections .* --skip-capacity-check"):
        await large.check_capacity()
    await large.aclose()


@pytest.mark.parametrize(
    ("queue_type", "protocol", "streams"),
    [("classic", "amqp0.9.1", False), ("stream", "amqp0.9.1", True), ("stream", "stream", True)],
)
async def test_the_stream_figures_are_polled_only_in_a_run_to_streams(
    queue_type: str, protocol: str, streams: bool
) -> None:
    spec = RunSpec(queue_type=queue_type, protocol=protocol)
    sources = BrokerSources(
        spec,
        broker=CollectorsBroker.parse("amqp://guest:guest@127.0.0.1:5672/%2F"),
        on_sample=lambda sample: None,
        on_event=lambda event: None,
        on_range=lambda rows: None,
    )
    try:
        collector = await sources._management_client()
        assert collector.streams is streams
    finally:
        await sources.aclose()
