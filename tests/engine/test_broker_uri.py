"""One parser for broker URIs: a password of any characters is read whole, connects in
its percent-encoded form and never shows in the redacted form or in a masked message;
bad URIs are refused in one line (exit 2 from the CLI) without the password.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowdeck.collectors.broker_uri import BrokerUriError, mask_text, parse_broker_uri, redact
from flowdeck.engine.amqp.connection import parse_uri
from flowdeck.engine.credentials import management_password, read_password_file, resolve_uri
from flowdeck.engine.errors import SpecError
from flowdeck.engine.spec import spec_from_mapping

ROOT = Path(__file__).resolve().parents[2]
FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]

#: Printable ASCII and some beyond: every delimiter a URI has, and none of the spaces.
PASSWORD_CHARACTERS = st.characters(
    min_codepoint=33, max_codepoint=0x2FF, blacklist_categories=("Cs", "Zs", "Cc")
)
PASSWORDS = st.text(PASSWORD_CHARACTERS, min_size=1, max_size=40)


def test_a_raw_at_and_slash_in_the_password_stay_in_the_password() -> None:
    uri = "amqp://tester:ab@cd/Qm4Tz8Kp@127.0.0.1:48851/%2F"
    parsed = parse_broker_uri(uri)
    assert (parsed.username, parsed.password) == ("tester", "ab@cd/Qm4Tz8Kp")
    assert (parsed.host, parsed.effective_port, parsed.vhost) == ("127.0.0.1", 48851, "/")
    assert parsed.redacted == "amqp://tester:***@127.0.0.1:48851/%2F"
    assert str(parsed) == "amqp://tester:ab%40cd%2FQm4Tz8Kp@127.0.0.1:48851/%2F"
    assert parsed.address == "127.0.0.1:48851 vhost '/'"
    params = parse_uri(uri)  # the lean client
    assert (params.host, params.port, params.vhost) == ("127.0.0.1", 48851, "/")
    assert (params.username, params.password) == ("tester", "ab@cd/Qm4Tz8Kp")
    message = f"cannot connect to {uri}: refused"
    assert "Qm4Tz8Kp" not in mask_text(message) and "ab@cd" not in mask_text(message)


@pytest.mark.parametrize(
    ("password", "raw"),
    [
        ("p@ss", "amqp://u:p@ss@h:5672/%2F"),
        ("a/b", "amqp://u:a/b@h:5672/%2F"),
        ("50%off", "amqp://u:50%off@h:5672/%2F"),
        ("a:b:c", "amqp://u:a:b:c@h:5672/%2F"),
        ("x?y#z", "amqp://u:x?y#z@h:5672/%2F"),
        ("@/:%?#[]", "amqp://u:@/:%?#[]@h:5672/%2F"),
    ],
)
def test_each_delimiter_in_a_raw_password(password: str, raw: str) -> None:
    for uri in (raw, f"amqp://u:{quote(password, safe='')}@h:5672/%2F"):
        parsed = parse_broker_uri(uri)
        assert parsed.password == password, uri
        assert (parsed.host, parsed.port, parsed.vhost) == ("h", 5672, "/")
        assert parsed.redacted == "amqp://u:***@h:5672/%2F"
        assert password not in mask_text(f"broker {uri} refused")


def test_defaults_ipv6_query_and_encoded_vhost() -> None:
    parsed = parse_broker_uri("amqps://[::1]/my%20vhost?heartbeat=5")
    assert (parsed.host, parsed.effective_port, parsed.vhost, parsed.tls) == (
        "::1",
        5671,
        "my vhost",
        True,
    )
    assert (parsed.login, parsed.secret) == ("guest", "guest")
    assert parsed.query_params == {"heartbeat": "5"}
    assert parse_broker_uri("amqp://h").vhost == "/"
    assert redact("amqp://h/%2F") == "amqp://h/%2F"


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("amqp://127.0.0.1:0/%2F", "port must be 1..65535, got 0"),
        ("amqp://127.0.0.1:70000/%2F", "port must be 1..65535, got 70000"),
        ("amqp://[::1", "without its closing ']'"),
        ("amqp://[bad", "without its closing ']'"),
        ("amqp://u:s3cr3t@[zz]:5672/", "[zz] is not an IPv6 address"),
        ("amqp://u:s3cr3t@:5672/", "needs a host"),
        ("amqp://u:s3cr3t@h:port/", "port must be a number"),
        ("http://u:s3cr3t@h/", "must start with amqp:// or amqps://"),
        ("amqp://u:s3 cr3t@h/", "space"),
    ],
)
def test_bad_uris_are_refused_in_one_line_without_the_password(uri: str, says: str) -> None:
    with pytest.raises(BrokerUriError) as caught:
        parse_broker_uri(uri)
    assert says in caught.value.message
    assert "s3cr3t" not in caught.value.message and "\n" not in caught.value.message
    with pytest.raises(SpecError) as spec_error:
        spec_from_mapping({"uri": uri})
    assert spec_error.value.field == "uri" and "s3cr3t" not in spec_error.value.message


@settings(max_examples=300, deadline=None)
@given(user=st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=12),
       password=PASSWORDS)  # fmt: skip
def test_any_password_round_trips_and_never_shows(user: str, password: str) -> None:
    user = user.replace(":", "").replace("@", "").replace("%", "") or "guest"
    connect_form = resolve_uri("amqp://h:5672/%2F", environ={"FLOWDECK_PASSWORD": password})
    for uri in (connect_form, str(parse_broker_uri(connect_form).with_password(password))):
        parsed = parse_broker_uri(uri)
        assert parsed.password == password
        assert (parsed.host, parsed.port, parsed.vhost) == ("h", 5672, "/")
        # Equal to the form without any password: nothing of it can be left.
        assert parsed.redacted == "amqp://guest:***@h:5672/%2F"
        assert mask_text(f"could not reach {uri}; retrying {uri}") == (
            "could not reach amqp://guest:***@h:5672/%2F; retrying amqp://guest:***@h:5672/%2F"
        )
    # Written raw (no %XX escape in it, which would read as one), it reads the same.
    if "%" not in password:
        raw = f"amqp://{user}:{password}@h:5672/%2F"
        parsed = parse_broker_uri(raw)
        assert (parsed.username, parsed.password) == (user, password)
        assert parse_broker_uri(str(parsed)).password == password
        assert parsed.redacted == f"amqp://{quote(user, safe='')}:***@h:5672/%2F"
        assert mask_text(f"broker {raw} refused") == f"broker amqp://{user}:***@h:5672/%2F refused"


def test_password_file_is_read_to_a_bound(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(SpecError, match=r"is not a regular file \(a character device\)"):
        read_password_file("/dev/zero")
    assert time.monotonic() - started < 10
    big = tmp_path / "big"
    big.write_bytes(b"x" * (64 * 1024 + 1))
    with pytest.raises(SpecError, match="is 65,537 bytes, over the limit of 64 KiB"):
        read_password_file(big)
    with pytest.raises(SpecError, match=r"is not a regular file \(a directory\)"):
        read_password_file(tmp_path)


def test_management_password_sources_and_their_order(tmp_path: Path) -> None:
    file = tmp_path / "mgmt"
    file.write_text("from-file\n")
    env = {"FLOWDECK_MANAGEMENT_PASSWORD": "from-env"}
    assert management_password("flag", password_file=file, environ=env) == "from-file"
    assert management_password("flag", environ=env) == "from-env"
    assert management_password("flag", environ={}) == "flag"
    assert management_password(None, environ={}) is None
    with pytest.raises(SpecError) as caught:
        management_password(None, password_file="/dev/zero", environ={})
    assert caught.value.field == "management_password_file"


def _flowdeck(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": "", **env},
    )


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--uri", "amqp://127.0.0.1:0/%2F"], {}, "port must be 1..65535, got 0"),
        ([], {"FLOWDECK_URI": "amqp://127.0.0.1:0/%2F"}, "port must be 1..65535, got 0"),
        (["--uri", "amqp://[::1"], {}, "closing ']'"),
        ([], {"FLOWDECK_URI": "amqp://[bad"}, "closing ']'"),
        (["--uri", "amqp://u:Zx9s3cr3t@[zz]:5672/"], {}, "[zz] is not an IPv6 address"),
        (
            ["--uri", "amqp://127.0.0.1:5672/%2F", "--password-file", "/dev/zero"],
            {},
            "password file /dev/zero is not a regular file (a character device)",
        ),
    ],
)
def test_cli_refuses_bad_uris_and_endless_password_files(
    args: list[str], env: dict[str, str], says: str
) -> None:
    started = time.monotonic()
    result = _flowdeck("run", "--duration", "1", "--no-record", *args, **env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert "Traceback" not in result.stderr and "Zx9s3cr3t" not in result.stderr
    assert time.monotonic() - started < 45


def test_collect_refuses_a_bad_uri_and_an_endless_management_password_file() -> None:
    result = _flowdeck("collect", "--once", "--uri", "amqp://127.0.0.1:0/")
    assert result.returncode == 2 and "port must be 1..65535" in result.stderr, result.stderr
    result = _flowdeck(
        "collect", "--once", "--uri", "amqp://127.0.0.1:5672/", "--management-password-file",
        "/dev/zero",
    )  # fmt: skip
    assert result.returncode == 2 and "is not a regular file" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
