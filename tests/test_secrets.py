"""A password never leaves the connection: not in sessions, output, listings or reports.

A user with a distinctive password is created on the shared broker for this test (and
deleted after). Runs take the password from FLOWDECK_PASSWORD, from --password-file and
from the URI itself; then every file of the recorded sessions, everything ``flowdeck run``
and ``flowdeck sessions`` printed, and the report ``flowdeck report`` makes of them, are
searched for the password (plain and percent-encoded).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from flowdeck.engine.credentials import read_password_file, resolve_uri, with_password
from flowdeck.engine.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]
MANAGEMENT = "http://127.0.0.1:15672"


@pytest.fixture(scope="module")
def broker_user() -> Iterator[tuple[str, str]]:
    user = f"flowdeck-secret-{uuid.uuid4().hex[:8]}"
    password = f"Zq7+pw/{uuid.uuid4().hex[:12]}@x%"  # characters that need encoding
    with httpx.Client(base_url=MANAGEMENT, auth=("guest", "guest"), timeout=10) as api:
        api.put(f"/api/users/{user}", json={"password": password, "tags": "monitoring"})
        api.put(
            f"/api/permissions/%2F/{user}",
            json={"configure": "^flowdeck-secret-.*", "write": ".*", "read": ".*"},
        ).raise_for_status()
        try:
            yield user, password
        finally:
            api.delete(f"/api/users/{user}")


def forms(password: str) -> list[str]:
    return [password, quote(password, safe=""), quote(password)]


def flowdeck(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": "", **env},
    )


def assert_nowhere(password: str, texts: dict[str, str], directory: Path) -> int:
    """No form of ``password`` in ``texts`` nor any file under ``directory``; how many
    files were searched."""
    for name, text in texts.items():
        for form in forms(password):
            assert form not in text, f"password found in {name}"
    files = 0
    for path in directory.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            files += 1
            for form in forms(password):
                assert form.encode() not in data, f"password found in {path}"
    return files


def test_password_sources_and_their_order(tmp_path: Path) -> None:
    file = tmp_path / "pw"
    file.write_text("from-file\nignored second line\n")
    uri = "amqp://alice:from-uri@h:5672/%2F"
    env = {"FLOWDECK_PASSWORD": "from env"}
    assert resolve_uri(uri, password_file=file, environ=env) == "amqp://alice:from-file@h:5672/%2F"
    assert resolve_uri(uri, environ=env) == "amqp://alice:from%20env@h:5672/%2F"
    assert resolve_uri(uri, environ={}) == uri
    assert with_password("amqp://h/%2F", "p@ss") == "amqp://guest:p%40ss@h/%2F"
    (tmp_path / "empty").write_text("")
    with pytest.raises(SpecError, match="is empty"):
        read_password_file(tmp_path / "empty")
    with pytest.raises(SpecError, match="does not exist"):
        read_password_file(tmp_path / "missing")


@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_password_appears_in_no_session_output_listing_or_report(
    broker_user: tuple[str, str],
    tmp_path: Path,
    spark: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user, password = broker_user
    sessions = tmp_path / "sessions"
    password_file = tmp_path / "password"
    password_file.write_text(password + "\n")
    password_file.chmod(0o600)
    base = f"amqp://{user}@127.0.0.1:5672/%2F"
    run = ["run", "--duration", "3", "--rate", "50", "--workers", "0", "--drain", "1"]
    common = ["--management-url", MANAGEMENT, "--sessions-dir", str(sessions), "--cleanup"]
    outputs: dict[str, str] = {}

    def check(name: str, result: subprocess.CompletedProcess[str], code: int = 0) -> None:
        outputs[name] = result.stdout + result.stderr
        assert result.returncode == code, outputs[name]

    check(
        "run with FLOWDECK_PASSWORD",
        flowdeck(*run, *common, "--uri", base, "--queue-pattern", "flowdeck-secret-env-%d",
                 env={"FLOWDECK_PASSWORD": password}),
    )  # fmt: skip
    check(
        "run with --password-file",
        flowdeck(*run, *common, "--uri", base, "--password-file", str(password_file),
                 "--queue-pattern", "flowdeck-secret-file-%d", env={}),
    )  # fmt: skip
    in_uri = f"amqp://{user}:{quote(password, safe='')}@127.0.0.1:5672/%2F"
    check(
        "run with FLOWDECK_URI",
        flowdeck(*run, *common, "--queue-pattern", "flowdeck-secret-uri-%d",
                 env={"FLOWDECK_URI": in_uri}),
    )  # fmt: skip
    # A wrong password is refused without being repeated back.
    check(
        "refused login",
        flowdeck(*run, *common, "--uri", base, "--queue-pattern", "flowdeck-secret-bad-%d",
                 env={"FLOWDECK_PASSWORD": password + "-wrong"}),
        code=1,
    )  # fmt: skip
    assert "refused the login" in outputs["refused login"]
    for name in ("run with FLOWDECK_PASSWORD", "run with --password-file", "run with FLOWDECK_URI"):
        assert "completed" in outputs[name] and "lost (confirmed, never consumed)" in outputs[name]

    check("sessions list", flowdeck("sessions", "list", "--sessions-dir", str(sessions), env={}))
    session_ids = [p.name for p in sessions.iterdir() if p.is_dir()]
    assert len(session_ids) == 3, session_ids
    for session_id in session_ids:
        check(
            f"sessions show {session_id}",
            flowdeck("sessions", "show", session_id, "--sessions-dir", str(sessions), env={}),
        )
    # The report job runs in this process on the run's one Spark session (a `flowdeck
    # report` process would start a JVM of its own), through the same command.
    from flowdeck.cli import main

    report_dir = tmp_path / "report"
    capsys.readouterr()
    code = main(["report", *(str(sessions / s) for s in session_ids), "--out", str(report_dir)])
    printed = capsys.readouterr()
    outputs["report"] = printed.out + printed.err
    assert code == 0, outputs["report"]
    files = assert_nowhere(password, outputs, sessions)
    assert files >= 3 * 4  # manifest, events and parquet parts of three sessions at least
    report_files = assert_nowhere(password, {}, report_dir)
    assert report_files >= 1
    print(f"\nsearched {files} session files and {report_files} report files")


@pytest.fixture(scope="module")
def delimiter_user() -> Iterator[tuple[str, str]]:
    """A user whose password holds every URI delimiter at once, raw."""
    user = f"flowdeck-delims-{uuid.uuid4().hex[:8]}"
    password = f"ab@cd/{uuid.uuid4().hex[:10]}:Qm%41%z"
    with httpx.Client(base_url=MANAGEMENT, auth=("guest", "guest"), timeout=10) as api:
        api.put(f"/api/users/{user}", json={"password": password, "tags": "monitoring"})
        api.put(
            f"/api/permissions/%2F/{user}",
            json={"configure": "^flowdeck-delims-.*", "write": ".*", "read": ".*"},
        ).raise_for_status()
        try:
            yield user, password
        finally:
            api.delete(f"/api/users/{user}")


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(300)
def test_a_password_with_every_delimiter_connects_and_is_masked_everywhere(
    delimiter_user: tuple[str, str], tmp_path: Path
) -> None:
    user, password = delimiter_user
    sessions = tmp_path / "sessions"
    encoded = quote(password, safe="")
    run = ["run", "--duration", "2", "--rate", "20", "--workers", "0", "--drain", "1",
           "--management-url", MANAGEMENT, "--sessions-dir", str(sessions),
           "--cleanup"]  # fmt: skip
    outputs: dict[str, str] = {}
    # The raw '%41' would read as an escape: a raw URI writes '%' as %25, the rest raw.
    raw_uri = f"amqp://{user}:{password.replace('%', '%25')}@127.0.0.1:5672/%2F"
    result = flowdeck(*run, "--queue-pattern", "flowdeck-delims-env-%d", "--json",
                      env={"FLOWDECK_URI": raw_uri})  # fmt: skip
    outputs["FLOWDECK_URI run, JSON summary"] = result.stdout + result.stderr
    assert result.returncode == 0, outputs["FLOWDECK_URI run, JSON summary"]
    assert '"outcome": "completed"' in result.stdout
    masked = f"amqp://{user}:***@127.0.0.1:5672/%2F"
    assert f"broker {masked}" in result.stderr

    result = flowdeck(*run, "--queue-pattern", "flowdeck-delims-uri-%d",
                      "--uri", f"amqp://{user}:{encoded}@127.0.0.1:5672/%2F", env={})  # fmt: skip
    outputs["--uri run"] = result.stdout + result.stderr
    assert result.returncode == 0 and "completed" in result.stdout, outputs["--uri run"]

    result = flowdeck(*run, "--queue-pattern", "flowdeck-delims-bad-%d",
                      "--uri", f"amqp://{user}:{password.replace('%', '%25')}x@127.0.0.1:5672/%2F",
                      env={})  # fmt: skip
    outputs["refused login"] = result.stdout + result.stderr
    assert result.returncode == 1, outputs["refused login"]
    assert f"refused the login of user {user!r}" in result.stderr
    assert "127.0.0.1:5672 vhost '/'" in result.stderr

    session_ids = sorted(p.name for p in sessions.iterdir() if p.is_dir())
    assert len(session_ids) >= 2, session_ids
    for session_id in session_ids:
        shown = flowdeck("sessions", "show", session_id, "--sessions-dir", str(sessions), env={})
        outputs[f"sessions show {session_id}"] = shown.stdout + shown.stderr
        assert shown.returncode == 0, shown.stderr
    shows = [outputs[f"sessions show {s}"] for s in session_ids]
    said = [re.search(rf"^broker +{re.escape(masked)}$", text, re.MULTILINE) for text in shows]
    assert sum(1 for found in said if found) >= 2, shows
    assert not any("private local node" in text for text in shows)
    listed = flowdeck("sessions", "list", "--sessions-dir", str(sessions), env={})
    outputs["sessions list"] = listed.stdout + listed.stderr
    for text in outputs.values():  # the raw password's parts too: 'cd/...' is its middle
        assert password.split("@")[1].split(":")[0] not in text
    assert_nowhere(password, outputs, sessions)


@pytest.mark.slow
@pytest.mark.broker
def test_management_password_from_file_and_environment(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("guest\n")
    bad.write_text("not-the-password\n")
    collect = ["collect", "--once", "--uri", "amqp://guest:not-this@127.0.0.1:5672/%2F",
               "--management-url", MANAGEMENT, "--management-user", "guest"]  # fmt: skip
    result = flowdeck(*collect, "--management-password-file", str(good), env={})
    assert result.returncode == 0, result.stderr
    result = flowdeck(*collect, env={"FLOWDECK_MANAGEMENT_PASSWORD": "guest"})
    assert result.returncode == 0, result.stderr
    for refused in (
        flowdeck(*collect, "--management-password-file", str(bad), env={}),
        flowdeck(*collect, env={"FLOWDECK_MANAGEMENT_PASSWORD": "not-the-password"}),
    ):
        assert refused.returncode == 1
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "401" in lines[0], refused.stderr
        assert "not-the-password" not in refused.stderr
