"""The bounded file reader and the escaping of text from outside, without a broker."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from flowdeck.collectors import (
    UnreadableFile,
    printable,
    read_file_bytes,
    read_file_json,
    read_file_text,
)


def test_a_regular_file_within_the_limit_reads_whole(tmp_path: Path) -> None:
    file = tmp_path / "spec.toml"
    file.write_bytes(b"\xef\xbb\xbfname = 'caf\xc3\xa9'\n")  # a byte-order mark, then UTF-8
    assert read_file_bytes(file, what="spec file", limit=100).startswith(b"\xef\xbb\xbf")
    assert read_file_text(file, what="spec file", limit=100) == "name = 'café'\n"
    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * 64)
    assert len(read_file_bytes(exact, what="token file", limit=64)) == 64


@pytest.mark.timeout(30)
def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "sock"))
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")
    cases = {
        fifo: "a named pipe",  # no writer: a plain open would block for ever
        Path("/dev/zero"): "a character device",
        link: "a character device",
        tmp_path: "a directory",
        tmp_path / "sock": "a socket",
    }
    started = time.monotonic()
    for path, kind in cases.items():
        with pytest.raises(UnreadableFile) as caught:
            read_file_bytes(path, what="spec file", limit=1024)
        assert caught.value.message == f"spec file {path} is not a regular file ({kind})"
    assert time.monotonic() - started < 5
    listening.close()


def test_sizes_over_the_limit_are_refused_with_the_size_and_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (64 * 1024 + 1))
    with pytest.raises(UnreadableFile, match=r"is 65,537 bytes, over the limit of 64 KiB$"):
        read_file_bytes(big, what="token file", limit=64 * 1024)
    huge = tmp_path / "huge"
    with huge.open("wb") as out:
        out.truncate(3 << 30)  # sparse: 3 GiB said, nothing read
    with pytest.raises(UnreadableFile, match=r"is 3 GiB, over the limit of 1 MiB$"):
        read_file_bytes(huge, what="spec file", limit=1 << 20)


def test_missing_unreadable_and_misencoded_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFile, match=r"^token file .*/nothing does not exist$"):
        read_file_text(tmp_path / "nothing", what="token file", limit=10)
    latin1 = tmp_path / "latin1"
    latin1.write_bytes(b"token-caf\xe9\n")
    with pytest.raises(UnreadableFile) as caught:
        read_file_text(latin1, what="token file", limit=100)
    assert caught.value.message == (
        f"token file {latin1} is not UTF-8 text (byte 0xe9 at offset 9); save it as UTF-8"
    )
    if os.geteuid() != 0:  # root reads any file
        secret = tmp_path / "secret"
        secret.write_text("x")
        secret.chmod(0)
        with pytest.raises(UnreadableFile, match="cannot be read: Permission denied"):
            read_file_text(secret, what="token file", limit=10)


def test_json_nested_past_the_parser_or_broken_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UnreadableFile, match=r"^state file .*deep\.json is nested too deeply$"):
        read_file_json(deep, what="state file", limit=1 << 20)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(UnreadableFile, match=r"is not JSON: Expecting property name"):
        read_file_json(broken, what="state file", limit=1 << 20)


def test_control_characters_are_escaped_and_other_text_is_left_alone() -> None:
    assert printable("\x1b[2J/tmp/s\n") == "\\x1b[2J/tmp/s\\n"
    assert printable("a\tb\rc\x00d\x7fe\x9bf") == "a\\tb\\rc\\x00d\\x7fe\\x9bf"
    assert printable("name\u202eevil") == "name\\u202eevil"  # right-to-left override
    for plain in ("bench2-sweep", "café/日本", "C:\\path with spaces", ""):
        assert printable(plain) == plain
