"""What one management poll costs at benchmark #3's 1,000 connections, flow states included.

A private node (file limit 8,192, statistics every second) gets benchmark #3's clients: 500
publisher and 500 consumer connections, one channel each, named as a run names them
(collectors/client_names.py). Then ``ManagementCollector.sample()`` is timed three ways,
``--polls`` times each:

* ``vhost states``: the connections' and channels' ``node,state`` only (what every sample
  reads for the per-node flow counts, with no run tag);
* ``run figures``: with the run's tag, so the listings also carry the names and channel
  counters the run's publishers in flow and its pipeline figures come from;
* ``before``: the columns the collector read before flow states (``state`` of the
  connections, the channels' unconfirmed and unacked), for comparison.

Each poll is the collector's whole sample (overview, nodes, queues, channels, connections,
alarms at once); bytes are the response bodies as they came over the wire, summed over the
poll's requests. CPU is this process's (parsing and building the sample) per poll.

    .venv/bin/python benchmarks/flow_poll_cost.py [--clients 1000] [--polls 10]

Bounded: the clients connect once (about 3 s), the polls take seconds; the node is
stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import httpx
from benchlib import load_average, private_node, spread

from flowdeck.collectors import management as management_module
from flowdeck.collectors.client_names import client_connection_name, new_run_tag
from flowdeck.collectors.management import ManagementCollector
from flowdeck.engine.amqp.connection import Connection, connect


class CountingTransport(httpx.AsyncHTTPTransport):
    """Counts the bytes of every response body as it came over the wire (gzip, as httpx
    asks for it) and as parsed."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.parsed = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        body = b"".join([part async for part in response.aiter_raw()])
        self.bytes += len(body)
        answer = httpx.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )
        self.parsed += len(await answer.aread())
        return answer


async def open_clients(uri: str, tag: str, clients: int) -> list[Connection]:
    """Half publishers, half consumers, one channel each, named as a run's."""
    opened: list[Connection] = []
    for batch in range(0, clients, 50):
        names = [
            client_connection_name(
                "bench3", tag, 0, "publisher" if i % 2 == 0 else "consumer", i // 2
            )
            for i in range(batch, min(clients, batch + 50))
        ]
        connections = await asyncio.gather(*(connect(uri, name) for name in names))
        await asyncio.gather(*(c.channel() for c in connections))
        opened.extend(connections)
    return opened


async def poll(
    url: str, interval: float, tag: str, polls: int, columns: dict[str, str] | None
) -> tuple[list[float], list[float], list[tuple[int, int]], Any]:
    """Seconds, CPU seconds and (wire, parsed) bytes per poll; the last sample."""
    transport = CountingTransport()
    saved = {name: getattr(management_module, name) for name in (columns or {})}
    for name, value in (columns or {}).items():
        setattr(management_module, name, value)
    times, cpu, sizes = [], [], []
    sample = None
    try:
        async with httpx.AsyncClient(transport=transport, timeout=30) as client:
            collector = ManagementCollector(
                url,
                username="guest",
                password="guest",
                statistics_interval=interval,
                client=client,
                run_tag=tag,
            )
            for _ in range(polls):
                before_bytes, before_parsed = transport.bytes, transport.parsed
                began, began_cpu = time.perf_counter(), time.process_time()
                sample = await collector.sample()
                times.append(time.perf_counter() - began)
                cpu.append(time.process_time() - began_cpu)
                sizes.append((transport.bytes - before_bytes, transport.parsed - before_parsed))
                await asyncio.sleep(interval)
    finally:
        for name, value in saved.items():
            setattr(management_module, name, value)
    return times, cpu, sizes, sample


async def listings(url: str, polls: int) -> None:
    """Each listing alone: what its columns cost the broker to answer."""
    wanted = {
        "connections node,state": (
            "connections",
            management_module._CONNECTION_COLUMNS,
        ),
        "connections, run's": ("connections", management_module._RUN_CONNECTION_COLUMNS),
        "channels node,state,...": ("channels", management_module._CHANNEL_COLUMNS),
        "channels, run's": ("channels", management_module._RUN_CHANNEL_COLUMNS),
    }
    async with httpx.AsyncClient(auth=("guest", "guest"), timeout=30) as client:
        for label, (kind, columns) in wanted.items():
            times = []
            for _ in range(polls):
                began = time.perf_counter()
                answer = await client.get(
                    f"{url}/api/vhosts/%2F/{kind}", params={"columns": columns}
                )
                answer.raise_for_status()
                times.append(time.perf_counter() - began)
            print(f"  {label:26} {spread([t * 1000 for t in times], ',.0f')} ms")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=10)
    args = parser.parse_args()
    print(load_average())
    with private_node() as node:
        tag = new_run_tag()
        began = time.perf_counter()
        clients = await open_clients(node.uri, tag, args.clients)
        print(f"{len(clients)} connections open in {time.perf_counter() - began:.1f} s")
        await asyncio.sleep(3)  # every connection and channel has emitted its statistics
        interval = node.stats_interval_ms / 1000
        before = {
            "_CONNECTION_COLUMNS": "state",
            "_CHANNEL_COLUMNS": "messages_unconfirmed,messages_unacknowledged",
        }
        try:
            for label, tag_used, columns in (
                ("before (state only)", "", before),
                ("vhost states", "", None),
                ("run figures", tag, None),
            ):
                times, cpu, sizes, sample = await poll(
                    node.management_url, interval, tag_used, args.polls, columns
                )
                print(
                    f"{label:20} poll {spread([t * 1000 for t in times], ',.0f')} ms, "
                    f"CPU {spread([c * 1000 for c in cpu], ',.1f')} ms, "
                    f"{spread([s[0] / 1000 for s in sizes], ',.0f')} kB on the wire, "
                    f"{spread([s[1] / 1000 for s in sizes], ',.0f')} kB parsed"
                )
                if sample is not None and sample.stale:
                    print(f"{'':20} stale: {sample.stale_reason}")
                if sample is not None and tag_used:
                    print(
                        f"{'':20} connections {sample.connections}, channels {sample.channels}, "
                        f"run publishers {sample.run_publishers} "
                        f"({sample.run_publishers_flow} in flow)"
                    )
            await listings(node.management_url, args.polls)
        finally:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main())
