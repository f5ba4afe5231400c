"""Where the job's sessions are, and checking every argument before Spark starts.

Starting Spark takes many seconds; a misspelt session or an output directory that cannot be
written must fail at once instead, with a message naming the argument and the fix. This
module imports no PySpark, so the check runs before PySpark is even loaded. Sessions at a
Hadoop URI (``hdfs://``, ``s3a://``...) can only be read through Spark: they are checked
when the job opens them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

from flowdeck.engine.recording.format import MANIFEST, SessionFormatError, read_manifest


class InputError(Exception):
    """A session or output argument the job cannot use; the message says which and why."""


class UnreadableSession(InputError):
    """A session whose manifest does not read: skipped when other sessions remain."""


def is_local(uri: str) -> bool:
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and uri[1:3] == ":\\")


def local_path(uri: str) -> Path:
    return Path(urlparse(uri).path) if uri.startswith("file:") else Path(uri)


def normalise(uri: str) -> str:
    """An absolute form of a session location that Spark reads the same on every node."""
    if is_local(uri):
        return str(local_path(uri).expanduser().resolve())
    return uri.rstrip("/")


def check_session(given: str) -> None:
    """A local session must be a directory with a readable manifest of a format version
    this flowdeck reads; a Hadoop URI is left to the job. InputError for a path that is no
    session (a typo), UnreadableSession for a session whose manifest does not read."""
    if not is_local(given):
        return
    path = local_path(given).expanduser()
    fix = f"give the directory of a recorded session (the one holding {MANIFEST})"
    if not path.exists():
        raise InputError(f"session {given!r}: no such directory; {fix}")
    if not path.is_dir():
        raise InputError(f"session {given!r}: not a directory; {fix}")
    if not (path / MANIFEST).exists():
        raise InputError(f"session {given!r}: not a session (no {MANIFEST} in it); {fix}")
    try:
        read_manifest(path)  # readable, and a format version this flowdeck reads
    except SessionFormatError as exc:
        raise UnreadableSession(f"session {given!r}: {exc}") from None


def check_out_dir(out: Path) -> None:
    """The output directory exists or can be created, and a file can be written in it."""
    target = out.expanduser()
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {out}: is a file, not a directory; choose another --out")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"--out {out}: cannot create the directory ({exc.strerror or exc}); "
            "choose another --out"
        ) from None
    try:
        # os.access says yes to root on a read-only file system: write a file to be sure.
        with tempfile.NamedTemporaryFile(dir=target, prefix=".flowdeck-write-check-"):
            pass
    except OSError as exc:
        raise InputError(
            f"--out {out}: cannot write in it ({exc.strerror or exc}); choose another --out"
        ) from None


def check_inputs(sessions: Sequence[str], out: Path) -> tuple[list[str], list[str]]:
    """Every check that needs no Spark: the sessions first, then the output directory (so a
    bad session does not leave a new empty directory behind).

    Returns the sessions to report on and one line for each skipped: a session whose
    manifest does not read is left out, so one broken session does not stop a report on
    the others; with none left, the first one's problem is the InputError.
    """
    if not sessions:
        raise InputError("no session given; give at least one session directory or URI")
    usable: list[str] = []
    skipped: list[UnreadableSession] = []
    for given in sessions:
        try:
            check_session(given)
        except UnreadableSession as exc:
            skipped.append(exc)
        else:
            usable.append(given)
    if not usable:
        raise skipped[0]
    check_out_dir(out)
    return usable, [f"skipped {exc}" for exc in skipped]
