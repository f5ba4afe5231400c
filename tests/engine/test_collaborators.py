"""The controller's collaborators work with any run context (engine.run_context), so they
test without a controller, a broker or workers: here with a context that keeps events."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from flowdeck.collectors import Broker
from flowdeck.collectors.model import BrokerSample, NodeSample
from flowdeck.engine.capacity import CapacityCheck
from flowdeck.engine.change import Change, NodeFault
from flowdeck.engine.errors import SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.node_faults import NodeFaults
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.sinks import RunStarted
from flowdeck.engine.spec import RunSpec


class Run:
    """A run context that keeps what its collaborators report."""

    def __init__(self, broker: Broker | None = None) -> None:
        self.broker = broker or Broker.parse("amqp://guest:secret@rabbit.example:5672/%2F")
        self.under_way = True
        self.events: list[RunEvent] = []
        self.requested: list[tuple[Change, str]] = []

    def report_event(
        self,
        kind: EventKind,
        message: str,
        *,
        at: float | None = None,
        change_id: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> RunEvent:
        event = RunEvent(time.time() if at is None else at, kind, message, change_id, detail or {})
        self.events.append(event)
        return event

    def request(self, change: Change, source: str = "operator") -> int:
        self.requested.append((change, source))
        return len(self.requested)


def sample(sockets_used: int, sockets_total: int) -> BrokerSample:
    now = time.time()
    node = NodeSample(
        name="rabbit@one",
        sockets_used=sockets_used,
        sockets_total=sockets_total,
        fd_used=sockets_used,
        fd_total=1000,
    )
    return BrokerSample(
        source="management", taken_at=now, figures_at=now, statistics_interval=5.0, nodes=(node,)
    )


def test_a_change_past_the_free_sockets_is_warned_about_and_one_within_is_not() -> None:
    run = Run()
    check = CapacityCheck()
    check.bind(run)
    check.warn_change(3, added=10, total=30, open_connections=20, sample=sample(20, 45))
    assert run.events == []
    check.warn_change(4, added=40, total=60, open_connections=20, sample=sample(20, 45))
    (event,) = run.events
    assert event.change_id == 4 and event.detail == {
        "warning": "capacity",
        "added": 40,
        "free": 25,
        "limit": "sockets",
    }
    assert "opens 40 more connections but the broker has 25 sockets free" in event.message


def test_faults_on_a_broker_flowdeck_does_not_run_are_refused_without_a_password() -> None:
    run = Run()
    faults = NodeFaults()
    faults.bind(run)
    assert faults.local is None
    with pytest.raises(SpecError) as refused:
        faults.start(NodeFault("kill", "2"))
    assert "is not one" in refused.value.message and "secret" not in refused.value.message
    assert run.requested == []  # no phase opened for a refused fault


async def test_a_recording_that_cannot_start_says_so_once_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    run = Run()
    recording = RunRecording(blocked / "sessions")
    recording.bind(run)
    await recording.start(RunSpec(name="blocked"))

    recording.on_start(RunStarted(RunSpec(name="blocked"), time.time(), 0))
    recording.check()
    stopped = [e for e in run.events if e.kind is EventKind.RECORDING_STOPPED]
    assert len(stopped) == 1 and recording.error
    assert stopped[0].message.endswith("the run goes on unrecorded")
    assert recording.session_dir is None
