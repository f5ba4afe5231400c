"""Every value `flowdeck` accepts is one it can run: bad ones are one line and exit 2 before
anything is declared on a broker, and a run that fails to start leaves nothing behind.

Queues are counted on the shared broker through its management API, by name: other tests
declare queues of their own at the same time, so only the names a run would use (or the
server-named ``amq.gen-`` queues an empty pattern would have made) are compared.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aio_pika
import httpx
import pytest

from tests.conftest import SHARED_MANAGEMENT_URL, SHARED_URI

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]
RUN = ["run", "--uri", SHARED_URI, "--duration", "3", "--rate", "20", "--workers", "0"]


def flowdeck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": "", **(env or {})},
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def queue_names(prefix: str) -> set[str]:
    """The shared broker's queues whose names start with ``prefix`` (durable ones for the
    server-named ``amq.gen-``: a client library's own reply queues are exclusive)."""
    with httpx.Client(auth=("guest", "guest"), timeout=10) as api:
        queues = api.get(f"{SHARED_MANAGEMENT_URL}/api/queues/%2F?columns=name,durable").json()
    return {q["name"] for q in queues if q["name"].startswith(prefix) and q["durable"]}


def settled_queue_names(prefix: str) -> set[str]:
    """:func:`queue_names`, read until two reads a second apart agree (the management API
    lists a queue a moment after it is declared or deleted)."""
    last = queue_names(prefix)
    for _ in range(10):
        time.sleep(1.0)
        now = queue_names(prefix)
        if now == last:
            return now
        last = now
    return last


@pytest.mark.broker
@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--queue-pattern", ""], "queue_pattern must name the queues, got ''"),
        (["--queue-pattern", "  "], "queue_pattern must name the queues, got '  '"),
        (["--drain=-5"], "drain must be seconds like 30, 30s, 5m or 1h, got '-5'"),
        (["--drain", "1e12"], "drain must be seconds like 30, 30s, 5m or 1h, got '1e12'"),
        (["--drain", "100000"], "drain must be 0..86400 s (a day), got 100000"),
        (["--duration", "99999999"], "duration must be 1..604800 s, got 99999999"),
        (["--duration=-5"], "duration must be seconds like 30, 30s, 5m or 1h, got '-5'"),
        (["--ca-file", "/dev/zero"], "CA file /dev/zero is not a regular file"),
        (["--password-file", "/dev/zero"], "password file /dev/zero is not a regular file"),
    ],
    ids=[
        "empty queue pattern",
        "blank queue pattern",
        "negative drain",
        "drain of 1e12",
        "drain over a day",
        "duration over a week",
        "negative duration",
        "CA file on a device",
        "password file on a device",
    ],
)
def test_a_bad_value_is_refused_before_anything_is_declared(
    args: list[str], says: str, unique_name: str
) -> None:
    before = settled_queue_names("amq.gen-")
    pattern = [] if "--queue-pattern" in args else ["--queue-pattern", f"{unique_name}-%d"]
    uri = ["--uri", SHARED_URI.replace("amqp:", "amqps:")] if "--ca-file" in args else []
    result = flowdeck(*RUN, *pattern, *args, *uri, "--no-record")
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in one_line(result)
    assert result.stdout == ""  # not even the run's header: nothing started
    assert settled_queue_names("amq.gen-") <= before
    assert queue_names(unique_name) == set()


def test_a_sessions_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "sessions.txt"
    file.write_text("not a directory\n")
    result = flowdeck("sessions", "list", "--sessions-dir", str(file))
    assert result.returncode == 2
    assert one_line(result) == (
        f"flowdeck: --sessions-dir {file} is not a directory; give the directory sessions "
        "are recorded in"
    )
    assert result.stdout == ""
    result = flowdeck("sessions", "list", env={"FLOWDECK_SESSIONS_DIR": str(file)})
    assert result.returncode == 2
    assert one_line(result).startswith(f"flowdeck: $FLOWDECK_SESSIONS_DIR {file} is not")


def test_control_characters_in_names_and_paths_reach_the_terminal_escaped(
    tmp_path: Path,
) -> None:
    clearing = tmp_path / "\x1b[2J"  # would clear the screen
    clearing.mkdir()
    result = flowdeck("sessions", "list", env={"FLOWDECK_SESSIONS_DIR": str(clearing)})
    assert result.returncode == 0
    assert "\x1b" not in result.stdout
    assert result.stdout == f"no sessions in {tmp_path}/\\x1b[2J\n"
    result = flowdeck("run", "--spec", "spec\x1b]0;owned\x07.toml", "--no-record")
    assert result.returncode == 2
    assert one_line(result) == "flowdeck: spec file spec\\x1b]0;owned\\x07.toml does not exist"


async def _declare_queue(name: str, arguments: dict[str, int] | None = None) -> None:
    connection = await aio_pika.connect(SHARED_URI)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(name, durable=True, arguments=arguments)


@pytest.mark.broker
@pytest.mark.timeout(180)
def test_a_run_refused_at_its_second_queue_deletes_the_first_it_made(unique_name: str) -> None:
    """Queue 2 exists with other arguments: the broker refuses the run's declaration of it
    after queue 1 was made; queue 1 goes again, queue 2 (not the run's) stays."""
    asyncio.run(_declare_queue(f"{unique_name}-2", {"x-max-length": 5}))
    result = flowdeck(*RUN, "--queues", "3", "--queue-pattern", f"{unique_name}-%d", "--no-record")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"queue '{unique_name}-2' exists with other settings" in result.stderr
    assert settled_queue_names(unique_name) == {f"{unique_name}-2"}


@pytest.mark.broker
@pytest.mark.timeout(180)
def test_a_run_refused_for_busy_queues_deletes_what_it_made(unique_name: str) -> None:
    """Queue 1 has another run's consumer: the run is refused once all its queues are
    declared (exit 2), and queue 2, which it made, goes again."""

    async def refused_beside_a_consumer() -> subprocess.CompletedProcess[str]:
        connection = await aio_pika.connect(SHARED_URI)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(f"{unique_name}-1", durable=True)
            await queue.consume(_ignore)
            args = [*RUN, "--queues", "2", "--queue-pattern", f"{unique_name}-%d", "--no-record"]
            return await asyncio.to_thread(flowdeck, *args)

    result = asyncio.run(refused_beside_a_consumer())
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"queue '{unique_name}-1' already has 1 consumer" in result.stderr
    assert settled_queue_names(unique_name) == {f"{unique_name}-1"}


async def _ignore(message: aio_pika.abc.AbstractIncomingMessage) -> None:
    """Another run's consumer: it only needs to be there."""
