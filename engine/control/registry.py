"""Where a run's control endpoint is written, so ``flowdeck steer``, ``runs`` and ``attach``
find it from another shell.

Each running run with an endpoint has one entry: a JSON file with its address, its token,
the process that serves it and the session it records, mode 0600 (the token steers the
run). It is written twice: ``control.json`` in the session directory (found from a session
id, like every other command that takes one) and ``<run id>.json`` in the runs directory
(``$FLOWDECK_RUNS_DIR``, else ``runs`` in the user's runtime directory), which lists the
runs going on. Both go when the run ends; an entry whose process is gone (killed) is
ignored and removed by whoever reads it.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import platformdirs
import psutil

from flowdeck.engine.errors import FlowdeckError

#: Overrides the directory that lists running runs (tests, several users on one host).
RUNS_DIR_ENV = "FLOWDECK_RUNS_DIR"
#: The endpoint file in a recorded run's session directory.
SESSION_FILE = "control.json"


def runs_dir() -> Path:
    """``$FLOWDECK_RUNS_DIR`` if set, else ``runs`` in the user's runtime directory."""
    if os.environ.get(RUNS_DIR_ENV):
        return Path(os.environ[RUNS_DIR_ENV])
    # Without XDG_RUNTIME_DIR (a root shell, a container) platformdirs falls back to a
    # per-user folder under /tmp and warns about it on stderr; the folder serves as well.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return Path(platformdirs.user_runtime_dir("flowdeck")) / "runs"


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


def write_private(path: Path, entry: RunEntry) -> None:
    """Write ``entry`` to ``path``, readable by its owner only from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        json.dump(entry.to_json(), out)
    os.replace(temporary, path)


def read_entry(path: Path) -> RunEntry | None:
    """The entry in ``path``; None when it is missing or unreadable."""
    try:
        return RunEntry.from_json(json.loads(path.read_text(encoding="utf-8")))
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
    for path in entry_paths(entry, folder):
        try:
            write_private(path, entry)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
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
    removed on the way."""
    folder = folder or runs_dir()
    entries: list[RunEntry] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        entry = read_entry(path)
        if entry is None or not entry.alive:
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        entries.append(entry)
    return sorted(entries, key=lambda e: (e.started, e.run_id))


def find_run(word: str | None, folder: Path | None = None) -> RunEntry:
    """The running run ``word`` names: a run id or a unique prefix of one, a session
    directory, or nothing for the only run going on."""
    if word and Path(word).is_dir():
        entry = read_entry(Path(word) / SESSION_FILE)
        if entry is None or not entry.alive:
            raise FlowdeckError(f"the session in {word} is not running (no live control endpoint)")
        return entry
    runs = running_runs(folder)
    where = folder or runs_dir()
    if word is None:
        if len(runs) == 1:
            return runs[0]
        if not runs:
            raise FlowdeckError(
                f"no run is going on (none listed in {where}); start one with flowdeck run, "
                "or give the endpoint's URL and --token-file"
            )
        names = ", ".join(r.run_id for r in runs)
        raise FlowdeckError(f"{len(runs)} runs are going on ({names}); name one")
    matches = [r for r in runs if r.run_id.startswith(word.strip())]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise FlowdeckError(
            f"no running run {word!r}; `flowdeck runs` lists the runs going on and their ids"
        )
    names = ", ".join(r.run_id for r in matches)
    raise FlowdeckError(f"run id {word!r} matches {len(matches)} runs ({names}); give more of it")


def entry_for_url(url: str, folder: Path | None = None) -> RunEntry | None:
    """The running run served at ``url``, if this host lists it (its token is then known)."""
    wanted = url.rstrip("/")
    for entry in running_runs(folder):
        if entry.url.rstrip("/") == wanted:
            return entry
    return None
