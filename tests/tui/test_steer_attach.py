"""``flowdeck runs``, ``steer`` and ``attach`` from other shells against a headless run.

One headless ``flowdeck run`` (its endpoint listed in a runs directory of the test's own)
serves the module: ``runs`` lists it, ``steer`` changes it and says when each change is in
force, and ``attach`` opens the cockpit on it in tmux, steers it with the cockpit's keys and
detaches, leaving the run going.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdeck.cli import main
from tests.engine.test_control_api import SteeredRun, end_run, start_steerable_run
from tests.tui.test_real_run import capture, wait_screen

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SteeredRun]:
    tmp = tmp_path_factory.mktemp("steer")
    steered = start_steerable_run(tmp, f"flowdeck-test-steer-{os.getpid()}")
    yield steered
    end_run(steered)


def flowdeck(run: SteeredRun, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLOWDECK_RUNS_DIR": str(run.runs_dir)}
    return subprocess.run([*FLOWDECK, *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.broker
@pytest.mark.timeout(120)
def test_runs_lists_the_run_and_steer_says_when_changes_are_in_force(
    run: SteeredRun, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this process (the same command line, no interpreter start on a loaded machine).
    monkeypatch.setenv("FLOWDECK_RUNS_DIR", str(run.runs_dir))
    assert main(["runs"]) == 0
    listed = capsys.readouterr().out
    assert main(["steer", run.entry.url, "--token", "wrong", "rate=100"]) == 2
    refused = capsys.readouterr()
    header, row = listed.splitlines()
    assert header.split() == ["id", "name", "started", "endpoint", "pid"]
    assert row.split()[0] == run.entry.run_id and run.entry.url in row
    assert row.split()[-1] == str(run.process.pid)
    # A refusal of the endpoint is one line, exit 2.
    assert refused.out == "" and refused.err == "flowdeck: rate=100: wrong token for this run\n"

    # By a prefix of the run's id (attach below finds it as the only run going on).
    steered = flowdeck(run, "steer", run.entry.run_id[:8], "inflight=120", "prefetch=15")
    assert steered.returncode == 0, steered.stderr
    lines = steered.stdout.splitlines()
    assert len(lines) == 2, steered.stdout
    assert re.fullmatch(r"inflight=120 in force after \d+ ms", lines[0])
    assert re.fullmatch(r"prefetch=15 in force after \d+ ms", lines[1])
    print(f"\n{steered.stdout.strip()}")

    # By URL, the token from the run's endpoint file, options after the URL.
    entry_file = run.runs_dir / f"{run.entry.run_id}.json"
    by_url = flowdeck(run, "steer", run.entry.url, "--token-file", str(entry_file), "rate=150")
    assert by_url.returncode == 0, by_url.stderr
    assert by_url.stdout.startswith("rate=150 in force after")

    with run.api() as api:
        in_force = api.get("/status").json()["settings"]["in_force"]
    assert (in_force["inflight"], in_force["prefetch"], in_force["rate"]) == (120, 15, 150)


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.tmux
@pytest.mark.timeout(150)
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_attach_steers_with_the_cockpit_keys_and_detach_leaves_the_run_going(
    run: SteeredRun, tmp_path: Path
) -> None:
    flowdeck_bin = Path(sys.executable).parent / "flowdeck"
    session = f"flowdeck-attach-{os.getpid()}"
    command = (
        f"env -u COLUMNS -u LINES FLOWDECK_RUNS_DIR={run.runs_dir} "
        f"{flowdeck_bin} attach; echo attach exited $?; sleep 60"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command], check=True
    )
    try:
        # The dashboard fills from the run's past ticks and goes on with its live ones.
        wait_screen(session, lambda s: "msg/s" in s and "phase" in s and "in-flight" in s, 60)
        subprocess.run(["tmux", "send-keys", "-t", session, "="], check=True)
        wait_screen(session, lambda s: "Change (inflight=200" in s, 15)
        subprocess.run(["tmux", "send-keys", "-t", session, "inflight=77", "Enter"], check=True)
        shown = wait_screen(session, lambda s: "in-flight 77 " in s, 30)
        assert "inflight=77" in shown  # the event log has the change
        with run.api() as api:
            assert api.get("/status").json()["settings"]["in_force"]["inflight"] == 77

        subprocess.run(["tmux", "send-keys", "-t", session, "C-q"], check=True)
        left = wait_screen(session, lambda s: "attach exited" in s, 30)
        assert "detached from run" in left and "attach exited 0" in left
        time.sleep(1.5)
        assert run.process.poll() is None, "detaching ended the run"
        with run.api() as api:
            status = api.get("/status").json()
        assert status["state"] == "running"
    finally:
        print(capture(session)[-2000:] if shutil.which("tmux") else "")
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
