"""Schedule steps fire at their times, in order, as changes from "schedule"; skip_step
brings the next one forward. Over the fake worker runtime (see controller_fakes)."""

from __future__ import annotations

import asyncio
import time

import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.change import parse_change
from flowdeck.engine.controller import Controller
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import Tick
from flowdeck.engine.spec import RunSpec, ScheduleStep
from tests.engine.controller_fakes import FAKE_RUNTIME

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

SPACING = 1.0


def sweep(name: str, duration: float = 4.0) -> RunSpec:
    steps = tuple(
        ScheduleStep(0.5 + i * SPACING, parse_change(f"inflight={10 * (i + 1)}")) for i in range(3)
    )
    return RunSpec(
        name="sweep",
        queue_pattern=f"{name}-%d",
        publishers=1,
        consumers=1,
        rate=50,
        duration=duration,
        durable=False,
        schedule=steps,
    )


async def test_steps_fire_at_their_times_in_order(shared_uri: str, unique_name: str) -> None:
    spec = sweep(unique_name)
    c = Controller(
        spec,
        broker=Broker.parse(shared_uri),
        workers=0,
        runtime=FAKE_RUNTIME,
        drain_seconds=1,
        cleanup=True,
    )
    seen: list[object] = []
    c.add_listener(seen.append)
    await c.start()
    summary = await c.wait()
    requested = [
        u for u in seen if isinstance(u, RunEvent) and u.kind is EventKind.CHANGE_REQUESTED
    ]
    assert [e.detail["source"] for e in requested] == ["schedule"] * 3
    assert [e.detail["value"] for e in requested] == [10, 20, 30]
    for step, event in zip(spec.schedule, requested, strict=True):
        late = event.at - (c.started_at + step.at)
        assert late >= -0.01  # never early
        assert late < 0.25 * SPACING  # and well within its phase
    assert summary.phases == 4 and c.settings.inflight == 30
    ticks = [u for u in seen if isinstance(u, Tick)]
    first = ticks[0]
    assert first.next_step_at == 1.5 and first.next_step == parse_change("inflight=20")


async def test_skip_step_applies_the_next_step_now(shared_uri: str, unique_name: str) -> None:
    spec = sweep(unique_name, duration=20.0)
    c = Controller(
        spec,
        broker=Broker.parse(shared_uri),
        workers=0,
        runtime=FAKE_RUNTIME,
        drain_seconds=1,
        cleanup=True,
    )
    await c.start()
    await asyncio.sleep(0.8)  # the first step (0.5 s) has fired
    skipping = time.time()
    c.skip_step()
    c.skip_step()
    skipped = time.time()
    assert c.next_step is None
    with pytest.raises(FlowdeckError, match="no steps left"):
        c.skip_step()
    await asyncio.sleep(0.5)
    assert c.settings.inflight == 30
    requested = [e for e in c.events if e.kind is EventKind.CHANGE_REQUESTED]
    # Requested by the skip itself, not at its time of 2.5 s (bounded by the two clock
    # readings around the calls, so a slow machine cannot make it look late).
    assert skipping <= requested[-1].at <= skipped
    assert requested[-1].at < c.started_at + spec.schedule[-1].at
    await c.stop()
