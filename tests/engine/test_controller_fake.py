"""The controller end to end over a fake worker runtime (no AMQP load, real topology).

The fake runtime keeps the real one's contract, so these tests pin the controller's own
behaviour: workers in-process and in processes, changes applied everywhere with both
times, relative changes, bad changes, a worker that fails, listeners.
"""

from __future__ import annotations

import asyncio

import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.change import Change, Setting, parse_change
from flowdeck.engine.controller import Controller
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.spec import RunSpec
from tests.engine.controller_fakes import FAILING_RUNTIME, FAKE_RUNTIME

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]


def small_spec(name: str, **values: object) -> RunSpec:
    base = dict(
        name="fake",
        queue_pattern=f"{name}-%d",
        queues=2,
        publishers=2,
        consumers=2,
        rate=100.0,
        duration=4.0,
        durable=False,
    )
    base.update(values)
    return RunSpec(**base)  # type: ignore[arg-type]


def controller(spec: RunSpec, uri: str, workers: int, runtime: str = FAKE_RUNTIME) -> Controller:
    return Controller(
        spec,
        broker=Broker.parse(uri),
        workers=workers,
        runtime=runtime,
        drain_seconds=1,
        cleanup=True,
    )


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
async def test_change_is_applied_in_every_worker_with_both_times(
    shared_uri: str, unique_name: str, workers: int
) -> None:
    c = controller(small_spec(unique_name), shared_uri, workers)
    seen: list[object] = []
    c.add_listener(seen.append)
    await c.start()
    await asyncio.sleep(1.2)
    change_id = c.request(parse_change("prefetch=60"))
    assert [p.change_id for p in c.pending] == [change_id]
    summary = await c.wait()

    events = [u for u in seen if isinstance(u, RunEvent)]
    applied = [e for e in events if e.kind is EventKind.CHANGE_APPLIED]
    assert len(applied) == 1 and applied[0].change_id == change_id
    detail = applied[0].detail
    assert detail["workers"] == max(1, workers)
    assert detail["requested_at"] <= detail["applied_at"]
    assert c.settings.prefetch == 60 and c.pending == ()
    phases = [e for e in events if e.kind is EventKind.PHASE]
    assert [p.detail["index"] for p in phases] == [0, 1]

    ticks = [u for u in seen if isinstance(u, Tick)]
    assert ticks and ticks[-1].totals.published == summary.safety.published
    assert isinstance(seen[-1], RunSummary)
    # the start, the prefetch change and the drain: the per-phase table's rows
    assert summary.outcome == "completed" and summary.phases == 3
    # the fake counts 100 msg/s per publisher: the mean rate is near 200 msg/s
    assert summary.publish_rate / 200 == pytest.approx(1, abs=0.2)
    assert summary.safety.lost == 0 and summary.safety.published == summary.safety.consumed


async def test_relative_changes_resolve_against_what_was_asked(
    shared_uri: str, unique_name: str
) -> None:
    c = controller(small_spec(unique_name, duration=3.0), shared_uri, 0)
    await c.start()
    c.request(Change(Setting.PUBLISHERS, 3, relative=True))
    second = c.request(Change(Setting.PUBLISHERS, 3, relative=True))
    assert c.pending[-1].change == Change(Setting.PUBLISHERS, 8)
    with pytest.raises(SpecError, match=r"ack_every .* must not exceed prefetch"):
        c.request(parse_change("ack_every=5000"))
    await c.wait()
    assert c.settings.publishers == 8
    assert second not in [p.change_id for p in c.pending]


async def test_stop_early_and_requests_after_the_end(shared_uri: str, unique_name: str) -> None:
    c = controller(small_spec(unique_name, duration=60.0), shared_uri, 0)
    await c.start()
    await asyncio.sleep(0.5)
    summary = await c.stop("enough")
    assert summary.outcome == "stopped" and summary.stop_reason == "enough"
    assert summary.duration < 30
    with pytest.raises(FlowdeckError, match="only while the run is running"):
        c.request(parse_change("pause"))
    assert await c.stop() == summary  # stopping twice gives the same summary


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
async def test_a_failing_worker_ends_the_run_as_failed_with_its_reason(
    shared_uri: str, unique_name: str, workers: int
) -> None:
    c = controller(small_spec(unique_name, duration=30.0), shared_uri, workers, FAILING_RUNTIME)
    await c.start()
    summary = await asyncio.wait_for(c.wait(), 60)
    assert summary.outcome == "failed"
    assert any("cannot connect to the broker at nowhere" in e for e in summary.errors)


async def test_unreachable_broker_is_refused_at_start(unique_name: str) -> None:
    c = controller(small_spec(unique_name), "amqp://guest:guest@127.0.0.1:1/%2F", 0)
    with pytest.raises(FlowdeckError, match=r"cannot connect to the broker at 127\.0\.0\.1:1"):
        await c.start()


@pytest.mark.slow
async def test_more_connections_than_the_broker_has_sockets_for_is_refused(
    shared_uri: str, unique_name: str
) -> None:
    spec = small_spec(unique_name, publishers=10_000, consumers=10_000)
    c = controller(spec, shared_uri, 0)
    with pytest.raises(FlowdeckError, match="the run needs 20000 connections"):
        await c.start()
