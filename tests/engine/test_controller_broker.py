"""The controller with the real worker runtime against the shared broker: short, small runs.

Per-message behaviour (in-flight caps, prefetch via the management API, acks, nacks,
returns, stream and quorum consumers) is the hot path's to test; here the whole run is:
rate achieved, nothing lost, a change applied in every worker, in-process and in processes.
"""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import aiormq.exceptions
import pytest
from aio_pika.abc import AbstractIncomingMessage

from flowdeck.collectors import Broker
from flowdeck.engine.change import parse_change
from flowdeck.engine.controller import Controller
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import Tick
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec, ScheduleStep

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


@pytest.mark.slow
async def test_fixed_rate_is_achieved_and_nothing_is_lost(
    shared_uri: str, unique_name: str
) -> None:
    spec = RunSpec(
        name="fixed-rate",
        queue_pattern=f"{unique_name}-%d",
        queues=2,
        publishers=2,
        consumers=2,
        rate=250,
        duration=6,
        prefetch=100,
        ack_every=10,
        workers=0,
    )
    c = Controller(spec, broker=Broker.parse(shared_uri), drain_seconds=3, cleanup=True)
    ticks: list[Tick] = []
    c.add_listener(lambda u: ticks.append(u) if isinstance(u, Tick) else None)
    await c.start()
    summary = await c.wait()

    # Seconds wholly inside the publishing period: publishing starts part-way through a
    # second (how far depends on connecting), so the first second with messages is partial.
    steady = [
        t
        for before, t in itertools.pairwise(ticks)
        if before.totals.published > 0 and t.elapsed <= spec.duration
    ]
    assert len(steady) >= 3, [(t.elapsed, t.totals.published) for t in ticks]
    achieved = statistics.mean(t.publish_rate for t in steady)
    assert achieved / spec.target_rate == pytest.approx(1, abs=0.03)
    assert all(t.target_rate == spec.target_rate for t in steady)
    assert summary.outcome == "completed", summary.errors
    safety = summary.safety
    assert safety.published > 0.9 * spec.target_rate * spec.duration
    assert safety.confirmed == safety.published == safety.consumed
    assert (safety.lost, safety.duplicates, safety.unconfirmed, safety.nacked) == (0, 0, 0, 0)
    assert summary.latency  # measured, merged over the run


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
async def test_a_change_mid_run_is_applied_in_every_worker(
    shared_uri: str, unique_name: str, workers: int
) -> None:
    spec = RunSpec(
        name="steered",
        queue_pattern=f"{unique_name}-%d",
        queues=2,
        publishers=2,
        consumers=2,
        rate=100,
        duration=6,
        prefetch=200,
        schedule=(ScheduleStep(2.0, parse_change("prefetch=50")),),
    )
    c = Controller(
        spec, broker=Broker.parse(shared_uri), workers=workers, drain_seconds=3, cleanup=True
    )
    seen: list[object] = []
    c.add_listener(seen.append)
    await c.start()
    summary = await c.wait()

    assert summary.outcome == "completed", summary.errors
    events = [u for u in seen if isinstance(u, RunEvent)]
    requested = [e for e in events if e.kind is EventKind.CHANGE_REQUESTED]
    applied = [e for e in events if e.kind is EventKind.CHANGE_APPLIED]
    assert len(requested) == 1 and len(applied) == 1
    detail = applied[0].detail
    assert detail["workers"] == max(1, workers)
    assert requested[0].at <= detail["requested_at"] <= detail["applied_at"]
    assert detail["applied_at"] - detail["requested_at"] < spec.duration
    ticks = [u for u in seen if isinstance(u, Tick)]
    after = [t for t in ticks if t.at > detail["applied_at"]]
    assert after and all(t.settings.prefetch == 50 for t in after)
    assert max(t.workers for t in ticks) == max(1, workers)
    assert summary.safety.lost == 0 and summary.safety.consumed == summary.safety.published


async def test_topology_declares_type_and_arguments_and_refuses_a_conflict(
    shared_uri: str, management_url: str, unique_name: str
) -> None:
    import httpx

    from flowdeck.engine import topology
    from flowdeck.engine.errors import FlowdeckError

    spec = RunSpec(
        queue_pattern=f"{unique_name}-%d",
        queues=2,
        queue_type="quorum",
        queue_args={"x-max-in-memory-length": 0},
        exchange=f"{unique_name}-x",
        exchange_type="direct",
    )
    try:
        assert (await topology.declare(spec, shared_uri)).queues == spec.queue_names
        async with httpx.AsyncClient(auth=("guest", "guest")) as client:
            queue = (
                await client.get(f"{management_url}/api/queues/%2F/{spec.queue_names[1]}")
            ).json()
            bindings = (
                await client.get(
                    f"{management_url}/api/exchanges/%2F/{spec.exchange}/bindings/source"
                )
            ).json()
        assert queue["arguments"] == {"x-queue-type": "quorum", "x-max-in-memory-length": 0}
        assert queue["durable"] is True
        assert {b["destination"] for b in bindings} == set(spec.queue_names)
        classic = RunSpec(queue_pattern=spec.queue_pattern, queues=2)
        with pytest.raises(FlowdeckError, match=r"exists with other settings than the spec"):
            await topology.declare(classic, shared_uri)
    finally:
        assert await topology.delete_queues(shared_uri, spec.queue_names) == 2
        connection = await topology.connect(shared_uri)
        channel = await connection.channel()
        await channel.exchange_delete(spec.exchange)
        await connection.close()


async def test_a_run_whose_queues_another_client_consumes_is_refused_before_it_starts(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    """Two runs on the default queue names took each other's messages: one counted 1,993
    of its own as lost and consumed 5,043 where it had published 3,016. A queue that
    already has a consumer refuses a run that consumes from it (exit 2, on
    queue_pattern); a run that only publishes into it is a load for those consumers."""
    from flowdeck.engine import topology
    from flowdeck.engine.errors import SpecError

    spec = RunSpec(name="busy", queue_pattern=f"{unique_name}-%d", queues=2, duration=5)
    other = await topology.connect(shared_uri)
    try:
        channel = await other.channel()
        queue = await channel.declare_queue(spec.queue_names[1], durable=True)

        async def take(message: AbstractIncomingMessage) -> None:
            await message.ack()

        await queue.consume(take)
        controller = Controller(
            spec, broker=Broker.parse(shared_uri), recording=RunRecording(tmp_path), cleanup=True
        )
        with pytest.raises(SpecError) as refused:
            await controller.start()
        assert refused.value.field == "queue_pattern"
        assert str(refused.value).startswith(
            f"queue {spec.queue_names[1]!r} already has 1 consumer, not of this run"
        )
        assert "--queue-pattern" in str(refused.value)
        assert not list(tmp_path.iterdir())  # refused before anything was recorded
        publish_only = RunSpec(
            name="feed", queue_pattern=spec.queue_pattern, queues=2, consumers=0, rate=50
        )
        # the other client's queue 2 was there already: the call made queue 1 only, the one
        # it would delete again if the run failed to start
        declared = await topology.declare(publish_only, shared_uri)
        assert declared.queues == spec.queue_names[:1]
    finally:
        await other.close()
        await topology.delete_queues(shared_uri, spec.queue_names)


async def test_queues_are_deleted_through_a_node_that_is_up(
    shared_uri: str, unique_name: str
) -> None:
    """A cluster run whose node 1 a fault took down cleaned up through node 1 only and
    left its queues ('cannot connect to the broker'); the next node that answers serves."""
    from flowdeck.collectors.local_broker import free_port
    from flowdeck.engine import topology

    spec = RunSpec(queue_pattern=f"{unique_name}-%d", queues=2)
    await topology.declare(spec, shared_uri)
    down = f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F"
    assert await topology.delete_queues([down, shared_uri], spec.queue_names) == 2
    connection = await topology.connect(shared_uri)
    try:
        channel = await connection.channel()
        with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
            await channel.declare_queue(spec.queue_names[0], passive=True)
    finally:
        await connection.close()


async def test_socket_capacity_is_read_or_the_reason_it_is_not_is_given(
    management_url: str,
) -> None:
    from flowdeck.engine import topology

    nodes = await topology.node_capacity(management_url, "guest", "guest")
    assert nodes and all(n.sockets_total > n.sockets_used >= 0 for n in nodes)
    with pytest.raises(topology.CapacityUnknown, match="answered HTTP 401"):
        await topology.node_capacity(management_url, "guest", "not-the-password")
    with pytest.raises(topology.CapacityUnknown) as refused:
        await topology.node_capacity("http://127.0.0.1:9", "guest", "guest", timeout=2)
    assert refused.value.reason  # e.g. "All connection attempts failed"
