"""Input from outside the process: files read within bounds, text escaped before it is shown.

Every file whose path an operator, an environment variable or another process gives
(spec files, token files, the broker state file, session manifests, PerfTest lines, CA
and certificate files) is read through :func:`read_file_bytes` and its text and JSON
forms. A path may name anything: a FIFO with no writer (a plain ``open`` blocks for
ever), ``/dev/zero`` (a plain read fills the memory), a directory, a file of gigabytes
or of Latin-1. Each is refused with one line naming the file and what is wrong with it,
quickly and within a stated size.

:func:`printable` escapes control characters in text about to reach a terminal (a
session directory named ``$'\\x1b[2J'`` would clear the screen).

Lives in the collectors, the lowest part both the collectors (the broker state file) and
the engine (everything else) may import; it imports nothing of either.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

#: Size limits of the files flowdeck reads, by what they hold.
SMALL_FILE_LIMIT = 64 * 1024  # a token, a password, a PerfTest command line
SPEC_FILE_LIMIT = 1024 * 1024  # a TOML spec, a broker state file
MANIFEST_LIMIT = 16 * 1024 * 1024  # a session manifest (a spec and a summary)
PEM_FILE_LIMIT = 1024 * 1024  # a CA bundle, a certificate, a key


#: Read in pieces: a buffer of the whole limit at once would take it even for a small file.
_CHUNK = 1024 * 1024


class UnreadableFile(ValueError):
    """A file given from outside that is not taken: ``message`` says which and why, in
    one line fit to show an operator."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(count: int) -> str:
    """``64 KiB`` for a whole number of a unit, ``65,537 bytes`` below 10 MiB (the figure
    the limit is passed by), ``2.1 GiB`` above."""
    units = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
    for unit, size in units:
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    if count < 10 << 20:
        return f"{count:,} bytes"
    unit, size = next((u, s) for u, s in units if count >= s)
    return f"{count / size:.1f} {unit}"


def _mode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode
    except OSError:
        return None


def _not_regular(what: str, path: Path, mode: int) -> UnreadableFile:
    return UnreadableFile(f"{what} {printable(str(path))} is not a regular file ({_kind(mode)})")


def read_file_bytes(path: str | Path, *, what: str, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Opened without blocking (a FIFO with no writer answers at once), looked at before
    anything is read (a device, a FIFO, a socket or a directory is refused), and read up
    to one byte past the limit, so a file that grows or lies about its size (``/proc``)
    is refused too. ``what`` names the file in the message (``spec file``).
    """
    file = Path(path)
    shown = printable(str(file))
    try:
        descriptor = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UnreadableFile(f"{what} {shown} does not exist") from None
    except OSError as exc:
        mode = _mode_of(file) if exc.errno == errno.ENXIO else None  # a socket
        if mode is not None and not stat.S_ISREG(mode):
            raise _not_regular(what, file, mode) from None
        reason = exc.strerror or str(exc)
        raise UnreadableFile(f"{what} {shown} cannot be read: {reason}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(what, file, status.st_mode)
        if status.st_size > limit:
            raise UnreadableFile(
                f"{what} {shown} is {_size(status.st_size)}, over the limit of {_size(limit)}"
            )
        chunks: list[bytes] = []
        taken = 0
        while taken <= limit:
            try:
                chunk = os.read(descriptor, min(limit + 1 - taken, _CHUNK))
            except OSError as exc:
                reason = exc.strerror or str(exc)
                raise UnreadableFile(f"{what} {shown} cannot be read: {reason}") from None
            if not chunk:
                break
            chunks.append(chunk)
            taken += len(chunk)
        if taken > limit:
            raise UnreadableFile(f"{what} {shown} is over the limit of {_size(limit)}")
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def decode_text(data: bytes, *, what: str, path: str | Path) -> str:
    """``data`` as UTF-8 (a leading byte-order mark dropped), or UnreadableFile naming
    the file, the first bad byte and its offset."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise UnreadableFile(
            f"{what} {printable(str(path))} is not UTF-8 text (byte 0x{bad:02x} at offset "
            f"{exc.start}); save it as UTF-8"
        ) from None


def read_file_text(path: str | Path, *, what: str, limit: int) -> str:
    """:func:`read_file_bytes` decoded as UTF-8 (see :func:`decode_text`)."""
    return decode_text(read_file_bytes(path, what=what, limit=limit), what=what, path=path)


def parse_json(text: str, *, what: str, path: str | Path) -> Any:
    """``text`` as JSON, or UnreadableFile in one line: not JSON, or nested too deep for
    the parser (``[[[[...`` a hundred thousand deep)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise UnreadableFile(f"{what} {printable(str(path))} is nested too deeply") from None
    except ValueError as exc:
        raise UnreadableFile(f"{what} {printable(str(path))} is not JSON: {exc}") from None


def read_file_json(path: str | Path, *, what: str, limit: int) -> Any:
    """:func:`read_file_text` parsed as JSON (see :func:`parse_json`)."""
    return parse_json(read_file_text(path, what=what, limit=limit), what=what, path=path)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\x1b": "\\x1b"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with control characters (C0, DEL, C1, and the bidirectional overrides
    that reorder what a terminal shows) written as escapes (``\\x1b``, ``\\n``), so a
    name or a path from outside reaches a terminal as what it is, not as commands to it.
    A backslash stays as it is: text without control characters comes back unchanged."""
    return _CONTROL.sub(_escape, text)
