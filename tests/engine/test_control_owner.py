"""The control plane answers only its owner: a runs directory of the user's own, steer
with no run named only on a run of the same sessions directory, a server that closes
connections which never send a request, and many changes in one request.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from flowdeck.engine.control import running_runs, runs_dir
from flowdeck.engine.control.registry import RunEntry, UnsafeRunsDir, check_runs_dir
from flowdeck.engine.control.server import HEADER_TIMEOUT, MAX_CONNECTIONS
from tests.engine.test_control_api import SteeredRun, end_run, start_steerable_run

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]


def flowdeck(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "FLOWDECK_URI": "", **env},
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# -- the runs directory ----------------------------------------------------------------------


def test_the_runs_directory_is_never_a_shared_tmp_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("FLOWDECK_RUNS_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert runs_dir() == tmp_path / ".local/state/flowdeck/runs"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert runs_dir() == tmp_path / "run/flowdeck/runs"
    made = check_runs_dir()
    assert made.stat().st_mode & 0o777 == 0o700


def test_a_symlinked_foreign_or_open_runs_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafeRunsDir, match="is a symlink"):
        check_runs_dir(link)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(UnsafeRunsDir, match=r"is open to other users \(mode 0777\); chmod 700"):
        check_runs_dir(open_dir)
    if os.geteuid() == 0:  # only root can give a directory to another user
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o700)
        os.chown(foreign, 65534, 65534)
        with pytest.raises(UnsafeRunsDir, match=r"belongs to another user \(uid 65534\)"):
            check_runs_dir(foreign)


def test_the_command_line_refuses_a_planted_runs_directory_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    planted = tmp_path / "runs"
    planted.symlink_to(target)
    for args in (["runs"], ["steer", "inflight=200"], ["run", "--duration", "5"]):
        result = flowdeck(*args, FLOWDECK_RUNS_DIR=str(planted))
        assert result.returncode == 2, (args, result.stderr)
        assert one_line(result) == (
            f"flowdeck: the runs directory {planted} is a symlink; flowdeck lists runs only in "
            "a directory of its user's own (remove it, or set $FLOWDECK_RUNS_DIR)"
        )
    assert not any(target.iterdir())


def test_an_entry_file_of_another_user_or_a_fifo_is_no_run(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    check_runs_dir(folder)
    os.mkfifo(folder / "fifo.json")  # read at once, never blocks
    if os.geteuid() == 0:
        me = os.getpid()
        planted = folder / "planted.json"
        entry = RunEntry("planted", "p", time.time(), "http://127.0.0.1:1", "t", me, 0.0)
        planted.write_text(str(entry.to_json()).replace("'", '"'))
        os.chown(planted, 65534, 65534)
    started = time.monotonic()
    assert running_runs(folder) == []
    assert time.monotonic() - started < 5


# -- two runs going: steer with no run named ------------------------------------------------


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SteeredRun, SteeredRun]]:
    tmp = tmp_path_factory.mktemp("owner")
    runs = tmp / "runs"
    started: list[SteeredRun] = []
    try:
        for name in ("a", "b"):
            sessions = tmp / f"sessions-{name}"
            started.append(
                start_steerable_run(
                    tmp,
                    f"flowdeck-test-owner-{name}-{os.getpid()}",
                    extra=("--sessions-dir", str(sessions)),
                    runs=runs,
                )
            )
        yield started[0], started[1]
    finally:
        for run in started:
            end_run(run)


def in_force(run: SteeredRun) -> dict[str, int]:
    with run.api() as api:
        settings: dict[str, int] = api.get("/status").json()["settings"]["in_force"]
    return settings


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(240)
def test_steer_without_a_run_acts_only_on_the_run_of_its_own_sessions_directory(
    two_runs: tuple[SteeredRun, SteeredRun], tmp_path: Path
) -> None:
    a, b = two_runs
    sessions_a = a.entry.sessions_root
    assert sessions_a.endswith("sessions-a") and b.entry.sessions_root.endswith("sessions-b")
    runs = str(a.runs_dir)
    steered = flowdeck(
        "steer", "inflight=211", FLOWDECK_RUNS_DIR=runs, FLOWDECK_SESSIONS_DIR=sessions_a
    )
    assert steered.returncode == 0, steered.stderr
    assert steered.stdout.startswith("inflight=211 in force after")
    assert in_force(a)["inflight"] == 211
    assert in_force(b)["inflight"] == 50  # the other checkout's run is left alone

    # From a sessions directory of neither: both listed, one asked for, nothing changed.
    elsewhere = str(tmp_path / "sessions-c")
    refused = flowdeck(
        "steer", "inflight=99", FLOWDECK_RUNS_DIR=runs, FLOWDECK_SESSIONS_DIR=elsewhere
    )
    assert refused.returncode == 2, refused.stderr
    line = one_line(refused)
    assert line.startswith("flowdeck: 2 run(s) going on, 0 of them started from this sessions ")
    assert a.entry.run_id in line and b.entry.run_id in line and "name one" in line
    assert (in_force(a)["inflight"], in_force(b)["inflight"]) == (211, 50)
    # Named, either run is steered from anywhere.
    named = flowdeck(
        "steer", b.entry.run_id, "inflight=99", FLOWDECK_RUNS_DIR=runs,
        FLOWDECK_SESSIONS_DIR=elsewhere,
    )  # fmt: skip
    assert named.returncode == 0, named.stderr
    assert in_force(b)["inflight"] == 99


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_many_changes_go_in_one_request_and_each_says_when_it_was_in_force(
    two_runs: tuple[SteeredRun, SteeredRun],
) -> None:
    a, _ = two_runs
    with a.api() as api:
        answer = api.post("/changes", json={"changes": ["prefetch=21", "rate=90", "inflight=60"]})
        assert answer.status_code == 200, answer.text
        states = answer.json()["changes"]
        assert [s["change"] for s in states] == ["prefetch=21", "rate=90", "inflight=60"]
        assert all(s["in_force"] for s in states)
        ids = [s["id"] for s in states]
        assert ids == sorted(ids) and len(set(ids)) == 3
        # One bad change refuses the request before any is asked.
        refused = api.post("/changes", json={"changes": ["prefetch=22", "speed=3"]})
        assert refused.status_code == 400 and "speed" in refused.json()["error"]
        assert api.get("/status").json()["settings"]["in_force"]["prefetch"] == 21
    steered = flowdeck(
        "steer", a.entry.run_id, "prefetch=23", "rate=95", FLOWDECK_RUNS_DIR=str(a.runs_dir)
    )
    assert steered.returncode == 0, steered.stderr
    assert [line.split()[0] for line in steered.stdout.splitlines()] == ["prefetch=23", "rate=95"]


# -- slow clients ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(180)
def test_slow_loris_connections_are_closed_and_a_normal_request_still_answers(
    two_runs: tuple[SteeredRun, SteeredRun],
) -> None:
    """More connections than the cap, each sending part of a request's headers and then
    nothing: the server makes room by closing the oldest idle ones, answers a normal
    request meanwhile, and closes every one within its header timeout."""
    a, _ = two_runs
    address = urlsplit(a.entry.url)
    host, port = address.hostname or "127.0.0.1", address.port or 80
    lorises = []
    for _ in range(MAX_CONNECTIONS + 8):
        loris = socket.create_connection((host, port), timeout=10)
        loris.sendall(b"GET /status HTTP/1.1\r\nHost: flowdeck\r\nX-Slow: ")
        lorises.append(loris)
    opened = time.monotonic()
    with a.api() as api:
        answer = api.get("/status")
    assert answer.status_code == 200 and answer.json()["state"] == "running"

    # Every loris is closed by the server: at once (the cap) or after the header timeout.
    closed_after: list[float] = []
    for loris in lorises:
        loris.settimeout(HEADER_TIMEOUT + 30)  # generous: a busy machine
        try:
            data = loris.recv(4096)
        except (ConnectionResetError, TimeoutError):
            data = b"" if not isinstance(sys.exc_info()[1], TimeoutError) else b"open"
        assert data in (b"", b"open") or data.startswith(b"HTTP/1.1 "), data
        assert data != b"open", "a slow connection stayed open past the header timeout"
        closed_after.append(time.monotonic() - opened)
        loris.close()
    print(
        f"\n{len(lorises)} slow connections, the last closed after {max(closed_after):.1f} s "
        f"(header timeout {HEADER_TIMEOUT:g} s, cap {MAX_CONNECTIONS})"
    )
    assert max(closed_after) < HEADER_TIMEOUT + 30
    with httpx.Client(base_url=a.entry.url, headers=a.auth, timeout=10) as http:
        assert http.get("/status").status_code == 200
