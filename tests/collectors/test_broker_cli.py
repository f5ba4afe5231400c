"""`flowdeck broker` from a shell: start a private node, raise and clear alarms, stop it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tui.cli.broker import started_node_for

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(240)]


def flowdeck(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLOWDECK_BROKER_STATE": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", "broker", *args],
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
    started = flowdeck(state, "start")
    try:
        assert started.returncode == 0, started.stderr
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
