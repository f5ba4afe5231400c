"""Where a run's control endpoint is written, so ``flowdeck steer``, ``runs`` and ``attach``
find it from another shell.

Each running run with an endpoint has one entry: a JSON file with its address, its token,
the process that serves it, the session it records and the sessions directory it was
started from, mode 0600 (the token steers the run). It is written twice: ``control.json``
in the session directory (found from a session id, like every other command that takes
one) and ``<run id>.json`` in the runs directory, which lists the runs going on. Both go
when the run ends; an entry whose process is gone (killed) is ignored and removed by
whoever reads it.

The runs directory is the user's own: ``$FLOWDECK_RUNS_DIR``, else ``flowdeck/runs`` in
``$XDG_RUNTIME_DIR``, else in the user's state directory (never a shared ``/tmp`` path,
where another user could plant it first). It is made mode 0700, and opened without
following a symlink; one that is a symlink, owned by another user or open to others is
refused in one line (:class:`UnsafeRunsDir`), and entries are written into it by its open
descriptor, never through a path another user could swap.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import platformdirs
import psutil

from flowdeck.collectors import SMALL_FILE_LIMIT, printable, read_file_json
from flowdeck.engine.errors import FlowdeckError, SpecError

#: Overrides the directory that lists running runs (tests, several users on one host).
RUNS_DIR_ENV = "FLOWDECK_RUNS_DIR"
#: The endpoint file in a recorded run's session directory.
SESSION_FILE = "control.json"


def runs_dir() -> Path:
    """``$FLOWDECK_RUNS_DIR`` if set, else ``flowdeck/runs`` in ``$XDG_RUNTIME_DIR`` (a
    per-user directory the system makes), else in the user's state directory."""
    if os.environ.get(RUNS_DIR_ENV):
        return Path(os.environ[RUNS_DIR_ENV])
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and Path(runtime).is_absolute():
        return Path(runtime) / "flowdeck" / "runs"
    return Path(platformdirs.user_state_dir("flowdeck", appauthor=False)) / "runs"


class UnsafeRunsDir(SpecError):
    """A runs directory another user could read or write into: refused (exit 2)."""

    def __init__(self, message: str) -> None:
        super().__init__("runs_dir", message)


def check_runs_dir(folder: Path | None = None) -> Path:
    """The runs directory, made if missing; UnsafeRunsDir (exit 2) when it is not the
    user's own, said before a run starts rather than when it registers."""
    folder = folder or runs_dir()
    os.close(open_private_dir(folder))
    return folder


def open_private_dir(path: Path, *, create: bool = True, private: bool = True) -> int:
    """A descriptor of directory ``path``, made (mode 0700, parents too) when missing and
    ``create``; UnsafeRunsDir when it is a symlink, not a directory, owned by another user,
    or (``private``) open to group or others. FileNotFoundError when it is missing and not
    ``create``."""
    shown = printable(str(path))
    if create:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and path.is_symlink():
            raise UnsafeRunsDir(
                f"the runs directory {shown} is a symlink; flowdeck lists runs only in a "
                f"directory of its user's own (remove it, or set ${RUNS_DIR_ENV})"
            ) from None
        if exc.errno == errno.ENOTDIR:
            raise UnsafeRunsDir(f"the runs directory {shown} is not a directory") from None
        raise UnsafeRunsDir(
            f"cannot open the runs directory {shown}: {exc.strerror or exc}"
        ) from None
    status = os.fstat(descriptor)
    if status.st_uid != os.geteuid():
        os.close(descriptor)
        raise UnsafeRunsDir(
            f"the runs directory {shown} belongs to another user (uid {status.st_uid}); "
            f"flowdeck lists runs only in a directory of its user's own (set ${RUNS_DIR_ENV})"
        )
    if private and status.st_mode & 0o077:
        os.close(descriptor)
        raise UnsafeRunsDir(
            f"the runs directory {shown} is open to other users (mode "
            f"{stat.S_IMODE(status.st_mode):04o}); chmod 700 it"
        )
    return descriptor


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One running run's endpoint, as written for other shells to find."""

    run_id: str
    name: str
    started: float
    url: str
    token: str
    pid: int
    #: When process ``pid`` started: tells it from a later process given the same pid.
    pid_started: float
    session_dir: str | None = None
    #: The sessions directory the run was started from (recording or not): ``steer`` with
    #: no run named acts only on runs of its own sessions directory.
    sessions_root: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RunEntry:
        return cls(
            run_id=str(raw["run_id"]),
            name=str(raw["name"]),
            started=float(raw["started"]),
            url=str(raw["url"]),
            token=str(raw["token"]),
            pid=int(raw["pid"]),
            pid_started=float(raw["pid_started"]),
            session_dir=raw.get("session_dir"),
            sessions_root=str(raw.get("sessions_root") or ""),
        )

    @property
    def alive(self) -> bool:
        """Whether the process that serves the endpoint still runs."""
        started = process_started(self.pid)
        return started is not None and abs(started - self.pid_started) < 1.0


def process_started(pid: int) -> float | None:
    """The start time of process ``pid``, None when there is none."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def write_private(path: Path, entry: RunEntry, *, private_dir: bool = True) -> None:
    """Write ``entry`` to ``path``, readable by its owner only from the first byte on, in
    a directory checked to be the user's own (:func:`open_private_dir`; a session
    directory, not ``private_dir``, may be readable by others); the file is made new
    (``O_EXCL``, no symlink followed) and renamed into place within that directory."""
    folder = open_private_dir(path.parent, create=private_dir, private=private_dir)
    temporary = f".{path.name}.{os.getpid()}"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(temporary, flags, 0o600, dir_fd=folder)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(entry.to_json(), out)
        os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def read_entry(path: Path) -> RunEntry | None:
    """The entry in ``path``; None when it is missing, unreadable, or not the user's own
    (read within bounds: a FIFO or a device in its place is no entry)."""
    try:
        if os.lstat(path).st_uid != os.geteuid():
            return None
        raw = read_file_json(path, what="run entry", limit=SMALL_FILE_LIMIT)
        return RunEntry.from_json(raw)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def entry_paths(entry: RunEntry, folder: Path | None = None) -> Iterator[Path]:
    """Where ``entry`` is written: the runs directory, and its session directory."""
    yield (folder or runs_dir()) / f"{entry.run_id}.json"
    if entry.session_dir:
        yield Path(entry.session_dir) / SESSION_FILE


def register(entry: RunEntry, folder: Path | None = None) -> list[Path]:
    """Write ``entry`` where other shells look; the files written (one failing place does
    not stop the other: a session directory may be read-only)."""
    written: list[Path] = []
    problems: list[str] = []
    for index, path in enumerate(entry_paths(entry, folder)):
        try:
            write_private(path, entry, private_dir=index == 0)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
        except UnsafeRunsDir as exc:
            problems.append(exc.message)
        else:
            written.append(path)
    if not written:
        raise FlowdeckError(f"cannot write the control endpoint file: {'; '.join(problems)}")
    return written


def unregister(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


def running_runs(folder: Path | None = None) -> list[RunEntry]:
    """The runs going on now, oldest first; entries of processes that are gone are
    removed on the way. UnsafeRunsDir when the directory is not the user's own."""
    folder = folder or runs_dir()
    try:
        os.close(open_private_dir(folder, create=False))
    except FileNotFoundError:
        return []
    entries: list[RunEntry] = []
    for path in sorted(folder.glob("*.json")):
        entry = read_entry(path)
        if entry is None or not entry.alive:
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        entries.append(entry)
    return sorted(entries, key=lambda e: (e.started, e.run_id))


def find_run(
    word: str | None, folder: Path | None = None, *, sessions_root: Path | None = None
) -> RunEntry:
    """The running run ``word`` names: a run id or a unique prefix of one, or a session
    directory. With no word: the only run started from ``sessions_root`` (the sessions
    directory of whoever asks); with none or several such, a SpecError (exit 2) that lists
    the runs going on and asks for one, so a shell of one checkout never steers another's.
    """
    if word and Path(word).is_dir():
        entry = read_entry(Path(word) / SESSION_FILE)
        if entry is None or not entry.alive:
            raise FlowdeckError(f"the session in {word} is not running (no live control endpoint)")
        return entry
    runs = running_runs(folder)
    where = printable(str(folder or runs_dir()))
    if word is None:
        if not runs:
            raise FlowdeckError(
                f"no run is going on (none listed in {where}); start one with flowdeck run, "
                "or give the endpoint's URL and --token-file"
            )
        root = str(sessions_root.resolve()) if sessions_root is not None else None
        mine = [r for r in runs if root is None or r.sessions_root == root]
        if len(mine) == 1:
            return mine[0]
        listed = "; ".join(
            f"{printable(r.run_id)} ({printable(r.name)}, sessions in "
            f"{printable(r.sessions_root) or 'unknown'})"
            for r in runs
        )
        whose = (
            f"{len(mine)} of them started from this sessions directory ({printable(root)})"
            if root is not None
            else "several"
        )
        raise SpecError(
            "run",
            f"{len(runs)} run(s) going on, {whose}: name one: {listed}; "
            "e.g. flowdeck steer RUN_ID inflight=200",
        )
    matches = [r for r in runs if r.run_id.startswith(word.strip())]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise FlowdeckError(
            f"no running run {printable(word)!r}; `flowdeck runs` lists the runs going on and "
            "their ids"
        )
    names = ", ".join(printable(r.run_id) for r in matches)
    raise FlowdeckError(
        f"run id {printable(word)!r} matches {len(matches)} runs ({names}); give more of it"
    )


def entry_for_url(url: str, folder: Path | None = None) -> RunEntry | None:
    """The running run served at ``url``, if this host lists it (its token is then known)."""
    wanted = url.rstrip("/")
    for entry in running_runs(folder):
        if entry.url.rstrip("/") == wanted:
            return entry
    return None
