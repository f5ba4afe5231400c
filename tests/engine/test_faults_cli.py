"""`flowdeck run` facing bad input and signals, as an operator meets them: in a subprocess.

Every connection problem ends within the connect timeout with exit 1 and one line saying
what was wrong and what to check, never a traceback; impossible specs end with exit 2
before any load starts; SIGTERM, SIGHUP and Ctrl-C stop cleanly with a readable session,
a second Ctrl-C at once, still leaving a readable session.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowdeck.engine.recording.reader import list_sessions, open_session

ROOT = Path(__file__).resolve().parents[2]
FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]
RUN = ["run", "--duration", "4", "--rate", "20", "--workers", "0", "--no-record"]


def flowdeck(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": ""},
    )


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.broker
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("uri", "says"),
    [
        (f"amqp://guest:guest@127.0.0.2:{unused_port()}/%2F", "connect"),
        (f"amqp://guest:guest@127.0.0.1:{unused_port()}/%2F", "connect"),
        (
            "amqp://guest:Wr0ng-Pa55-7c1d@127.0.0.1:5672/%2F",
            "refused the login of user 'guest'",
        ),
        ("amqp://guest:guest@127.0.0.1:5672/no-such-vhost-7c1d", "vhost"),
    ],
    ids=["unreachable host", "wrong port", "wrong password", "missing vhost"],
)
def test_connection_problems_are_one_line_within_the_timeout(uri: str, says: str) -> None:
    began = time.monotonic()
    result = flowdeck(*RUN, "--uri", uri, "--management-url", "http://127.0.0.1:15672")
    took = time.monotonic() - began
    assert result.returncode == 1, result.stdout + result.stderr
    line = one_line_error(result)
    assert says in line
    assert "Wr0ng-Pa55-7c1d" not in result.stdout + result.stderr
    assert took < 30  # connect timeout 10 s + interpreter start on a busy machine


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--prefetch", "10", "--ack-every", "20"], "ack_every (20) must not exceed prefetch (10)"),
        (["--queue-type", "stream", "--auto-ack"], "stream queues need manual acks"),
        (["--spec", "/no/such/spec.toml"], "spec file /no/such/spec.toml does not exist"),
    ],
)
def test_impossible_specs_are_refused_before_any_load(args: list[str], says: str) -> None:
    result = flowdeck(*RUN, "--uri", "amqp://guest:guest@127.0.0.1:5672/%2F", *args)
    assert result.returncode == 2
    assert says in one_line_error(result)


def test_malformed_spec_file_names_the_problem(tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text('publishers = 2\nrate = "fast"\n[unclosed\n')
    result = flowdeck(*RUN, "--spec", str(spec))
    assert result.returncode == 2
    assert "is not valid TOML" in one_line_error(result)
    spec.write_text('publishers = 2\nrate = "fast"\n')
    result = flowdeck(*RUN, "--spec", str(spec))
    assert "rate must be a number, got 'fast'" in one_line_error(result)


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_more_connections_than_the_broker_has_sockets_for_is_refused(unique_name: str) -> None:
    result = flowdeck(
        *RUN,
        "--uri", "amqp://guest:guest@127.0.0.1:5672/%2F",
        "--management-url", "http://127.0.0.1:15672",
        "--queue-pattern", f"{unique_name}-%d",
        "--publishers", "5000",
        "--consumers", "5000",
    )  # fmt: skip
    assert result.returncode == 1
    line = one_line_error(result)
    assert "the run needs 10000 connections" in line and "sockets free" in line


def start_run(unique_name: str, sessions: Path, duration: str = "40") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *FLOWDECK, "run", "--duration", duration, "--rate", "100", "--workers", "0",
            "--uri", "amqp://guest:guest@127.0.0.1:5672/%2F",
            "--queue-pattern", f"{unique_name}-%d", "--cleanup", "--drain", "2",
            "--sessions-dir", str(sessions),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": ""},
    )  # fmt: skip


def wait_for_progress(process: subprocess.Popen[str], lines: int = 3) -> list[str]:
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if sum(1 for s in seen if s.startswith("[")) >= lines:
            return seen
    raise AssertionError(f"no progress lines: {seen}")


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("signum", "reason"),
    [
        (signal.SIGTERM, "stopped by SIGTERM"),
        (signal.SIGHUP, "the terminal was closed (SIGHUP)"),
    ],
    ids=["SIGTERM", "SIGHUP"],
)
def test_signals_stop_cleanly_with_a_closed_readable_session(
    unique_name: str, tmp_path: Path, signum: signal.Signals, reason: str
) -> None:
    process = start_run(unique_name, tmp_path)
    wait_for_progress(process)
    process.send_signal(signum)
    out, err = process.communicate(timeout=90)
    assert process.returncode == 128 + signum, out + err  # 143, 129: what shells expect
    assert "Traceback" not in err
    if signum is signal.SIGTERM:
        assert "run custom stopped" in out and "lost (confirmed, never consumed)" in out
    (info,) = list_sessions(tmp_path)
    assert info.outcome == "stopped"
    session = open_session(info.path)
    assert session.totals().published > 0
    assert any(reason in e.message for e in session.events)


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(180)
def test_second_ctrl_c_quits_at_once_and_leaves_a_readable_session(
    unique_name: str, tmp_path: Path
) -> None:
    process = start_run(unique_name, tmp_path)
    wait_for_progress(process, lines=4)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    began = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, _err = process.communicate(timeout=60)
    assert time.monotonic() - began < 10
    assert process.returncode == 130
    assert "quit at once" in out
    (info,) = list_sessions(tmp_path)
    assert info.outcome in ("incomplete", "stopped")
    session = open_session(info.path)
    # What was written before the kill reads back: at least the first seconds.
    assert session.client_per_second().num_rows >= 1


# -- bad input: one line on stderr, exit 2, before any load ----------------------------------

SHARED = "amqp://guest:guest@127.0.0.1:5672/%2F"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--queue-pattern", "q" * 300], "is 300 bytes of UTF-8, over RabbitMQ's limit of 255"),
        (["--queue-pattern", "q" * 252 + "%d", "--queues", "1000"], "is 256 bytes of UTF-8"),
        (["--exchange", "amq.foo"], "names starting with 'amq.' are reserved by RabbitMQ"),
        (["--exchange", "amq.topic"], "amq.topic is a topic exchange"),
        (["--queue-pattern", "-x"], "argument --queue-pattern: expected one argument"),
        (["--uri", "-x"], "argument --uri: expected one argument"),
        (["--rate", "-5"], "rate must be 0..10000000 msg/s, got -5"),
        (["--uri", SHARED + "?verify=maybe"], "verify must be verify_peer or verify_none"),
    ],
    ids=[
        "300-character queue name",
        "queue name too long at the last queue number",
        "reserved exchange name",
        "predeclared exchange of another type",
        "pattern starting with a dash",
        "uri starting with a dash",
        "negative rate",
        "unknown verify parameter",
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    result = flowdeck(*RUN, "--uri", SHARED, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_line_error(result)
    assert says in line
    if "expected one argument" in says:
        assert line.startswith("flowdeck run: ") and line.endswith("; see flowdeck run --help")
        assert "is given as --" in line  # how to pass a value starting with '-'


def test_a_spec_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "latin1.toml"
    spec.write_bytes(b'name = "caf\xe9"\n')
    result = flowdeck(*RUN, "--spec", str(spec))
    assert result.returncode == 2
    assert f"spec file {spec} is not UTF-8 text" in one_line_error(result)


@pytest.mark.broker
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("ca_file", "says"),
    [
        ("missing.pem", "does not exist; check --ca-file"),
        ("junk.pem", "holds no usable certificate"),
    ],
    ids=["missing CA file", "CA file that is not PEM"],
)
def test_bad_ca_files_are_one_line_and_exit_2(tmp_path: Path, ca_file: str, says: str) -> None:
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    uri = "amqps://guest:guest@127.0.0.1:5671/%2F"
    result = flowdeck(*RUN, "--uri", uri, "--ca-file", str(tmp_path / ca_file))
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in one_line_error(result)


@pytest.mark.parametrize(
    ("args", "prog"),
    [
        (["sessions", "list", "--sessions-dir"], "flowdeck sessions list"),
        (["sessions", "show"], "flowdeck sessions show"),
        (["sessions", "frobnicate"], "flowdeck sessions"),
        (["report", "some-session"], "flowdeck report"),
        (["presets", "--bogus"], "flowdeck presets"),
        (["broker", "bogus"], "flowdeck broker"),
        (["nosuch"], "flowdeck"),
        (["--uri", "-x"], "flowdeck cockpit"),
    ],
)
def test_every_subcommand_argument_error_is_one_line(args: list[str], prog: str) -> None:
    result = flowdeck(*args, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_line_error(result)
    assert line.startswith(f"{prog}: ") and line.endswith(f"; see {prog} --help")
    assert result.stdout == ""


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_a_predeclared_exchange_is_used_not_declared(unique_name: str) -> None:
    result = flowdeck(
        *RUN, "--uri", SHARED, "--duration", "2",
        "--queue-pattern", f"{unique_name}-%d", "--cleanup",
        "--exchange", "amq.topic", "--exchange-type", "topic",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    published = next(line for line in result.stdout.splitlines() if line.startswith("published"))
    assert int(published.split()[1]) > 0
