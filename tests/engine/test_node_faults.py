"""Node faults as schedule steps: ``fault kill 2`` parses (from the CLI's ``AT:CHANGE`` and
from a spec file), round-trips through the recorded spec, is refused in one line (exit 2)
when the broker is not one flowdeck runs or has no such node, and fires as a phase mark
with its asked/done events. The report's faults table turns a kill and the next start of a
node into one "node down" row.

The firing test acts on a private node that was never started: "kill" finds it not
running, so nothing is killed, but the controller's whole path (thread, events, phase) runs.
The real kill of a cluster node is the drill in tests/collectors/test_cluster_live.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from flowdeck.cli.common import parse_step
from flowdeck.collectors import Broker, LocalBroker, LocalNodes
from flowdeck.engine.change import NodeFault, parse_fault
from flowdeck.engine.controller import Controller
from flowdeck.engine.errors import SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.spec import RunSpec, parse_schedule, schedule_step, spec_from_mapping
from flowdeck.spark_reports.faults import faults
from tests.engine.controller_fakes import FAKE_RUNTIME


@pytest.fixture
def unstarted_node() -> Iterator[LocalBroker]:
    """A private node's handle that was never started (only its data directory exists)."""
    node = LocalBroker(name="flowdeck-test-fault")
    yield node
    shutil.rmtree(node.base_dir, ignore_errors=True)


@pytest.mark.parametrize(
    ("text", "action", "node"),
    [
        ("fault kill 2", "kill", "2"),
        ("fault stop n2", "stop", "n2"),
        ("  FAULT Start 3 ", "start", "3"),
        ("fault restart rabbit-2@host", "restart", "rabbit-2@host"),
    ],
)
def test_a_fault_parses(text: str, action: str, node: str) -> None:
    assert parse_fault(text) == NodeFault(action, node)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["fault", "fault kill", "fault explode 2", "fault kill 2 3"])
def test_a_bad_fault_says_what_a_fault_is(text: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_fault(text)
    message = caught.value.message
    assert "fault ACTION NODE" in message and "kill, stop, start, restart" in message
    assert repr(text.strip()) in message


def test_a_fault_step_from_the_command_line_and_from_a_spec_file() -> None:
    step = parse_step("20s:fault kill 2")
    assert step.at == 20 and step.fault == NodeFault("kill", "2")
    assert step.describe() == "fault kill 2"
    # the phase it opens is a mark named after it
    assert step.change.label == "fault kill 2"
    assert schedule_step(20, "inflight=200").fault is None
    steps = parse_schedule([{"at": 45, "change": "fault start 2"}])
    assert steps[0].fault == NodeFault("start", "2")
    with pytest.raises(SpecError, match=r"schedule\[0\]\.change: a node fault is"):
        parse_schedule([{"at": 45, "change": "fault start"}])


def test_a_fault_step_survives_the_recorded_spec_scaling_and_stretching() -> None:
    spec = RunSpec(
        name="drill",
        duration=60,
        publishers=10,
        schedule=(parse_step("20:fault kill 2"), parse_step("40:fault start 2")),
    )
    mapping = spec.to_mapping()
    assert mapping["schedule"] == [
        {"at": 20.0, "change": "fault kill 2"},
        {"at": 40.0, "change": "fault start 2"},
    ]
    assert spec_from_mapping(mapping).schedule == spec.schedule
    assert [s.fault for s in spec.scaled(0.5).schedule] == [s.fault for s in spec.schedule]
    stretched = spec.with_duration(30).schedule
    assert [(s.at, s.describe()) for s in stretched] == [
        (10, "fault kill 2"),
        (20, "fault start 2"),
    ]


def test_a_fault_on_a_broker_flowdeck_does_not_run_is_refused(shared_uri: str) -> None:
    spec = RunSpec(name="drill", duration=30, schedule=(parse_step("10:fault kill 2"),))
    with pytest.raises(SpecError) as caught:
        Controller(spec, broker=Broker.parse(shared_uri), workers=0)
    message = caught.value.message
    assert message.startswith("schedule step at 10 s: fault kill 2 needs a node or cluster")
    assert "flowdeck broker start --nodes 3" in message and "guest:***@" in message
    assert "\n" not in message


def test_a_fault_on_a_node_the_broker_has_not_is_refused(
    shared_uri: str, unstarted_node: LocalBroker
) -> None:
    spec = RunSpec(name="drill", duration=30, schedule=(parse_step("10:fault kill 2"),))
    broker = Broker.parse(shared_uri, local=LocalNodes(unstarted_node))
    with pytest.raises(SpecError) as caught:
        Controller(spec, broker=broker, workers=0)
    assert f"no node '2' in {unstarted_node.nodename}; it has 1 (" in caught.value.message


@pytest.mark.broker
def test_the_command_line_refuses_a_fault_on_a_remote_broker_with_exit_2(shared_uri: str) -> None:
    run = subprocess.run(
        [
            *(sys.executable, "-m", "flowdeck.cli", "run", "--uri", shared_uri),
            *("--no-record", "--duration", "10", "--change", "5s:fault kill 2"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "fault kill 2 needs a node or cluster flowdeck runs" in lines[0]


@pytest.mark.broker
@pytest.mark.timeout(60)
async def test_a_fault_step_fires_as_a_phase_with_its_events(
    shared_uri: str, unique_name: str, unstarted_node: LocalBroker
) -> None:
    spec = RunSpec(
        name="fault-step",
        queue_pattern=f"{unique_name}-%d",
        publishers=1,
        consumers=1,
        rate=20,
        duration=3.0,
        durable=False,
        schedule=(parse_step("1:fault kill 1"),),
    )
    broker = Broker.parse(shared_uri, local=LocalNodes(unstarted_node))
    controller = Controller(
        spec, broker=broker, workers=0, runtime=FAKE_RUNTIME, drain_seconds=1, cleanup=True
    )
    events: list[RunEvent] = []
    controller.add_listener(lambda u: events.append(u) if isinstance(u, RunEvent) else None)
    await controller.start()
    await controller.wait()
    faulted = [e for e in events if e.detail.get("fault")]
    assert [e.detail["stage"] for e in faulted] == ["asked", "done"]
    assert all(e.detail["source"] == "schedule" for e in faulted)
    assert faulted[1].message == f"fault kill 1 done: {unstarted_node.nodename} is not running"
    assert faulted[1].detail["changed"] is False
    phases = [e.detail["label"] for e in events if e.kind is EventKind.PHASE]
    assert phases == ["start", "fault kill 1"]


def test_the_faults_table_shows_a_node_down_from_kill_to_start() -> None:
    def done(at: float, action: str, **more: object) -> dict[str, object]:
        detail = {"fault": action, "node": "2", "nodename": "n2@localhost", "stage": "done"}
        return {"at": at, "kind": "info", "message": "", "detail": detail | more}

    events = [
        done(100.0, "kill", source="schedule"),
        {"at": 100.5, "kind": "info", "message": "x", "detail": {"fault": "start"}},  # asked only
        done(125.0, "start", source="operator", took_s=14.0),
        done(130.0, "restart", source="schedule", took_s=6.0),
        done(131.0, "kill", source="schedule", changed=False),  # was not running: no row
    ]
    rows = faults(events, 90.0, {})
    assert [(f.kind, f.subject, f.start_s, f.end_s) for f in rows] == [
        ("node down", "n2@localhost", 10.0, 35.0),
        ("node down", "n2@localhost", 34.0, 40.0),
    ]
    assert rows[0].detail == "kill (schedule), then start (operator) after 25.0 s"
    assert rows[1].detail == "restart (schedule) took 6.0 s"


def test_prometheus_scrapes_the_running_nodes_flowdeck_runs_else_the_target_given(
    unstarted_node: LocalBroker,
) -> None:
    remote = Broker.parse("amqp://a:5672,amqp://b:5672", prometheus_target="a:15692")
    assert remote.prometheus_targets == ("a:15692",)
    # a node flowdeck runs but that is down has no endpoint to scrape: the given one stays
    local = Broker.parse(
        "amqp://localhost:5672", prometheus_target="x:1", local=LocalNodes(unstarted_node)
    )
    assert local.prometheus_targets == ("x:1",)
