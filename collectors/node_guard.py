"""The guard that takes a private RabbitMQ node down with the process that owns it.

``LocalBroker.start()`` runs this file as a script (``python node_guard.py FD PGID DIR
REMOVE``), in a session of its own, beside every node it starts. The owner keeps the write
end of a pipe whose read end ``FD`` is the guard's, and nobody else holds it:

* the owner stops or detaches the node: it writes one byte first, and the guard leaves;
* the owner dies, however (SIGKILL included): the kernel closes its end, the guard reads
  EOF and stops the node's process group ``PGID`` (the start script and the Erlang VM),
  then removes the node's data directory ``DIR`` when ``REMOVE`` is 1 (a node in a
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
import sys
import time

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


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    owner_fd, pgid, base_dir, remove = argv
    return guard(int(owner_fd), int(pgid), base_dir, remove == "1")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
