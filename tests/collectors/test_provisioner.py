"""The provisioner: nodes registered for `flowdeck broker status` with their owner, and
private servers (nodes, Prometheus) that never outlive the process that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]

#: Another flowdeck process: starts what it is told, prints the pid to watch, waits.
OWNER = """
import sys, time
from flowdeck.collectors import Provisioner
provisioner = Provisioner(name="flowdeck-owner")
if sys.argv[1] == "node":
    print(provisioner.node().pid, flush=True)
else:
    server = provisioner.prometheus([], scrape_timeout=5)
    print(server._process.pid, flush=True)
time.sleep(600)
"""


def start_owner(what: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, what],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert owner.stdout is not None
    line = owner.stdout.readline()
    assert line.strip().isdigit(), f"the owner said {line!r}"
    return owner, int(line)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.2)
    return gone(pid)


def test_status_lists_a_node_another_process_owns(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "FLOWDECK_RUNTIME_DIR": str(tmp_path / "runtime"),
        "FLOWDECK_BROKER_STATE": str(tmp_path / "broker.json"),
    }
    owner, node_pid = start_owner("node", env)
    try:
        status = subprocess.run(
            [sys.executable, "-m", "flowdeck.cli", "broker", "status"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            cwd=ROOT,
        )
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"owned by pid {owner.pid}: " in status.stdout, status.stdout
        assert "flowdeck-owner-" in status.stdout and "-c" in status.stdout, status.stdout
        assert "uri         amqp://guest:guest@127.0.0.1:" in status.stdout
    finally:
        owner.kill()
        owner.wait()
    # the owner died by SIGKILL: its guard takes the node down, and status forgets it
    assert wait_gone(node_pid, 30), "the node outlived its owner"
    after = subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", "broker", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )
    assert after.returncode == 1, after.stdout
    assert "no private node is running" in after.stdout
    assert list((tmp_path / "runtime").glob("*.json")) == []


def test_prometheus_server_dies_with_its_owner(tmp_path: Path) -> None:
    env = {**os.environ, "FLOWDECK_RUNTIME_DIR": str(tmp_path / "runtime")}
    owner, prometheus_pid = start_owner("prometheus", env)
    base_dir = Path(psutil.Process(prometheus_pid).cwd())
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert wait_gone(prometheus_pid, 10), "the Prometheus server outlived its owner by 10 s"
    deadline = time.monotonic() + 10
    while base_dir.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not base_dir.exists(), f"its throwaway directory {base_dir} stayed"
