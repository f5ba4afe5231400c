"""Failover to another node's management API where a real cluster here cannot go: nodes on
two hosts whose listeners bind every interface (``::``), so which host is which node's
comes from the run's node URIs and the nodes' names; and no other node answering at all.

The live drill (a private cluster, the polled node SIGKILLed) is in test_cluster_live.py.
"""

from __future__ import annotations

import httpx

from flowdeck.collectors import ManagementCollector

NODES = ("rabbit@h1", "rabbit@h2")


def listeners() -> list[dict[str, object]]:
    return [
        {"node": node, "protocol": protocol, "ip_address": "::", "port": port}
        for node in NODES
        for protocol, port in (("amqp", 5672), ("http", 15672), ("clustering", 25672))
    ]


class TwoHosts:
    """Each host answers as its node until it is ``down`` (connection refused)."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.asked: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        self.asked.append(host)
        if host in self.down:
            raise httpx.ConnectError("connection refused", request=request)
        path = request.url.path
        if path == "/api/overview":
            return httpx.Response(
                200,
                json={
                    "rabbitmq_version": "3.10.8",
                    "node": f"rabbit@{host}",
                    "listeners": listeners(),
                },
            )
        if path == "/api/nodes":
            running = [{"name": n, "running": n.split("@")[1] not in self.down} for n in NODES]
            return httpx.Response(200, json=running)
        if path == "/api/health/checks/alarms":
            return httpx.Response(200, json={"status": "ok"})
        return httpx.Response(200, json=[])


def collector(server: TwoHosts) -> ManagementCollector:
    return ManagementCollector(
        "http://h1:15672",
        username="guest",
        password="guest",
        queue_names=[],
        statistics_interval=1.0,
        amqp_nodes=[("h1", 5672), ("h2", 5672)],
        client=httpx.AsyncClient(transport=httpx.MockTransport(server)),
    )


async def test_a_dead_nodes_api_is_left_for_the_other_hosts_in_the_same_poll() -> None:
    server = TwoHosts()
    api = collector(server)
    first = await api.sample()
    assert not first.stale and api.node == "rabbit@h1" and api.failovers == []
    server.down.add("h1")
    second = await api.sample()
    assert not second.stale, second.stale_reason
    assert second.nodes_down == ("rabbit@h1",)
    assert api.base_url == "http://h2:15672" and api.node == "rabbit@h2"
    [move] = api.failovers
    assert move.describe() == "management API of rabbit@h1 down; polling rabbit@h2"
    assert "cannot connect to http://h1:15672" in move.reason
    # it stays there: no second move, and h1 is not asked again
    server.asked.clear()
    assert not (await api.sample()).stale
    assert len(api.failovers) == 1 and "h1" not in server.asked
    await api.aclose()


async def test_with_no_other_node_answering_the_sample_is_stale_and_says_why() -> None:
    server = TwoHosts()
    api = collector(server)
    await api.sample()
    server.down.update({"h1", "h2"})
    sample = await api.sample()
    assert sample.stale and "cannot connect to http://h1:15672" in sample.stale_reason
    assert api.failovers == [] and api.base_url == "http://h1:15672"
    await api.aclose()


async def test_a_node_the_run_has_no_uri_for_is_not_guessed() -> None:
    server = TwoHosts()
    api = ManagementCollector(
        "http://h1:15672",
        username="guest",
        password="guest",
        queue_names=[],
        statistics_interval=1.0,
        amqp_nodes=[("h1", 5672)],  # the run knows node 1's host only
        client=httpx.AsyncClient(transport=httpx.MockTransport(server)),
    )
    await api.sample()
    # node 2 listens on node 1's port on another host: not taken for node 1's host
    assert api._endpoints == {"rabbit@h1": "http://h1:15672"}
    server.down.add("h1")
    assert (await api.sample()).stale
    assert api.failovers == []
    await api.aclose()


class PolicyServer(TwoHosts):
    """A DELETE of a policy: ``dropped`` of them find their connection closed by the node
    (a read error, as httpx raises for a keep-alive connection the node let go)."""

    def __init__(self, dropped: int = 0) -> None:
        super().__init__()
        self.dropped = dropped
        self.deleted: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method != "DELETE":
            return super().__call__(request)
        host = request.url.host
        self.asked.append(host)
        if host in self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if self.dropped:
            self.dropped -= 1
            raise httpx.ReadError("connection closed by the peer", request=request)
        self.deleted.append(f"{host}{request.url.raw_path.decode()}")
        return httpx.Response(204)


async def test_a_policy_delete_on_a_connection_the_node_closed_is_asked_again() -> None:
    server = PolicyServer(dropped=1)
    api = collector(server)
    await api.delete_policy("flowdeck-run-mirroring")
    assert server.deleted == ["h1/api/policies/%2F/flowdeck-run-mirroring"]
    await api.aclose()


async def test_a_policy_is_deleted_through_another_node_when_the_polled_one_is_down() -> None:
    server = PolicyServer()
    api = collector(server)
    await api.sample()  # learns where every node's API is
    server.down.add("h1")
    await api.delete_policy("flowdeck-run-mirroring")
    assert server.deleted == ["h2/api/policies/%2F/flowdeck-run-mirroring"]
    assert api.node == "rabbit@h2"
    await api.aclose()
