"""The guard that takes a private server down with the process that owns it.

A private RabbitMQ node (``LocalBroker``) and a private Prometheus server
(``PrometheusServer``) each run in a session of their own so Ctrl-C reaches flowdeck first;
an ``atexit`` hook alone would orphan them when flowdeck is killed (SIGKILL, OOM). So
``OwnerGuard`` runs this file as a script (``python node_guard.py FD PGID DIR REMOVE
[PARENT]``), in a session of its own, beside every server started (one per node of a
private cluster, so a node restarted alone gets a guard of its own). The owner keeps the
write end of a pipe whose read end ``FD`` is the guard's, and nobody else holds it:

* the owner stops or detaches the node: it writes one byte first, and the guard leaves;
* the owner dies, however (SIGKILL included): the kernel closes its end, the guard reads
  EOF and stops the server's process group ``PGID`` (for a node: the start script and the
  Erlang VM), then removes its data directory ``DIR`` when ``REMOVE`` is 1 (a node in a
  temporary directory nobody will restart), and then ``PARENT`` if that left it empty (the
  directory of a throwaway cluster, whose nodes' guards each remove their own node's data:
  the last one to finish removes the cluster's);
* the node exits by itself (it crashed, or another process killed it): the guard of a node
  whose data is kept leaves too; the guard of a throwaway node stays, without watching the
  group any more, so that the data goes when the owner dies (the owner may also start the
  node again, in the same directory: that start gets a guard of its own).

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
from collections.abc import Sequence
from pathlib import Path

#: How often the guard checks that its node still runs (seconds).
_POLL = 1.0
#: How long a node with kept data gets to shut down before it is killed (seconds).
_GRACEFUL = 60.0


def group_alive(pgid: int) -> bool:
    """True while any process of the group ``pgid`` runs (a zombie does not count).

    A node killed by another process (``flowdeck broker kill``, a test) leaves its start
    script a zombie until the owner reaps it, and a zombie still answers ``killpg(pgid,
    0)``: a guard that took it for its node would, on the owner's death, remove the data of
    the node since started again in the same directory.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if _runs_in_group(str(pgid), pgid):  # the leader (the start script): the usual answer
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    return any(entry.isdigit() and _runs_in_group(entry, pgid) for entry in entries)


def _runs_in_group(pid: str, pgid: int) -> bool:
    """Process ``pid`` exists, is no zombie, and belongs to the group ``pgid``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # after the command in parentheses: state, parent pid, process group, ...
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X")


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


def remove_data(base_dir: str, parent: str | None) -> None:
    """Remove a throwaway node's data, and its cluster's directory once that is empty."""
    shutil.rmtree(base_dir, ignore_errors=True)
    if parent is not None:
        with contextlib.suppress(OSError):  # another node's data is still there
            os.rmdir(parent)


def take_down(pgid: int, base_dir: str, remove: bool, parent: str | None = None) -> None:
    """Stop the node whose owner is gone, and remove its throwaway data."""
    if remove:
        _signal_group(pgid, signal.SIGKILL)
        _wait_group_gone(pgid, 10.0)
        remove_data(base_dir, parent)
        return
    # The start script traps SIGTERM and stops the VM in order (messages on disk).
    try:
        os.kill(pgid, signal.SIGTERM)
    except ProcessLookupError:
        _signal_group(pgid, signal.SIGTERM)
    if not _wait_group_gone(pgid, _GRACEFUL):
        _signal_group(pgid, signal.SIGKILL)
        _wait_group_gone(pgid, 10.0)


def guard(owner_fd: int, pgid: int, base_dir: str, remove: bool, parent: str | None = None) -> int:
    """Wait for the owner to stand the guard down or to die; see the module docstring."""
    group_gone = False
    while True:
        # once the node is gone, only the owner's word (or its death) is left to wait for
        ready, _, _ = select.select([owner_fd], [], [], None if group_gone else _POLL)
        if ready:
            try:
                said = os.read(owner_fd, 1)
            except OSError:
                said = b""
            if said:
                return 0  # the owner stopped or detached the node itself
            break
        if not group_alive(pgid):
            if not remove:
                return 0
            group_gone = True
    if group_gone:
        # never signal a group id that may since name someone else's processes
        remove_data(base_dir, parent)
    else:
        take_down(pgid, base_dir, remove, parent)
    return 0


class GuardProcess:
    """A guard process and the owner's write end of the pipe it watches.

    ``stand_down()`` before stopping or handing over what it guards on purpose: the guard
    reads the byte and leaves. Should the owner die instead, the kernel closes the write
    end and the guard reads EOF.
    """

    def __init__(self, process: subprocess.Popen[bytes], owner_fd: int) -> None:
        self._process: subprocess.Popen[bytes] | None = process
        self._fd: int | None = owner_fd

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def stand_down(self) -> None:
        """Tell the guard its charge is stopped or handed over on purpose; wait for it."""
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


def spawn_guard(script: Path | str, args: Sequence[str]) -> GuardProcess:
    """Run ``script FD *args`` as a guard, in a session of its own, watching the owner.

    ``FD`` is the read end of a new pipe, held by the guard alone; the owner keeps the write
    end (in the returned ``GuardProcess``), so the owner's death, however it comes, is EOF
    for the guard. This guard script and ``node_network.py``'s are started this way.
    """
    read_fd, write_fd = os.pipe()  # not inheritable: no other child holds the owner's end
    try:
        process = subprocess.Popen(
            [sys.executable, str(script), str(read_fd), *args],
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
    return GuardProcess(process, write_fd)


class OwnerGuard:
    """The owner's side of a server's guard (see the module docstring).

    ``OwnerGuard(pgid, base_dir, remove)`` starts the guard of the process group ``pgid``
    (the pid of a child started with ``start_new_session=True``); ``stand_down()`` before
    stopping or handing over the server on purpose. ``remove_parent`` is also removed after
    ``base_dir`` when that leaves it empty (a throwaway cluster's directory).
    """

    def __init__(
        self,
        pgid: int,
        base_dir: Path | str,
        remove: bool,
        *,
        remove_parent: Path | str | None = None,
    ) -> None:
        args = [str(pgid), str(base_dir), "1" if remove else "0"]
        if remove_parent is not None:
            args.append(str(remove_parent))
        self._guard = spawn_guard(Path(__file__), args)

    @property
    def pid(self) -> int | None:
        return self._guard.pid

    def stand_down(self) -> None:
        """Tell the guard its server is stopped or handed over on purpose; wait for it."""
        self._guard.stand_down()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    owner_fd, pgid, base_dir, remove, *parent = argv
    return guard(int(owner_fd), int(pgid), base_dir, remove == "1", parent[0] if parent else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
