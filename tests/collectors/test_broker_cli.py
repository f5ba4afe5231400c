"""`flowdeck broker` from a shell: start a private node, raise and clear alarms, stop it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from flowdeck.engine.provision import started_node_for

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(240)]


def flowdeck(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLOWDECK_BROKER_STATE": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", "broker", *args],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
    )


def alarms(management_url: str) -> list[str]:
    answer = httpx.get(
        f"{management_url}/api/health/checks/alarms", auth=("guest", "guest"), timeout=10
    ).json()
    return [a["resource"] for a in answer.get("alarms", [])]


def test_start_alarm_clear_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "broker.json"
    started = flowdeck(state, "start", "--set", "quorum_commands_soft_limit=64")
    try:
        assert started.returncode == 0, started.stderr
        assert "settings    quorum_commands_soft_limit=64" in started.stdout, started.stdout
        management = re.search(r"management\s+(http://\S+)", started.stdout)
        assert management, started.stdout
        url = management.group(1)
        # the node's data lives beside its state file, so nodes never share a data dir
        assert f"data        {tmp_path}" in started.stdout, started.stdout
        assert flowdeck(state, "status").returncode == 0
        # A run given the node's uri uses the node's management API, not the one at
        # host:15672 that the uri alone suggests (the shared broker's).
        uri = re.search(r"uri\s+(amqp://\S+)", started.stdout)
        assert uri, started.stdout
        monkeypatch.setenv("FLOWDECK_BROKER_STATE", str(state))
        node = started_node_for(uri.group(1))
        other = started_node_for("amqp://guest:guest@127.0.0.1:5672/%2F")
        assert node is not None and node.management_url == url
        assert other is None
        # the setting is the node's own (read back from it), and its state keeps it
        said = node.rabbitmqctl("eval", "application:get_env(rabbit, quorum_commands_soft_limit).")
        assert said.split() == ["{ok,64}"]
        assert node.rabbit_settings == {"quorum_commands_soft_limit": "64"}

        raised = flowdeck(state, "alarm", "memory")
        assert raised.returncode == 0, raised.stderr
        assert alarms(url) == ["memory"]
        raised = flowdeck(state, "alarm", "disk")
        assert sorted(alarms(url)) == ["disk space", "memory"]
        cleared = flowdeck(state, "alarm", "clear")
        assert cleared.returncode == 0, cleared.stderr
        assert alarms(url) == []
    finally:
        stopped = flowdeck(state, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert flowdeck(state, "status").returncode == 1
    assert "no private node" in flowdeck(state, "alarm", "memory").stdout


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_taken_port_fails_with_the_reason(tmp_path: Path, management_url: str) -> None:
    """The shared broker listens on 5672: a node asked for that port must not start, nor
    report the shared broker's port as its own."""
    state = tmp_path / "broker.json"
    started = flowdeck(state, "start", "--amqp-port", "5672")
    assert started.returncode == 1, started.stdout
    said = one_line_error(started)
    assert "5672" in said and "already in use" in said, said
    assert "uri" not in started.stdout and not state.exists()
    assert flowdeck(state, "status").returncode == 1


def test_a_state_file_of_the_wrong_shape_is_bad_input(tmp_path: Path) -> None:
    state = tmp_path / "broker.json"
    for text in ("[1, 2]", '{"nodename": 3}', "not json"):
        state.write_text(text)
        for action in ("status", "stop", "restart"):
            done = flowdeck(state, action)
            assert done.returncode == 2, (text, action, done.stdout, done.stderr)
            said = one_line_error(done)
            assert str(state) in said and "delete it" in said, said


def test_stop_keep_data_then_restart_keeps_durable_messages(tmp_path: Path) -> None:
    state = tmp_path / "broker.json"
    started = flowdeck(state, "start")
    assert started.returncode == 0, started.stderr
    try:
        url = re.search(r"management\s+(http://\S+)", started.stdout)
        node = re.search(r"^node\s+(\S+)", started.stdout, re.MULTILINE)
        assert url and node, started.stdout
        api = httpx.Client(base_url=url.group(1), auth=("guest", "guest"), timeout=10)
        assert api.put("/api/queues/%2F/kept", json={"durable": True}).status_code == 201
        for n in range(5):
            message = {
                "properties": {"delivery_mode": 2},
                "routing_key": "kept",
                "payload": f"message {n}",
                "payload_encoding": "string",
            }
            published = api.post("/api/exchanges/%2F/amq.default/publish", json=message)
            assert published.json() == {"routed": True}

        stopped = flowdeck(state, "stop", "--keep-data")
        assert stopped.returncode == 0, stopped.stderr
        assert "restart" in stopped.stdout
        status = flowdeck(state, "status")
        assert status.returncode == 1 and "stopped" in status.stdout, status.stdout
        # `start` does not silently make a new node beside the kept one
        again = flowdeck(state, "start")
        assert again.returncode == 1 and "flowdeck broker restart" in one_line_error(again)
        wrong = flowdeck(state, "restart", "someone-else")
        assert wrong.returncode == 2, wrong.stderr

        restarted = flowdeck(state, "restart", node.group(1).split("@")[0])
        assert restarted.returncode == 0, restarted.stderr
        assert f"node        {node.group(1)}" in restarted.stdout
        assert f"management  {url.group(1)}" in restarted.stdout  # same ports
        got = api.post(
            "/api/queues/%2F/kept/get",
            json={"count": 10, "ackmode": "ack_requeue_true", "encoding": "auto"},
        )
        assert [m["payload"] for m in got.json()] == [f"message {n}" for n in range(5)]
    finally:
        final = flowdeck(state, "stop")
    assert final.returncode == 0, final.stderr
    assert not state.exists() and not state.with_suffix(".data").exists()
