"""Files a hostile or careless user points the command line at, run as they would be.

Each bad file (a FIFO with no writer, /dev/zero, a spec nested 100,000 levels deep, a
Latin-1 token file, a manifest linked to /dev/zero, ...) is answered with one line on
stderr and its exit code: at once, with no traceback, and under a 1.5 GB address-space
limit without a MemoryError (before, /dev/zero as a token file grew to 23 GB).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from flowdeck.engine.recording.recorder import Recorder
from flowdeck.engine.spec import RunSpec

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]
SHARED = "amqp://guest:guest@127.0.0.1:5672/%2F"
ENDPOINT = "http://127.0.0.1:9/"  # never reached: the token file is refused first
#: The address space each command may use: flowdeck's own start needs far less.
MEMORY_LIMIT = 1536 * 1024 * 1024
#: Generous for a busy machine: a refusal takes an interpreter start, not a read of GBs.
TIME_LIMIT = 30.0


def _limited_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def flowdeck_limited(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT * 2,
        cwd=cwd,
        preexec_fn=_limited_memory,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": "", **(env or {})},
    )
    return result, time.monotonic() - started


def fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "fifo")
    return "fifo"


def deep_spec(tmp: Path) -> str:
    (tmp / "deep.toml").write_text("rate = " + "[" * 100_000 + "]" * 100_000 + "\n")
    return "deep.toml"


def latin1_token(tmp: Path) -> str:
    (tmp / "token").write_bytes(b"s3cr\xe9t\n")
    return "token"


def deep_token(tmp: Path) -> str:
    # 30,000 levels (60 KB, within a token file's 64 KiB) is thirty times the parser's depth.
    (tmp / "control.json").write_text('{"token": ' + "[" * 30_000 + "]" * 30_000 + "}")
    return "control.json"


def dev_zero(tmp: Path) -> str:
    return "/dev/zero"


def perftest_fifo(tmp: Path) -> str:
    return "@" + fifo(tmp)


CASES: list[tuple[str, Callable[[Path], str], list[str], dict[str, str], int, str]] = [
    # (id, make the file, the command with {} for it, env with {} for it, exit, says)
    (
        "spec on a FIFO with no writer",
        fifo,
        ["run", "--uri", SHARED, "--spec", "{}"],
        {},
        2,
        "flowdeck: spec file fifo is not a regular file (a named pipe)",
    ),
    (
        "spec on /dev/zero",
        dev_zero,
        ["run", "--uri", SHARED, "--spec", "{}"],
        {},
        2,
        "flowdeck: spec file /dev/zero is not a regular file (a character device)",
    ),
    (
        "spec nested 100,000 levels deep",
        deep_spec,
        ["run", "--uri", SHARED, "--spec", "{}"],
        {},
        2,
        "flowdeck: spec file deep.toml is nested too deeply",
    ),
    (
        "token file in Latin-1",
        latin1_token,
        ["steer", "--token-file", "{}", ENDPOINT, "inflight=200"],
        {},
        2,
        "flowdeck: token file token is not UTF-8 text (byte 0xe9 at offset 4); save it as UTF-8",
    ),
    (
        "token file on /dev/zero",
        dev_zero,
        ["steer", "--token-file", "{}", ENDPOINT, "inflight=200"],
        {},
        2,
        "flowdeck: token file /dev/zero is not a regular file (a character device)",
    ),
    (
        "token file nested 30,000 levels deep",
        deep_token,
        ["steer", "--token-file", "{}", ENDPOINT, "inflight=200"],
        {},
        2,
        "flowdeck: token file control.json is nested too deeply",
    ),
    (
        "broker state file on /dev/zero",
        dev_zero,
        ["broker", "status"],
        {"FLOWDECK_BROKER_STATE": "{}"},
        2,
        "flowdeck: broker state file /dev/zero is not a regular file (a character device); "
        "$FLOWDECK_BROKER_STATE names the file `flowdeck broker start` wrote: delete it and "
        "start again",
    ),
    (
        "PerfTest line from a FIFO",
        perftest_fifo,
        ["run", "--uri", SHARED, "--perftest", "{}"],
        {},
        2,
        "flowdeck: PerfTest file fifo is not a regular file (a named pipe)",
    ),
    (
        "CA file on /dev/zero",
        dev_zero,
        ["run", "--uri", SHARED.replace("amqp:", "amqps:"), "--ca-file", "{}"],
        {},
        2,
        "flowdeck: CA file /dev/zero is not a regular file (a character device); "
        "check --ca-file / cacertfile",
    ),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("make", "args", "env", "code", "says"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_bad_file_is_one_line_at_once_within_bounded_memory(
    tmp_path: Path,
    make: Callable[[Path], str],
    args: list[str],
    env: dict[str, str],
    code: int,
    says: str,
) -> None:
    name = make(tmp_path)
    result, took = flowdeck_limited(
        [arg.replace("{}", name) for arg in args],
        tmp_path,
        {key: value.replace("{}", name) for key, value in env.items()},
    )
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [says], result.stderr
    assert result.returncode == code
    assert took < TIME_LIMIT


@pytest.mark.timeout(120)
def test_a_manifest_linked_to_dev_zero_is_one_unreadable_session_in_the_list(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    good = Recorder(sessions, RunSpec(name="good run"))
    good.start(1_700_000_000.0)
    good.close("completed", {}, 1_700_000_002.0)
    bad = sessions / "20231114-000000-bad"
    bad.mkdir()
    (bad / "manifest.json").symlink_to("/dev/zero")
    result, took = flowdeck_limited(["sessions", "list", "--sessions-dir", str(sessions)], tmp_path)
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [
        f"flowdeck: skipped session {bad.name}: unreadable manifest: file "
        f"{bad}/manifest.json is not a regular file (a character device)"
    ]
    assert result.returncode == 0
    assert good.session_id in result.stdout
    assert result.stdout.splitlines()[-1] == f"1 session in {sessions} (1 unreadable, skipped)"
    assert took < TIME_LIMIT
