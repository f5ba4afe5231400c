"""`flowdeck broker start --nodes 3` (with broker settings, `--set`), then one node lost
and brought back (`kill`, `start`, `restart`, `stop NODE`), and `stop` leaving nothing
running.

One cluster for the module (a start costs tens of seconds on 2 cores); the tests run in
file order on it and the last one stops it. The refusals need no cluster and come first.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from flowdeck.cli import main
from flowdeck.collectors import Broker, LocalCluster, load_state
from flowdeck.engine import matrix
from flowdeck.engine.provision import STATE_ENV
from tests.private_nodes import cluster_vms

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]


@dataclass(frozen=True)
class Said:
    """What one `flowdeck broker ...` printed and its exit code."""

    returncode: int
    stdout: str
    stderr: str


def flowdeck(state: Path, *args: str) -> Said:
    """`flowdeck broker ARGS` as the shell runs it, in this process: the command's own
    start-up costs seconds on a busy 2-core machine, and every test here makes several."""
    return in_process(state, ["broker", *args])


def flowdeck_run(state: Path, *args: str) -> Said:
    """`flowdeck run ARGS` in this process, with the cluster's state file where the run
    looks for the node it is given (its management URL)."""
    return in_process(state, ["run", *args])


def in_process(state: Path, words: list[str]) -> Said:
    out, err = io.StringIO(), io.StringIO()
    before = os.environ.get(STATE_ENV)
    os.environ[STATE_ENV] = str(state)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(words)
    finally:
        if before is None:
            del os.environ[STATE_ENV]
        else:
            os.environ[STATE_ENV] = before
    return Said(code, out.getvalue(), err.getvalue())


def one_line_error(done: Said) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def node_lines(output: str) -> dict[int, tuple[str, str]]:
    """Node number -> (up or DOWN, node name), from the cluster's table."""
    return {
        int(number): (state, name)
        for number, state, name in re.findall(r"^\s+(\d)\s+(up|DOWN)\s+(\S+)", output, re.M)
    }


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the cluster's state goes; whatever is left of it is stopped at the end."""
    path = tmp_path_factory.mktemp("cluster-cli") / "broker.json"
    yield path
    if path.exists():
        flowdeck(path, "stop")


@pytest.fixture(scope="module")
def started(state: Path) -> Said:
    began = time.monotonic()
    done = flowdeck(
        state,
        "start",
        "--nodes",
        "3",
        "--set",
        "credit_flow_default_credit=100,50",
        "--set",
        "rabbit.quorum_commands_soft_limit=64",
    )
    print(f"\nbroker start --nodes 3 took {time.monotonic() - began:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_node_commands_without_a_cluster_are_refused(tmp_path: Path) -> None:
    state = tmp_path / "broker.json"
    for args in (("kill", "2"), ("start", "2"), ("stop", "2"), ("restart", "2")):
        done = flowdeck(state, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "no private cluster is running" in one_line_error(done), args
    for args in (
        ("--nodes", "0"),
        ("--nodes", "3", "--amqp-port", "41000"),
        ("--nodes", "3", "--set", "heartbeat=5"),
        ("--set", "credit_flow_default_credit=7"),
    ):
        done = flowdeck(state, "start", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        one_line_error(done)
    assert not state.exists()


def test_start_prints_every_node_and_status_shows_them_up(started: Said, state: Path) -> None:
    nodes = node_lines(started.stdout)
    assert sorted(nodes) == [1, 2, 3] and {s for s, _ in nodes.values()} == {"up"}
    status = flowdeck(state, "status")
    assert status.returncode == 0, status.stderr
    assert node_lines(status.stdout) == nodes
    assert "owned by you" in status.stdout
    cluster = re.search(r"^cluster\s+(\S+):", status.stdout, re.M)
    assert cluster and len(cluster_vms(cluster.group(1))) == 3


def test_the_printed_uri_names_every_node_and_runs_a_matrix_there(
    started: Said, state: Path, tmp_path: Path
) -> None:
    """The `uri` line of `start --nodes 3` is the one --uri value of all three nodes (and
    `broker uris` prints it alone); given to `run --matrix`, every run of the benchmark
    ends on the cluster, each recorded, and the matrix names its sessions and the report
    command over them."""
    value = re.search(r"^uri\s+(\S+)$", started.stdout, re.M)
    assert value, started.stdout
    ports = [int(p) for p in re.findall(r"^\s+\d\s+up\s+\S+\s+amqp (\d+)", started.stdout, re.M)]
    assert [node.port for node in Broker.parse(value.group(1)).nodes] == ports
    assert len(ports) == 3
    alone = flowdeck(state, "uris")
    assert alone.returncode == 0 and alone.stdout == value.group(1) + "\n"

    sessions = tmp_path / "sessions"
    ran = flowdeck_run(
        state,
        "--matrix", "bench1", "--scale", "0.05", "--rate", "50", "--step", "1s",
        "--uri", value.group(1), "--workers", "0", "--drain", "1", "--cleanup",
        "--sessions-dir", str(sessions),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert re.search(r"broker amqp://guest:\*\*\*@127\.0\.0\.1:\d+/%2F,.+,", ran.stdout)
    recorded = sorted(path.name for path in sessions.iterdir())
    assert len(recorded) == len(matrix("bench1")) == 4
    listed = re.search(r"^matrix bench1: 4 session\(s\)\n((?:  \S+\n){4})", ran.stdout, re.M)
    assert listed and sorted(listed.group(1).split()) == recorded
    report = re.search(r"^report: (flowdeck report .+)$", ran.stdout, re.M)
    assert report, ran.stdout
    words = shlex.split(report.group(1))
    assert words[2:6] == listed.group(1).split() and "--out" in words
    assert words[words.index("--sessions-dir") + 1] == str(sessions)


SETTINGS = "credit_flow_default_credit={100,50}, quorum_commands_soft_limit=64"


def settings_on(state: Path, number: int) -> tuple[str, str]:
    """Node ``number``'s credit flow credit and quorum soft limit, as the node has them."""
    cluster = LocalCluster.attach(load_state(state))
    node = cluster.nodes[number - 1]
    return tuple(  # type: ignore[return-value]
        "".join(node.rabbitmqctl("eval", f"application:get_env(rabbit, {key}).").split())
        for key in ("credit_flow_default_credit", "quorum_commands_soft_limit")
    )


def test_every_node_starts_with_the_broker_settings(started: Said, state: Path) -> None:
    assert f"settings    {SETTINGS}" in started.stdout, started.stdout
    for number in (1, 2, 3):
        assert settings_on(state, number) == ("{ok,{100,50}}", "{ok,64}")


def test_an_unknown_node_is_refused(started: Said, state: Path) -> None:
    for action in ("kill", "stop", "start", "restart"):
        done = flowdeck(state, action, "7")
        assert done.returncode == 2, (action, done.stdout, done.stderr)
        said = one_line_error(done)
        assert "no node '7'" in said and "n1@localhost" in said, said


def management_running(url: str, node: str, want: bool, bound: float = 60.0) -> bool:
    """Whether the management API lists ``node`` as running, read until it says ``want`` or
    ``bound`` seconds pass: the surviving nodes see a killed node go at once, but their
    database marks it down a moment later (a busy CI machine read it still running just
    after the kill)."""
    give_up = time.monotonic() + bound
    while True:
        listed = httpx.get(
            f"{url}/api/nodes",
            params={"columns": "name,running"},
            auth=("guest", "guest"),
            timeout=10,
        ).json()
        running = {n["name"]: n["running"] for n in listed}[node]
        if running is want or time.monotonic() > give_up:
            return running
        time.sleep(0.5)


def test_kill_then_start_one_node(started: Said, state: Path) -> None:
    killed = flowdeck(state, "kill", "2")
    assert killed.returncode == 0, killed.stderr
    assert "killed" in killed.stdout and "SIGKILL" in killed.stdout
    status = flowdeck(state, "status")
    nodes = node_lines(status.stdout)
    assert [nodes[n][0] for n in (1, 2, 3)] == ["up", "DOWN", "up"], status.stdout
    management = re.search(r"management\s+(http://\S+)", status.stdout)
    assert management
    assert management_running(management.group(1), nodes[2][1], want=False) is False

    back = flowdeck(state, "start", "n2")
    assert back.returncode == 0, back.stderr
    assert "rejoined" in back.stdout
    assert [s for s, _ in node_lines(back.stdout).values()] == ["up", "up", "up"]


def test_restart_and_stop_one_node(started: Said, state: Path) -> None:
    name = node_lines(started.stdout)[3][1]
    restarted = flowdeck(state, "restart", name.split("@")[0])
    assert restarted.returncode == 0, restarted.stderr
    assert [s for s, _ in node_lines(restarted.stdout).values()] == ["up", "up", "up"]
    assert settings_on(state, 3) == ("{ok,{100,50}}", "{ok,64}")  # kept over a restart
    stopped = flowdeck(state, "stop", "3")
    assert stopped.returncode == 0, stopped.stderr
    assert [s for s, _ in node_lines(stopped.stdout).values()] == ["up", "up", "DOWN"]


def test_stop_leaves_nothing_running(started: Said, state: Path) -> None:
    cluster = re.search(r"^cluster\s+(\S+):", started.stdout, re.M)
    data = re.search(r"^data\s+(\S+)", started.stdout, re.M)
    assert cluster and data
    stopped = flowdeck(state, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped {cluster.group(1)}" in stopped.stdout
    assert cluster_vms(cluster.group(1)) == []
    assert not Path(data.group(1)).exists() and not state.exists()
    assert flowdeck(state, "status").returncode == 1
