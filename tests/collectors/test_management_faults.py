"""What a real broker cannot be made to say: garbage, a 500, a hang past the timeout.

Also BrokerWatch's back-off and recovery, driven by the same odd server.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from collectors import BrokerSample, BrokerWatch, ManagementCollector

OVERVIEW = {
    "rabbitmq_version": "3.10.8",
    "erlang_version": "25.2",
    "node": "rabbit@x",
    "message_stats": {"publish_details": {"rate": 12.5}},
    "object_totals": {},
}
NODES = [
    {
        "name": "rabbit@x",
        "running": True,
        "mem_used": 100,
        "mem_limit": 1000,
        "mem_alarm": False,
        "disk_free": 5000,
        "disk_free_limit": 50,
        "disk_free_alarm": False,
        "fd_used": 10,
        "fd_total": 1024,
    }
]


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
        if path == "/api/overview":
            return httpx.Response(200, json=OVERVIEW)
        if path == "/api/nodes":
            return httpx.Response(200, json=NODES)
        if path.startswith("/api/queues/"):
            return httpx.Response(200, json={"items": []})
        if path == "/api/health/checks/alarms":
            return httpx.Response(200, json={"status": "ok"})
        return httpx.Response(200, content=json.dumps([]).encode())


def _collector(server: OddServer, timeout: float = 5.0) -> ManagementCollector:
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
