"""The operator comes before the schedule: a change of theirs holds the schedule (the
header says so), no step overwrites it, and ``S`` lets the schedule go on, its steps left
keeping their spacing from then (a step at 90 s once turned the operator's in-flight 4 into
40 and took their mark's phase away)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.change import parse_change
from flowdeck.engine.events import EventKind
from flowdeck.engine.ledger import Schedule
from flowdeck.engine.spec import RunSpec, ScheduleStep
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens.live import SCHEDULE_HELD, LiveScreen
from flowdeck.tui.widgets.run_header import RunHeader
from tests.engine.controller_fakes import FAKE_RUNTIME


def steps(*pairs: tuple[float, str]) -> list[ScheduleStep]:
    return [ScheduleStep(at, parse_change(change)) for at, change in pairs]


def test_a_held_schedule_fires_nothing_and_resumes_with_its_spacing() -> None:
    schedule = Schedule(steps((10, "inflight=20"), (20, "inflight=40")))
    assert schedule.hold(5.0)
    assert not schedule.hold(6.0)  # held already
    assert schedule.due(30.0) == [] and schedule.next_step() is None
    assert schedule.resume(12.0) == 7.0  # held 5 s .. 12 s
    assert schedule.next_step() == ScheduleStep(17.0, parse_change("inflight=20"))
    assert schedule.due(16.9) == []
    assert [s.change.value for s in schedule.due(27.0)] == [20, 40]
    assert not schedule and not schedule.hold(30.0)  # nothing left to hold


def test_taking_the_next_step_by_hand_ends_the_hold() -> None:
    schedule = Schedule(steps((10, "inflight=20"), (20, "inflight=40")))
    schedule.hold(1.0)
    step = schedule.take_next()
    assert step is not None and step.change.value == 20
    assert schedule.waiting_step() == ScheduleStep(20, parse_change("inflight=40"))


async def wait_for(pilot: object, condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {seconds} s")
        await pilot.pause(0.1)  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
async def test_operator_change_pauses_the_schedule_and_s_resumes_it(
    shared_uri: str, unique_name: str
) -> None:
    from flowdeck.engine.controller import Controller

    spec = RunSpec(
        name="operator-first",
        queue_pattern=f"{unique_name}-%d",
        publishers=1,
        consumers=1,
        rate=50,
        inflight=10,
        duration=60.0,
        durable=False,
        schedule=tuple(steps((3.0, "inflight=40"), (4.0, "inflight=80"))),
    )
    control = Controller(
        spec,
        broker=Broker.parse(shared_uri),
        workers=0,
        runtime=FAKE_RUNTIME,
        drain_seconds=1,
        cleanup=True,
    )
    app = FlowdeckApp(control=control)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        await wait_for(pilot, lambda: control.running)
        await pilot.press("i")  # in-flight 10 -> 5, before the step at 3 s
        await wait_for(pilot, lambda: control.settings.inflight == 5)
        assert control.schedule_held
        header = screen.query_one(RunHeader)
        await wait_for(pilot, lambda: SCHEDULE_HELD in str(header.render()))
        held = [e for e in control.events if "schedule paused by change #1" in e.message]
        assert held and held[0].kind is EventKind.INFO
        # Past both steps' times: the operator's value stands.
        await wait_for(pilot, lambda: time.time() - control.started_at > 5.0)
        await pilot.pause(0.3)
        assert control.settings.inflight == 5
        assert [e for e in control.events if "requested by schedule" in e.message] == []

        resumed_at = time.time() - control.started_at
        await pilot.press("S")
        assert not control.schedule_held
        await wait_for(pilot, lambda: control.settings.inflight == 80, 20)
        fired = [e for e in control.events if "requested by schedule" in e.message]
        assert [e.detail["value"] for e in fired] == [40, 80]
        # The steps kept their 1 s spacing, counted from the resume, not from the start.
        first_at = fired[0].at - control.started_at
        assert first_at >= resumed_at
        assert SCHEDULE_HELD not in str(header.render())
        await control.stop("test done")
