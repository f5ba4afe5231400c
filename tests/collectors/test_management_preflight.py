"""The management client's pre-flight reads against the shared broker: the nodes' socket
figures (does the broker have a socket for every connection of a run?) and the AMQP ports
(is this management API the run's broker's?).
"""

from __future__ import annotations

import asyncio
import time

import aio_pika
import pytest

from flowdeck.collectors import ManagementAnswerError, ManagementCollector

pytestmark = pytest.mark.broker

#: Connections the test holds open; the shared broker is not asked for more.
HELD_CONNECTIONS = 5


async def test_socket_figures_count_the_connections_a_client_holds(
    management_url: str, shared_uri: str
) -> None:
    async with ManagementCollector(management_url, username="guest", password="guest") as api:
        described = await api.check()  # "RabbitMQ 3.x on rabbit@host at ..."
        before = await api.socket_figures()
        assert before.complete and before.running >= 1
        assert any(f" on {n.node} at " in described for n in before.nodes), described
        assert all(0 <= n.sockets_used < n.sockets_total for n in before.nodes)

        connections = [await aio_pika.connect(shared_uri) for _ in range(HELD_CONNECTIONS)]
        try:
            # The node figures refresh every few seconds; wait for one refresh (bounded).
            deadline = time.monotonic() + 20
            counted = before
            while time.monotonic() < deadline:
                counted = await api.socket_figures()
                if sum(n.sockets_used for n in counted.nodes) >= HELD_CONNECTIONS:
                    break
                await asyncio.sleep(0.5)
        finally:
            for connection in connections:
                await connection.close()
    assert sum(n.sockets_used for n in counted.nodes) >= HELD_CONNECTIONS, counted
    assert {n.sockets_total for n in counted.nodes} == {n.sockets_total for n in before.nodes}


async def test_amqp_listener_ports_name_the_brokers_amqp_port(management_url: str) -> None:
    async with ManagementCollector(management_url, username="guest", password="guest") as api:
        ports = await api.amqp_listener_ports()
    assert 5672 in ports
    assert 15672 not in ports  # the management listener is HTTP, not AMQP


async def test_wrong_password_says_401_with_its_status(management_url: str) -> None:
    async with ManagementCollector(management_url, username="guest", password="wrong") as api:
        for read in (api.socket_figures, api.amqp_listener_ports):
            with pytest.raises(ManagementAnswerError) as refused:
                await read()
            assert refused.value.status == 401
            assert str(refused.value) == "management API: 401 unauthorized for user guest"


async def test_nothing_listening_is_one_line_without_a_status() -> None:
    async with ManagementCollector(
        "http://127.0.0.1:1", username="guest", password="guest", timeout=2
    ) as api:
        with pytest.raises(ManagementAnswerError) as refused:
            await api.socket_figures()
    assert refused.value.status is None
    message = str(refused.value)
    assert message.startswith("management API: cannot connect to http://127.0.0.1:1 (")
    assert "\n" not in message
