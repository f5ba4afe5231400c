"""One tour per ``flowdeck serve --demo``: the first browser tab presents it, the others
watch it.

textual-serve starts one app process per browser tab (per websocket), so without this each
tab would start a tour of its own: a second load on the same broker, a second private node,
two stories told over each other. The served command is ``flowdeck demo --shared DIR``
(DIR made by ``flowdeck serve`` for its lifetime). The first process to take DIR's
presenter lock (an ``flock``, held for the process's life and released by the kernel when
it ends, however it ends) presents: it runs the tour and, once its run has started, writes
the run's session directory to DIR. Every other tab's process finds the lock taken and
watches: it follows that run through its control endpoint (as ``flowdeck attach`` does),
shows the step the presenter's settings are at, and steers nothing. When the presenter's
tab closes, the next tab opened presents a new tour.

No Textual here: the command line decides which part a process plays before the app runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import IO

#: The lock the presenting process holds; the file naming the presented run.
LOCK_FILE = "presenter.lock"
RUN_FILE = "tour.json"


class TourShare:
    """The shared directory of one ``flowdeck serve --demo``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock: IO[str] | None = None

    @property
    def presenting(self) -> bool:
        return self._lock is not None

    def present(self) -> bool:
        """Take the presenter's part if no other process has it (True), for as long as this
        process lives; False when another process presents."""
        if self._lock is not None:
            return True
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = (self.folder / LOCK_FILE).open("a", encoding="utf-8")
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            return False
        self._lock = lock
        # A tour presented before, by a process since gone, named its run here.
        with contextlib.suppress(FileNotFoundError):
            (self.folder / RUN_FILE).unlink()
        return True

    def publish(self, session_dir: Path) -> None:
        """Name the presented run for the watchers (its session directory holds its control
        endpoint, ``control.json``)."""
        target = self.folder / RUN_FILE
        temporary = target.with_name(f".{RUN_FILE}.{os.getpid()}")
        temporary.write_text(json.dumps({"session_dir": str(session_dir)}), encoding="utf-8")
        os.replace(temporary, target)

    def presented_run(self) -> Path | None:
        """The session directory of the run being presented; None while the presenter's run
        has not started (or nobody presents)."""
        if self.presenter_gone():
            return None
        try:
            raw = json.loads((self.folder / RUN_FILE).read_text(encoding="utf-8"))
            return Path(str(raw["session_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def presenter_gone(self) -> bool:
        """Whether no process holds the presenter's lock (its tab was closed)."""
        if self._lock is not None:
            return False
        path = self.folder / LOCK_FILE
        if not path.exists():
            return True
        with path.open("a", encoding="utf-8") as probe:
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
            fcntl.flock(probe.fileno(), fcntl.LOCK_UN)
            return True

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None
