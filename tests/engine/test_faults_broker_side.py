"""What the broker does to a run's objects under it, on the shared broker (own names only).

A queue deleted under its consumers, an exchange deleted under its publishers (the broker
closes their channels), a connection closed by the broker (as an administrator does from
the management UI): the run goes on where it can, says what happened with the broker's own
reply text, resumes when the object is back, and its accounting counts what went nowhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import quote

import aio_pika
import httpx
import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.controller import Controller
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.spec import RunSpec
from tests.engine.updates import collect_updates

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

MANAGEMENT = "http://127.0.0.1:15672"


async def run_and_break(
    spec: RunSpec, uri: str, breaker: Callable[[], Awaitable[None]]
) -> tuple[RunSummary, list[RunEvent], list[Tick]]:
    controller = Controller(
        spec, broker=Broker.parse(uri, management_url=MANAGEMENT), drain_seconds=3, cleanup=True
    )
    events, ticks = collect_updates(controller)
    await controller.start()
    await breaker()
    summary = await asyncio.wait_for(controller.wait(), spec.duration + 60)
    return summary, events, ticks


def spec_for(unique_name: str, **fields: object) -> RunSpec:
    values: dict[str, object] = {
        "name": "broker-side",
        "queue_pattern": f"{unique_name}-%d",
        "publishers": 1,
        "consumers": 1,
        "rate": 100,
        "prefetch": 50,
        "duration": 12,
        "workers": 0,
    }
    values.update(fields)
    return RunSpec(**values)  # type: ignore[arg-type]


@pytest.mark.slow
async def test_queue_deleted_under_the_run(shared_uri: str, unique_name: str) -> None:
    spec = spec_for(unique_name)
    queue = spec.queue_name(0)

    async def delete_then_redeclare() -> None:
        await asyncio.sleep(3)
        connection = await aio_pika.connect(shared_uri)
        channel = await connection.channel()
        await channel.queue_delete(queue)
        await asyncio.sleep(3)
        await channel.declare_queue(queue, durable=True)
        await connection.close()

    summary, events, ticks = await run_and_break(spec, shared_uri, delete_then_redeclare)
    messages = [e.message for e in events]
    errors = [e.message for e in events if e.kind is EventKind.ERROR]
    assert any("cancelled consumer 0" in m and queue in m for m in errors), messages
    assert any("NOT_FOUND" in m and queue in m for m in errors), messages  # the broker's words
    assert any("consumer 0 works again" in m for m in messages), messages
    last = [t for t in ticks if t.elapsed > 9]
    assert last and max(t.consume_rate for t in last) > 0  # consuming again
    s = summary.safety
    assert summary.outcome == "completed", summary.errors
    # What was in the queue and what was published while it was gone went nowhere.
    assert s.lost > 0
    assert s.lost == s.confirmed - (s.consumed - s.duplicates)
    print(f"\nqueue deleted: {s}")


@pytest.mark.slow
async def test_exchange_deleted_closes_publisher_channels(
    shared_uri: str, unique_name: str
) -> None:
    exchange = f"{unique_name}-x"
    # Mandatory: a message the broker took while the exchange was going (looked up, then
    # routed after its bindings were gone) is confirmed though routed nowhere; without the
    # flag it counted as lost once (898 confirmed, 897 consumed), with it it comes back.
    spec = spec_for(unique_name, exchange=exchange, exchange_type="direct", mandatory=True)
    queue = spec.queue_name(0)

    async def delete_then_redeclare() -> None:
        await asyncio.sleep(3)
        connection = await aio_pika.connect(shared_uri)
        channel = await connection.channel()
        await channel.exchange_delete(exchange)
        await asyncio.sleep(3)
        declared = await channel.declare_exchange(
            exchange, aio_pika.ExchangeType.DIRECT, durable=True
        )
        bound = await channel.declare_queue(queue, durable=True)
        await bound.bind(declared, routing_key=queue)
        await connection.close()

    try:
        summary, events, ticks = await run_and_break(spec, shared_uri, delete_then_redeclare)
    finally:
        async with await aio_pika.connect(shared_uri) as connection:
            channel = await connection.channel()
            await channel.exchange_delete(exchange)
    messages = [e.message for e in events]
    errors = [e.message for e in events if e.kind is EventKind.ERROR]
    assert any(f"NOT_FOUND - no exchange '{exchange}'" in m for m in errors), messages
    assert any("publisher 0 works again" in m for m in messages), messages
    last = [t for t in ticks if t.elapsed > 9]
    assert last and max(t.publish_rate for t in last) > 0
    s = summary.safety
    assert summary.outcome == "completed", summary.errors
    # Every confirmed message that did not come back (returned) was consumed.
    assert s.lost == 0
    assert s.published == s.confirmed + s.nacked + s.unconfirmed
    print(f"\nexchange deleted: {s}")


@pytest.mark.slow
async def test_connection_closed_by_the_broker(shared_uri: str, unique_name: str) -> None:
    spec = spec_for(unique_name, name=f"forced-{unique_name[-6:]}")

    # the name's run tag is drawn by the controller: the run's name and the client's tell it
    def wanted(name: str) -> bool:
        return name.startswith(f"flowdeck {spec.name} ") and name.endswith(" w0 publisher 0")

    async def close_from_management() -> None:
        await asyncio.sleep(2)
        async with httpx.AsyncClient(base_url=MANAGEMENT, auth=("guest", "guest")) as api:
            for _ in range(40):
                listed = (await api.get("/api/connections?columns=name,client_properties")).json()
                names = [
                    c["name"]
                    for c in listed
                    if wanted(str(c.get("client_properties", {}).get("connection_name")))
                ]
                if names:
                    break
                await asyncio.sleep(0.25)
            else:
                raise AssertionError(f"connection of {spec.name} w0 publisher 0 never listed")
            closed = await api.delete(
                f"/api/connections/{quote(names[0], safe='')}",
                headers={"X-Reason": "closed by the fault test"},
            )
            assert closed.status_code == 204

    summary, events, ticks = await run_and_break(spec, shared_uri, close_from_management)
    started = [e for e in events if e.kind is EventKind.OUTAGE_STARTED]
    ended = [e for e in events if e.kind is EventKind.OUTAGE_ENDED]
    assert started and "closed by the fault test" in started[0].message
    assert ended and ended[0].detail["recovered"] is True
    last = [t for t in ticks if t.at > ended[0].at + 1]
    assert last and max(t.publish_rate for t in last) > 0
    s = summary.safety
    assert summary.outcome == "completed", summary.errors
    assert s.lost == 0
    assert s.published == s.confirmed + s.nacked + s.unconfirmed
    print(f"\nconnection closed: outage {ended[0].detail['seconds']} s, {s}")
