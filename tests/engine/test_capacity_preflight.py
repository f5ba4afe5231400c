"""The socket-limit pre-flight and mid-run growth, on a private node with few sockets.

The node runs with 150 file descriptors, which RabbitMQ turns into 45 sockets, and
refreshes its statistics every 5 s as a default broker does. The pre-flight must not refuse
a run on figures that still count a finished run's sockets; when it cannot read the figures
it refuses a large run in one line (``--skip-capacity-check`` goes on) and warns about a
small one; a change that adds clients past the limit is warned about before it applies, and
what the run records is what really connected.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pyarrow.compute as pc
import pytest

from flowdeck.collectors import Broker
from flowdeck.collectors.local_broker import LocalBroker
from flowdeck.collectors.model import BrokerSample
from flowdeck.engine import topology
from flowdeck.engine.capacity import CapacityCheck
from flowdeck.engine.change import parse_change
from flowdeck.engine.controller import Controller
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import Tick
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
FILE_LIMIT = 150  # RabbitMQ 3.x: (150 - 100) * 0.9 = 45 sockets
STATS_SECONDS = 5.0


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    broker = private_broker(file_limit=FILE_LIMIT, stats_interval_ms=int(STATS_SECONDS * 1000))
    yield broker
    private_broker.discard(broker)


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def small_spec(name: str, **fields: object) -> RunSpec:
    values: dict[str, object] = {
        "name": "preflight",
        "queue_pattern": f"{name}-%d",
        "queues": 1,
        "publishers": 1,
        "consumers": 1,
        "rate": 1.0,
        "duration": 2.0,
        "workers": 0,
    }
    values.update(fields)
    return RunSpec(**values)  # type: ignore[arg-type]


def controller_for(
    spec: RunSpec, node: LocalBroker, uri: str = "", management_url: str = "", **options: object
) -> Controller:
    broker = Broker.parse(
        uri or node.uri,
        management_url=management_url or node.management_url,
        statistics_interval=STATS_SECONDS,
    )
    values: dict[str, object] = {"drain_seconds": 1.0, "cleanup": True}
    values.update(options)
    return Controller(spec, broker=broker, **values)  # type: ignore[arg-type]


def events_of(controller: Controller) -> list[RunEvent]:
    events: list[RunEvent] = []
    controller.add_listener(lambda u: events.append(u) if isinstance(u, RunEvent) else None)
    return events


async def sockets_total(node: LocalBroker) -> int:
    nodes = await topology.node_capacity(node.management_url, "guest", "guest", timeout=10)
    return topology.free_sockets(nodes)[1]


@pytest.mark.slow
async def test_a_run_right_after_a_socket_heavy_one_is_not_refused_on_stale_figures(
    node: LocalBroker, unique_name: str
) -> None:
    total = await sockets_total(node)
    assert total == 45, "the node's socket limit is not what the test expects"
    heavy = small_spec(unique_name, publishers=20, consumers=20, duration=60.0)
    first = controller_for(heavy, node)
    await first.start()
    try:  # until the management API counts the run's 40 sockets (bounded)
        deadline = time.monotonic() + 4 * STATS_SECONDS
        while time.monotonic() < deadline:
            nodes = await topology.node_capacity(node.management_url, "guest", "guest")
            if sum(n.sockets_used for n in nodes) >= 40:
                break
            await asyncio.sleep(0.5)
        else:
            pytest.fail("the management API never counted the run's 40 connections")
    finally:
        assert (await first.stop()).outcome == "stopped"

    # Right after it, the management API still counts the sockets the run has closed.
    figures = await topology.node_capacity(node.management_url, "guest", "guest")
    shown_free = topology.free_sockets(figures)[0]
    after = replace(heavy, publishers=15, consumers=15, duration=2.0)
    began = time.monotonic()
    second = controller_for(after, node)
    events = events_of(second)
    await second.start()  # not refused: 30 connections fit 45 free sockets
    waited = time.monotonic() - began
    summary = await second.wait()
    assert summary.outcome == "completed", summary.errors
    assert summary.safety.published > 0
    read_again = [e for e in events if "read again" in e.message]
    print(f"\nright after the heavy run: {shown_free} of {total} free; start took {waited:.1f} s")
    if shown_free < topology.connections_needed(after):
        # The stale case did happen: the pre-flight said so and read the figures again.
        assert read_again, [e.message for e in events]
        assert read_again[0].detail["needed"] == 30
    assert waited < 2 * STATS_SECONDS + 1 + 20  # bounded: settle window plus start-up


@pytest.mark.slow
async def test_when_the_limit_cannot_be_read_a_large_run_is_refused_and_a_small_one_warned(
    node: LocalBroker, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead_api = f"http://127.0.0.1:{unused_port()}"
    monkeypatch.setattr(topology, "UNCHECKED_CONNECTIONS_LIMIT", 3)  # 4 connections = large
    large = small_spec(unique_name, publishers=2, consumers=2)
    with pytest.raises(FlowdeckError, match="socket limit could not be checked") as refused:
        await controller_for(large, node, management_url=dead_api).start()
    assert "--skip-capacity-check" in str(refused.value)
    assert "\n" not in str(refused.value)

    for spec, options in (
        (large, {"capacity": CapacityCheck(skip=True)}),  # the operator insists
        (small_spec(unique_name), {}),  # 2 connections: goes on, warned
    ):
        controller = controller_for(spec, node, management_url=dead_api, **options)
        events = events_of(controller)
        await controller.start()
        summary = await controller.wait()
        assert summary.outcome == "completed", summary.errors
        assert summary.safety.published > 0
        warnings = [e.message for e in events if e.message.startswith("warning:")]
        assert any("socket limit was not checked" in w for w in warnings), warnings


def flowdeck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": ""},
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.slow
def test_cli_refuses_a_large_unchecked_run_in_one_line_and_goes_on_when_told(
    node: LocalBroker, unique_name: str
) -> None:
    """801 connections: past the unchecked limit. Refused before any connection opens;
    with --skip-capacity-check it goes past the pre-flight (to a dead AMQP port here, so
    the test opens nothing: it fails at connecting, as any run would)."""
    large = [
        "--publishers", "401", "--consumers", "400", "--rate", "1", "--duration", "2",
        "--workers", "0", "--no-record", "--queue-pattern", f"{unique_name}-%d",
    ]  # fmt: skip
    unreachable = flowdeck(
        *large, "--uri", node.uri, "--management-url", f"http://127.0.0.1:{unused_port()}"
    )
    unauthorised = flowdeck(
        *large, "--uri", node.uri, "--management-url", node.management_url,
        "--management-user", "guest", "--management-password", "not-the-password",
    )  # fmt: skip
    for result, why in ((unreachable, "management API at"), (unauthorised, "HTTP 401")):
        assert result.returncode == 1, result.stdout + result.stderr
        line = one_line(result)
        assert "801 connections" in line and "could not be checked" in line, line
        assert why in line and "--skip-capacity-check" in line, line
        assert "not-the-password" not in result.stdout + result.stderr

    dead_amqp = f"amqp://guest:guest@127.0.0.1:{unused_port()}/%2F"
    skipped = flowdeck(
        *large, "--uri", dead_amqp, "--management-url", f"http://127.0.0.1:{unused_port()}",
        "--skip-capacity-check",
    )  # fmt: skip
    assert skipped.returncode == 1, skipped.stdout + skipped.stderr
    line = one_line(skipped)
    assert "could not be checked" not in line and "connect" in line, line
    assert "socket limit was not checked" in skipped.stdout  # said, not refused


async def management_connections(node: LocalBroker, role: str) -> int:
    async with httpx.AsyncClient(auth=("guest", "guest"), timeout=10) as client:
        answer = await client.get(
            f"{node.management_url}/api/connections?columns=user_provided_name"
        )
    return sum(1 for c in answer.json() if f" {role} " in str(c.get("user_provided_name")))


@pytest.mark.slow
async def test_a_change_past_the_socket_limit_warns_first_and_records_what_opened(
    node: LocalBroker, unique_name: str, tmp_path: Path
) -> None:
    spec = small_spec(unique_name, publishers=20, consumers=20, duration=40.0)
    # Clients past the limit wait in the broker's backlog: let them time out in 3 s.
    controller = controller_for(
        spec, node, uri=f"{node.uri}?connection_timeout=3000", recording=RunRecording(tmp_path)
    )
    events = events_of(controller)
    ticks: list[Tick] = []
    samples: list[BrokerSample] = []
    controller.add_listener(lambda u: ticks.append(u) if isinstance(u, Tick) else None)
    controller.add_listener(lambda u: samples.append(u) if isinstance(u, BrokerSample) else None)
    await controller.start()
    try:
        # Wait until the figures the run watches count its 40 sockets (bounded).
        deadline = time.monotonic() + 4 * STATS_SECONDS
        while time.monotonic() < deadline:
            fresh = [s for s in samples if s.source == "management" and not s.stale]
            if fresh and sum(n.sockets_used or 0 for n in fresh[-1].nodes) >= 40:
                break
            await asyncio.sleep(0.5)
        else:
            pytest.fail("the management API never counted the run's 40 connections")
        change_id = controller.request(parse_change("publishers=+10"))
        deadline = time.monotonic() + 30
        while not any(e.kind is EventKind.CHANGE_APPLIED for e in events):
            assert time.monotonic() < deadline, [e.message for e in events]
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.5)  # a tick or two with the change in force
        opened_on_broker = await management_connections(node, "publisher")
    finally:
        summary = await controller.stop()

    by_change = [e for e in events if e.change_id == change_id]
    kinds = [e.kind for e in by_change]
    warning = next(e for e in by_change if e.message.startswith("warning:"))
    assert kinds.index(EventKind.CHANGE_REQUESTED) < by_change.index(warning)
    assert by_change.index(warning) < kinds.index(EventKind.CHANGE_APPLIED)
    assert "opens 10 more connections" in warning.message and "sockets free" in warning.message
    applied = next(e for e in by_change if e.kind is EventKind.CHANGE_APPLIED)
    opened = applied.detail["opened"]
    assert applied.detail["asked"] == 30
    assert 20 <= opened < 30, applied.message
    assert f"publishers={opened}" in applied.message and "30 asked" in applied.message
    # What is recorded is what is connected: the broker's count, the ticks, the session.
    assert opened_on_broker == opened
    after = [t for t in ticks if t.at > applied.at]
    assert after and all(t.settings.publishers == opened for t in after)
    assert max(t.connections for t in after) == opened + 20
    assert summary.session_dir is not None
    session = open_session(Path(summary.session_dir))
    client = session.table(fmt.CLIENT_DIR)
    late = client.filter(pc.greater(client.column("elapsed_s"), applied.at - summary.started + 1))
    assert late.num_rows and set(late.column("publishers").to_pylist()) == {opened}
    recorded = [
        json.loads(line)
        for line in (Path(summary.session_dir) / fmt.EVENTS).read_text().splitlines()
    ]
    recorded_applied = [e for e in recorded if e["kind"] == "change_applied"]
    assert recorded_applied[0]["detail"]["opened"] == opened
    errors = [e.message for e in events if e.kind is EventKind.ERROR]
    assert any(f"opened {opened - 20} of 10 new publishers" in m for m in errors), errors
