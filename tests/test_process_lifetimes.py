"""Nothing outlives a flowdeck process, however it dies.

``kill -9`` of ``flowdeck run`` or of the cockpit leaves no worker process publishing on and
no private RabbitMQ node behind: workers leave when their command pipe closes (and, on
Linux, by PR_SET_PDEATHSIG), a node's guard stops it when its owner's pipe closes. Each
test finds the processes before the kill (psutil) and polls until they are gone.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import aio_pika
import psutil
import pytest

from flowdeck.engine.process import DEFAULT_RUNTIME, ProcessWorker
from flowdeck.engine.spec import RunSpec

#: How long after the kill every worker and node process must be gone. Workers leave at
#: once (pipe EOF) and a throwaway node is SIGKILLed by its guard; a bound, not a speed
#: target: on a fresh-clone CI run under load the node's launcher and VM were still there
#: 10.1 s after the cockpit's kill -9 (the guard itself waits for a core).
GONE_WITHIN = 30.0
FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]


def alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (an orphan's zombie waits for a reaper that may never come)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def descendants(pid: int) -> list[tuple[psutil.Process, str]]:
    """Every live descendant of ``pid``, with its command line."""
    found = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    for child in children:
        try:
            found.append((child, " ".join(child.cmdline())))
        except psutil.Error:
            continue
    return found


def is_worker(command: str) -> bool:
    return "multiprocessing.spawn" in command


def is_beam(proc: psutil.Process) -> bool:
    try:
        return proc.name().startswith("beam")
    except psutil.Error:
        return False


def wait_for_processes(
    pid: int, ready: Callable[[list[tuple[psutil.Process, str]]], bool], seconds: float
) -> list[tuple[psutil.Process, str]]:
    deadline = time.monotonic() + seconds
    while True:
        found = descendants(pid)
        if ready(found):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"processes never showed within {seconds} s: {found}")
        time.sleep(0.3)


def left_after(procs: list[psutil.Process], seconds: float) -> tuple[list[psutil.Process], float]:
    """The processes still alive after polling up to ``seconds``, and how long it took."""
    began = time.monotonic()
    while any(alive(p) for p in procs) and time.monotonic() - began < seconds:
        time.sleep(0.1)
    return [p for p in procs if alive(p)], time.monotonic() - began


@pytest.fixture
def killed_at_end() -> Iterator[list[psutil.Process]]:
    """Processes a failed test would otherwise leave behind: SIGKILLed at its end."""
    procs: list[psutil.Process] = []
    yield procs
    for proc in procs:
        if alive(proc):
            proc.kill()


def node_dir(found: list[tuple[psutil.Process, str]]) -> Path:
    """The private node's data directory: the start script runs in it."""
    for proc, command in found:
        if "rabbitmq-server" in command:
            return Path(proc.cwd())
    raise AssertionError(f"no rabbitmq-server among {found}")


def start_run(log: IO[str], unique_name: str, *flags: str) -> subprocess.Popen[bytes]:
    """``flowdeck run`` of one queue and one worker process for 60 s, unrecorded, with
    ``flags`` added; its output goes to ``log``. No FLOWDECK_URI: without ``--uri`` the run
    starts a private node of its own."""
    env = {k: v for k, v in os.environ.items() if k != "FLOWDECK_URI"}
    return subprocess.Popen(
        [
            *FLOWDECK,
            "run",
            *flags,
            "--queues=1",
            "--publishers=1",
            "--duration=60s",
            "--workers=1",
            f"--queue-pattern={unique_name}-%d",
            "--no-record",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )


@pytest.mark.private_broker
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_kill_9_of_run_leaves_no_worker_and_no_private_node(
    tmp_path: Path, unique_name: str, killed_at_end: list[psutil.Process]
) -> None:
    log = (tmp_path / "run.log").open("w")
    run = start_run(log, unique_name, "--consumers=1", "--rate=50")
    try:
        found = wait_for_processes(
            run.pid,
            lambda f: any(is_worker(c) for _, c in f) and any(is_beam(p) for p, _ in f),
            150,
        )
        killed_at_end.extend(p for p, _ in found)
        data = node_dir(found)
        beams = [p for p, _ in found if is_beam(p)]
        workers = [p for p, c in found if is_worker(c)]
        assert beams and workers and data.is_dir()
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        log.close()
    left, took = left_after([p for p, _ in found], GONE_WITHIN)
    assert left == [], f"still running {took:.1f} s after kill -9: {left}"
    print(f"\nworkers and node gone {took:.1f} s after kill -9 of flowdeck run")
    deadline = time.monotonic() + GONE_WITHIN
    while data.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not data.exists(), f"the throwaway node's data {data} was left behind"


async def queue_depth(uri: str, queue: str) -> int:
    connection = await aio_pika.connect(uri)
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        count = declared.declaration_result.message_count
        assert count is not None
        return int(count)


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kill_9_of_run_on_shared_broker_stops_its_publishers(
    tmp_path: Path, shared_uri: str, unique_name: str, killed_at_end: list[psutil.Process]
) -> None:
    queue = f"{unique_name}-1"
    log = (tmp_path / "run.log").open("w")
    run = start_run(log, unique_name, f"--uri={shared_uri}", "--consumers=0", "--rate=100")
    try:
        found = wait_for_processes(run.pid, lambda f: any(is_worker(c) for _, c in f), 90)
        killed_at_end.extend(p for p, _ in found)
        deadline = time.monotonic() + 60
        depth = 0
        while depth < 50:  # publishing for a while: the queue fills (no consumers)
            assert time.monotonic() < deadline, (tmp_path / "run.log").read_text()[-2000:]
            time.sleep(0.5)
            try:
                depth = asyncio.run(queue_depth(shared_uri, queue))
            except aio_pika.exceptions.ChannelNotFoundEntity:
                depth = 0  # not declared yet
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        log.close()
    workers = [p for p, c in found if is_worker(c)]
    left, took = left_after(workers, GONE_WITHIN)
    assert left == [], f"workers still running {took:.1f} s after kill -9: {left}"
    print(f"\nworkers gone {took:.1f} s after kill -9 of flowdeck run")
    # What the dead worker had sent is routed by now; nothing is published after it.
    time.sleep(1.0)
    after_kill = asyncio.run(queue_depth(shared_uri, queue))
    time.sleep(3.0)
    later = asyncio.run(queue_depth(shared_uri, queue))
    assert later == after_kill, f"the queue still grows after the kill: {after_kill} -> {later}"
    print(f"queue depth {after_kill} 1 s after and {later} 4 s after the workers were gone")


def tmux_pane_pid(session: str) -> int:
    shown = subprocess.run(
        ["tmux", "display-message", "-p", "-t", session, "#{pane_pid}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(shown.stdout.strip())


def cockpit_process(pane: int) -> psutil.Process:
    """The flowdeck process in the pane: the pane's own (env execs it) or a child's."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        candidates = [(psutil.Process(pane), ""), *descendants(pane)]
        for proc, _ in candidates:
            try:
                command = " ".join(proc.cmdline())
            except psutil.Error:
                continue
            if "cockpit" in command and "python" in command:
                return proc
        time.sleep(0.2)
    raise AssertionError(f"no cockpit process under tmux pane {pane}")


@pytest.mark.private_broker
@pytest.mark.slow
@pytest.mark.tmux
@pytest.mark.timeout(240)
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_kill_9_of_cockpit_leaves_no_worker_and_no_private_node(
    tmp_path: Path, unique_name: str, killed_at_end: list[psutil.Process]
) -> None:
    import tomli_w

    spec = RunSpec(
        name="lifetime",
        uri="",  # the cockpit starts a private node
        queues=1,
        queue_pattern=f"{unique_name}-%d",
        durable=False,
        publishers=1,
        rate=50.0,
        consumers=1,
        duration=60.0,
        workers=1,
    )
    values = {k: v for k, v in spec.to_mapping().items() if k not in ("schedule", "queue_args")}
    spec_file = tmp_path / "run.toml"
    spec_file.write_text(tomli_w.dumps(values))
    flowdeck = Path(sys.executable).parent / "flowdeck"
    session = f"flowdeck-{unique_name}"
    command = (
        f"env -u COLUMNS -u LINES -u FLOWDECK_URI FLOWDECK_SESSIONS_DIR={tmp_path / 'sessions'} "
        f"{flowdeck} cockpit --spec {spec_file} --launch"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command], check=True
    )
    try:
        app = cockpit_process(tmux_pane_pid(session))
        found = wait_for_processes(
            app.pid,
            lambda f: any(is_worker(c) for _, c in f) and any(is_beam(p) for p, _ in f),
            150,
        )
        killed_at_end.extend(p for p, _ in found)
        data = node_dir(found)
        app.kill()
        left, took = left_after([p for p, _ in found], GONE_WITHIN)
        assert left == [], f"still running {took:.1f} s after kill -9 of the cockpit: {left}"
        print(f"\nworkers and node gone {took:.1f} s after kill -9 of the cockpit")
        deadline = time.monotonic() + GONE_WITHIN
        while data.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not data.exists(), f"the throwaway node's data {data} was left behind"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def test_worker_reader_ends_quietly_when_the_controllers_loop_has_closed() -> None:
    """A run that ends without waiting for its workers (the loop closes first) prints no
    ``Exception in thread ... Event loop is closed`` when a worker ends afterwards."""
    raised: list[threading.ExceptHookArgs] = []
    previous = threading.excepthook
    threading.excepthook = raised.append

    async def spawn() -> ProcessWorker:
        return ProcessWorker(0, DEFAULT_RUNTIME, lambda message: None)

    try:
        host = asyncio.run(spawn())  # the loop is closed from here on
        deadline = time.monotonic() + 60
        while host.pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
        host.kill()
        host._reader.join(30)
        assert not host._reader.is_alive()
    finally:
        threading.excepthook = previous
    assert [str(r.exc_value) for r in raised] == []
