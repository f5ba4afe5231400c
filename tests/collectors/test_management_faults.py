"""What a real broker cannot be made to say: garbage, a 500, a hang past the timeout.

Also BrokerWatch's back-off and recovery, driven by the same odd server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine

import httpx
import pytest

from flowdeck.collectors import (
    BrokerSample,
    BrokerWatch,
    ManagementAnswerError,
    ManagementCollector,
    NodeCapacity,
)
from flowdeck.engine import topology
from tests.collectors.fake_management import quiet_answer


class OddServer:
    """A management API that answers well until told to misbehave."""

    def __init__(self) -> None:
        self.mode = "good"
        self.requests = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.mode == "garbage":
            return httpx.Response(
                200, content=b"<html>proxy login</html>", headers={"content-type": "text/html"}
            )
        if self.mode == "500":
            return httpx.Response(500, json={"error": "internal"})
        if self.mode == "hang":
            await asyncio.sleep(30)
        path = request.url.path
        return quiet_answer(path)


def _collector(
    server: Callable[[httpx.Request], Coroutine[None, None, httpx.Response]], timeout: float = 5.0
) -> ManagementCollector:
    client = httpx.AsyncClient(transport=httpx.MockTransport(server), timeout=timeout)
    return ManagementCollector(
        "http://broker.test:15672",
        username="guest",
        password="secret",
        client=client,
        timeout=timeout,
        statistics_interval=0.2,
    )


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("garbage", "management API: answer for /api/overview is not JSON (text/html)"),
        ("500", "management API: 500 internal server error for /api/overview"),
    ],
)
async def test_bad_answer_gives_a_stale_sample_keeping_the_last_figures(
    mode: str, reason: str
) -> None:
    server = OddServer()
    collector = _collector(server)
    good = await collector.sample()
    server.mode = mode
    stale = await collector.sample()
    assert not good.stale and good.publish_rate == 12.5
    assert stale.stale_reason.startswith(reason.split(" for ")[0])
    assert reason.split(" (")[0] in stale.stale_reason or stale.stale_reason == reason
    assert stale.publish_rate == 12.5 and stale.nodes == good.nodes
    assert stale.figures_at == good.figures_at and stale.taken_at > good.taken_at
    assert "secret" not in stale.stale_reason


async def test_a_hang_past_the_timeout_is_stale_not_stuck() -> None:
    server = OddServer()
    server.mode = "hang"
    collector = _collector(server, timeout=0.3)
    sample = await asyncio.wait_for(collector.sample(), 10)
    assert sample.stale_reason == (
        "management API: no answer within 0.3 s from http://broker.test:15672"
    )


async def test_watch_backs_off_while_failing_and_recovers() -> None:
    server = OddServer()
    collector = _collector(server)
    seen: list[BrokerSample] = []
    stop = asyncio.Event()
    watch = BrokerWatch(collector, seen.append, interval=0.1, max_backoff=0.8)
    task = asyncio.create_task(watch.run(stop))
    await asyncio.sleep(0.5)
    healthy_polls = watch.polls
    server.mode = "500"
    await asyncio.sleep(1.5)
    failing_polls = watch.polls - healthy_polls
    server.mode = "good"
    await asyncio.sleep(1.5)
    stop.set()
    await asyncio.wait_for(task, 5)
    # Healthy: a poll each 0.1 s; failing: 0.1, 0.2, 0.4, 0.8, 0.8 ... apart.
    assert healthy_polls / 0.5 > 2 * failing_polls / 1.5
    assert any(s.stale for s in seen) and not seen[-1].stale
    assert watch.failures == 0


async def test_watch_never_overlaps_its_polls() -> None:
    in_flight = 0
    most = 0

    class Slow:
        statistics_interval = 0.01

        async def sample(self) -> BrokerSample:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.05)
            in_flight -= 1
            return BrokerSample(
                source="management", taken_at=0.0, figures_at=0.0, statistics_interval=0.01
            )

    stop = asyncio.Event()
    watch = BrokerWatch(Slow(), lambda s: None, interval=0.01)
    task = asyncio.create_task(watch.run(stop))
    await asyncio.sleep(0.5)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert most == 1 and watch.polls >= 3


class NodesServer:
    """A management API whose ``/api/nodes`` answers are given in turn (the last repeats)."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[float] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/nodes"
        self.requests.append(time.monotonic())
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)


def _sockets(used: int | None, total: int | None, name: str = "rabbit@x") -> dict[str, object]:
    node: dict[str, object] = {"name": name, "running": True}
    if used is not None and total is not None:
        node |= {"sockets_used": used, "sockets_total": total}
    return node


NO_FIGURES_YET = httpx.Response(200, json=[_sockets(None, None)])
FIGURES = httpx.Response(200, json=[_sockets(12, 832)])


async def test_socket_figures_of_a_node_without_its_first_statistics_are_incomplete() -> None:
    figures = await _collector(NodesServer(NO_FIGURES_YET)).socket_figures()
    assert figures.running == 1 and figures.nodes == () and not figures.complete
    figures = await _collector(NodesServer(FIGURES)).socket_figures()
    assert figures.complete and figures.nodes == (NodeCapacity("rabbit@x", 12, 832),)


@pytest.mark.parametrize(
    ("answer", "status", "message"),
    [
        (
            httpx.Response(200, content=b"<html/>", headers={"content-type": "text/html"}),
            None,
            "management API: answer for /api/nodes is not JSON (text/html)",
        ),
        (httpx.Response(200, json={"nodes": []}), None, "/api/nodes is not a list of nodes"),
        (httpx.Response(500, json={}), 500, "management API: 500 internal server error"),
    ],
)
async def test_a_bad_nodes_answer_is_one_line_naming_it(
    answer: httpx.Response, status: int | None, message: str
) -> None:
    with pytest.raises(ManagementAnswerError) as raised:
        await _collector(NodesServer(answer)).socket_figures()
    assert raised.value.status == status and message in str(raised.value)


async def test_listener_ports_are_the_amqp_ones_and_garbage_is_refused() -> None:
    async def overview(request: httpx.Request) -> httpx.Response:
        listeners = [
            {"protocol": "amqp", "port": 5672},
            {"protocol": "amqp/ssl", "port": 5671},
            {"protocol": "http", "port": 15672},
            {"protocol": "amqp", "port": "not a port"},
        ]
        return httpx.Response(200, json={"listeners": listeners})

    assert await _collector(overview).amqp_listener_ports() == {5671, 5672}

    async def no_listeners(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"listeners": "none"})

    with pytest.raises(ManagementAnswerError, match="lists no listeners"):
        await _collector(no_listeners).amqp_listener_ports()


async def test_preflight_reads_a_new_node_again_until_its_figures_arrive() -> None:
    server = NodesServer(NO_FIGURES_YET, NO_FIGURES_YET, FIGURES)
    nodes = await topology.socket_capacity(_collector(server), first_figures_wait=8.0)
    assert nodes == [NodeCapacity("rabbit@x", 12, 832)]
    gaps = [b - a for a, b in zip(server.requests, server.requests[1:], strict=False)]
    assert len(server.requests) == 3 and all(0.4 < gap < 3.0 for gap in gaps), gaps


async def test_preflight_gives_up_on_figures_that_never_arrive_and_keeps_partial_ones() -> None:
    server = NodesServer(NO_FIGURES_YET)
    began = time.monotonic()
    with pytest.raises(topology.CapacityUnknown, match=r"^its nodes list no socket figures yet$"):
        await topology.socket_capacity(_collector(server), first_figures_wait=1.2)
    assert time.monotonic() - began >= 1.2 and 3 <= len(server.requests) <= 6
    two_nodes = httpx.Response(200, json=[_sockets(3, 45, "a@x"), _sockets(None, None, "b@x")])
    nodes = await topology.socket_capacity(
        _collector(NodesServer(two_nodes)),
        first_figures_wait=0.6,
    )
    assert nodes == [NodeCapacity("a@x", 3, 45)]  # one node's figures beat none


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (httpx.Response(401), "it answered HTTP 401"),
        (httpx.Response(503, json={}), "it answered HTTP 503"),
        (httpx.Response(200, json={"a": 1}), "/api/nodes is not a list of nodes"),
    ],
)
async def test_preflight_does_not_read_again_an_answer_that_is_wrong(
    answer: httpx.Response, reason: str
) -> None:
    server = NodesServer(answer)
    with pytest.raises(topology.CapacityUnknown) as unknown:
        await topology.socket_capacity(_collector(server), first_figures_wait=8.0)
    assert unknown.value.reason == reason and len(server.requests) == 1
