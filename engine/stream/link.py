"""One stream-protocol connection, on the node that leads the stream."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import rstream.connection
from rstream.client import Addr, Client, ClientPool

from flowdeck.engine.amqp.connection import parse_uri
from flowdeck.engine.client_base import LinkConnection
from flowdeck.engine.errors import BrokerUnavailable

# rstream reads its socket 256 bytes at a time, re-copying its buffer each time: a chunk of
# a few thousand messages then costs more to read than to handle. Read 64 KiB at a time.
rstream.connection.CHUNK_SIZE = 65_536

#: Seconds a stream connection may take to open (connect, authenticate, find the leader).
OPEN_TIMEOUT = 15.0


async def open_client(
    uri: str,
    stream_port: int,
    stream: str,
    name: str,
    on_lost: Callable[[str], None],
) -> tuple[Client, LinkConnection]:
    """A client connected to the leader of ``stream`` (the broker at ``uri``'s host,
    stream protocol on ``stream_port``) and the connection the worker sees for it.
    BrokerUnavailable when it cannot be opened."""
    params = parse_uri(uri)
    pool = ClientPool(
        params.host,
        stream_port,
        vhost=params.vhost,
        username=params.username,
        password=params.password,
        frame_max=1024 * 1024,
        heartbeat=60,
        load_balancer_mode=False,
        max_retries=5,
    )
    connection = LinkConnection(name)

    async def lost(info: Any) -> None:
        if connection.open:
            connection.open = False
            on_lost(f"stream connection {name!r} lost: {getattr(info, 'reason', info)}")

    async def opened() -> Client:
        locator = await pool.new(connection_name=name, addr=Addr(params.host, stream_port))
        try:
            leader, _ = await locator.query_leader_and_replicas(stream)
        finally:
            await locator.close()
        return await pool.new(
            connection_name=name,
            addr=Addr(leader.host, leader.port),
            connection_closed_handler=lost,
        )

    try:
        client = await asyncio.wait_for(opened(), OPEN_TIMEOUT)
    except (OSError, TimeoutError, ConnectionError) as exc:
        raise BrokerUnavailable(
            f"could not open a stream protocol connection to {params.host}:{stream_port} "
            f"for stream {stream!r}: {exc or type(exc).__name__} (is the rabbitmq_stream "
            "plugin enabled, and is that its port?)"
        ) from None
    except Exception as exc:  # rstream's own errors: the stream missing, refused auth
        raise BrokerUnavailable(
            f"the broker refused a stream protocol connection for stream {stream!r}: "
            f"{type(exc).__name__} {exc}"
        ) from None
    client.add_stream(stream)

    async def closing(reason: str) -> None:
        await client.close()

    connection.closing = closing  # type: ignore[method-assign]
    return client, connection
