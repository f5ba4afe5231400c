"""The guard that takes a private server down with the process that owns it.

A private RabbitMQ node (``LocalBroker``) and a private Prometheus server
(``PrometheusServer``) each run in a session of their own so Ctrl-C reaches flowdeck first;
an ``atexit`` hook alone would orphan them when flowdeck is killed (SIGKILL, OOM). So
``OwnerGuard`` runs this file as a script (``python node_guard.py FD PGID DIR REMOVE``), in a
session of its own, beside every server started. The owner keeps the write end of a pipe
whose read end ``FD`` is the guard's, and nobody else holds it:

* the owner stops or detaches the node: it writes one byte first, and the guard leaves;
* the owner dies, however (SIGKILL included): the kernel closes its end, the guard reads
  EOF and stops the server's process group ``PGID`` (for a node: the start script and the
  Erlang VM), then removes its data directory ``DIR`` when ``REMOVE`` is 1 (a node in a
  temporary directory nobody will restart);
* the node exits by itself: the guard leaves too.

A node whose data is kept (``REMOVE`` 0) is stopped gracefully (SIGTERM, as ``stop()``
does) so its durable queues and messages are there for a restart; a throwaway node is
killed at once. Only the standard library is imported: the guard runs as a plain script,
starts in milliseconds and holds little memory for as long as its node runs.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

#: How often the guard checks that its node still runs (seconds).
_POLL = 1.0
#: How long a node with kept data gets to shut down before it is killed (seconds).
_GRACEFUL = 60.0


def group_alive(pgid: int) -> bool:
    """True while any process of the group ``pgid`` exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _wait_group_gone(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def take_down(pgid: int, base_dir: str, remove: bool) -> None:
    """Stop the node whose owner is gone, and remove its throwaway data."""
    if remove:
        _signal_group(pgid, signal.SIGKILL)
        _wait_group_gone(pgid, 10.0)
        shutil.rmtree(base_dir, ignore_errors=True)
        return
    # The start script traps SIGTERM and stops the VM in order (messages on disk).
    try:
        os.kill(pgid, signal.SIGTERM)
    except ProcessLookupError:
        _signal_group(pgid, signal.SIGTERM)
    if not _wait_group_gone(pgid, _GRACEFUL):
        _signal_group(pgid, signal.SIGKILL)
        _wait_group_gone(pgid, 10.0)


def guard(owner_fd: int, pgid: int, base_dir: str, remove: bool) -> int:
    """Wait for the owner to stand the guard down or to die; see the module docstring."""
    while True:
        ready, _, _ = select.select([owner_fd], [], [], _POLL)
        if ready:
            try:
                said = os.read(owner_fd, 1)
            except OSError:
                said = b""
            if said:
                return 0  # the owner stopped or detached the node itself
            break
        if not group_alive(pgid):
            return 0
    take_down(pgid, base_dir, remove)
    return 0


class OwnerGuard:
    """The owner's side of a guard: the write end of the pipe, and the guard process.

    ``OwnerGuard(pgid, base_dir, remove)`` starts the guard of the process group ``pgid``
    (the pid of a child started with ``start_new_session=True``); ``stand_down()`` before
    stopping or handing over the server on purpose.
    """

    def __init__(self, pgid: int, base_dir: Path | str, remove: bool) -> None:
        read_fd, write_fd = os.pipe()  # not inheritable: no other child holds the owner's end
        argv = [sys.executable, str(Path(__file__)), str(read_fd), str(pgid), str(base_dir)]
        try:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                [*argv, "1" if remove else "0"],
                pass_fds=(read_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,
            )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        self._fd: int | None = write_fd

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def stand_down(self) -> None:
        """Tell the guard its server is stopped or handed over on purpose; wait for it."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, b"x")
            os.close(fd)
        guard, self._process = self._process, None
        if guard is not None:
            try:
                guard.wait(5.0)
            except subprocess.TimeoutExpired:
                guard.kill()
                guard.wait()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    owner_fd, pgid, base_dir, remove = argv
    return guard(int(owner_fd), int(pgid), base_dir, remove == "1")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
