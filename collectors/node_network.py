"""A private network for a cluster whose links can be cut: one network namespace per node.

A partition drill needs nodes that can lose sight of each other while every one of them
keeps running, which nodes sharing the loopback interface cannot. So a cluster started
with ``isolated=True`` (``flowdeck broker start --nodes 3 --namespaces``) gets:

* a bridge in the root namespace (``fd<id>br``) holding the first address of a private
  ``10.231.X.0/24`` (X: the first third octet no interface of the machine uses);
* per node a network namespace (``<cluster>-n<N>``) holding the far end of a veth pair
  whose near end (``fd<id>h<N>``) is a port of the bridge; node N has the address
  ``10.231.X.(N+1)``, its own loopback and its own epmd, which the node starts itself.

Clients in the root namespace reach every node through the bridge. ``cut(N)`` sets node
N's near end down: the node keeps running, alone, and neither the other nodes nor the
clients can reach it (its TCP connections stay open but silent; no reset reaches anyone),
which is a network partition as RabbitMQ sees one. ``heal(N)`` sets it up again.

Creating namespaces needs root (CAP_NET_ADMIN); the commands are iproute2's ``ip``. The
network goes when the cluster stops (``remove()``) or when its owner dies, however: as a
node's guard is (``collectors/node_guard.py``), ``create()`` starts this file as a script
beside the network with ``spawn_guard``, holding the read end of a pipe only the owner
writes to; on EOF it waits for the nodes' own guards to take the nodes down, kills
whatever still runs in the namespaces (the epmds) and removes the namespaces and the
bridge. Only the standard library is imported, so the guard starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowdeck.collectors.node_guard import GuardProcess

#: The private range the bridges' subnets are taken from (``10.231.X.0/24``).
SUBNET_PREFIX = "10.231"
#: How long a dead owner's network waits for its nodes' guards before killing them.
_NODES_GRACE = 75.0
_ADDRESS = re.compile(r"\binet 10\.231\.(\d{1,3})\.\d{1,3}/")


class NetworkError(Exception):
    """An ``ip`` command failed (the message names it and what it said)."""


def _ip(*args: str, check: bool = True) -> str:
    ip = shutil.which("ip") or "/usr/sbin/ip"
    try:
        done = subprocess.run([ip, *args], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkError(f"ip {' '.join(args)} failed: {exc}") from None
    if check and done.returncode != 0:
        raise NetworkError(
            f"ip {' '.join(args)} failed (exit {done.returncode}): {done.stderr.strip()}; "
            "a cluster in network namespaces needs root and iproute2"
        )
    return done.stdout


def free_subnet() -> int:
    """The first X in 0..255 for which no interface of the machine holds 10.231.X.*."""
    used = {int(found) for found in _ADDRESS.findall(_ip("-4", "-o", "addr", "show"))}
    for octet in range(256):
        if octet not in used:
            return octet
    raise NetworkError(f"every {SUBNET_PREFIX}.X.0/24 is in use; remove an old bridge")


class NodeNetwork:
    """The namespaces, veth pairs and bridge of one isolated cluster (module docstring).

    Nothing exists until ``create()``; ``remove()`` takes it all away again.
    """

    def __init__(self, cluster: str, size: int, subnet: int, token: str | None = None) -> None:
        self.cluster = cluster
        self.size = size
        self.subnet = subnet
        #: Short id in the interface names (at most 15 characters each).
        self.token = token or secrets.token_hex(3)
        self._guard: GuardProcess | None = None

    @classmethod
    def plan(cls, cluster: str, size: int) -> NodeNetwork:
        """A network for ``size`` nodes on a subnet no interface uses now."""
        return cls(cluster, size, free_subnet())

    # -- names and addresses -------------------------------------------------------------

    @property
    def bridge(self) -> str:
        return f"fd{self.token}br"

    @property
    def gateway(self) -> str:
        """The bridge's address: where the nodes see every client of the root namespace."""
        return f"{SUBNET_PREFIX}.{self.subnet}.1"

    def address(self, number: int) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet}.{number + 1}"

    def namespace(self, number: int) -> str:
        return f"{self.cluster}-n{number}"

    def near_end(self, number: int) -> str:
        """Node ``number``'s veth end on the bridge (the one ``cut`` sets down)."""
        return f"fd{self.token}h{number}"

    def far_end(self, number: int) -> str:
        return f"fd{self.token}n{number}"

    def exec_prefix(self, number: int) -> list[str]:
        """The command prefix that runs a program in node ``number``'s namespace (``ip
        netns exec`` execs it: its pid stays the one ``Popen`` returns)."""
        return [shutil.which("ip") or "/usr/sbin/ip", "netns", "exec", self.namespace(number)]

    # -- life cycle ----------------------------------------------------------------------

    @property
    def exists(self) -> bool:
        return Path("/run/netns", self.namespace(1)).exists()

    def create(self) -> NodeNetwork:
        """Make the bridge and every node's namespace and link, and start the guard.

        What was made is removed again when a step fails (NetworkError, naming it)."""
        if self.exists:
            return self
        # Imported here: run as the guard script, this file imports only the standard
        # library (flowdeck.collectors would cost the guard a second and 30 MB).
        from flowdeck.collectors.node_guard import spawn_guard

        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for number in range(1, self.size + 1):
                namespace, near, far = (
                    self.namespace(number),
                    self.near_end(number),
                    self.far_end(number),
                )
                _ip("netns", "add", namespace)
                _ip("link", "add", near, "type", "veth", "peer", "name", far)
                _ip("link", "set", far, "netns", namespace)
                _ip("link", "set", near, "master", self.bridge)
                _ip("link", "set", near, "up")
                inside = ("-n", namespace)
                _ip(*inside, "addr", "add", f"{self.address(number)}/24", "dev", far)
                _ip(*inside, "link", "set", far, "up")
                _ip(*inside, "link", "set", "lo", "up")
            self._guard = spawn_guard(Path(__file__), [json.dumps(self.to_state())])
        except BaseException:
            self.remove()
            raise
        return self

    def remove(self) -> None:
        """Kill whatever still runs in the namespaces, remove them and the bridge."""
        self.stand_guard_down()
        remove_network(self.to_state())

    def stand_guard_down(self) -> None:
        """The owner stops or hands over the network on purpose: the guard leaves."""
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.stand_down()

    # -- the drill -----------------------------------------------------------------------

    def is_cut(self, number: int) -> bool:
        """True while node ``number``'s link to the bridge is down."""
        shown = _ip("-o", "link", "show", self.near_end(number))
        flags = shown.split("<", 1)[1].split(">", 1)[0].split(",") if "<" in shown else []
        return "UP" not in flags

    def cut(self, number: int) -> bool:
        """Cut node ``number`` off the bridge; False when it was cut already."""
        if self.is_cut(number):
            return False
        _ip("link", "set", self.near_end(number), "down")
        return True

    def heal(self, number: int) -> bool:
        """Put node ``number`` back on the bridge; False when it was not cut."""
        if not self.is_cut(number):
            return False
        _ip("link", "set", self.near_end(number), "up")
        return True

    # -- state ---------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "size": self.size,
            "subnet": self.subnet,
            "token": self.token,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> NodeNetwork:
        return cls(str(state["cluster"]), int(state["size"]), int(state["subnet"]), state["token"])


def namespace_pids(namespace: str) -> list[int]:
    """Processes running in the namespace (``ip netns pids``); none when it is gone."""
    listed = _ip("netns", "pids", namespace, check=False)
    return [int(word) for word in listed.split() if word.isdigit()]


def _is_epmd(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "epmd"
    except OSError:
        return False


def remove_network(state: Mapping[str, Any], *, wait_for_nodes: float = 0.0) -> None:
    """Remove a network described by ``NodeNetwork.to_state()``; give the nodes still
    running in it up to ``wait_for_nodes`` seconds to go first (their guards stop them)."""
    network = NodeNetwork.from_state(state)
    namespaces = [network.namespace(n) for n in range(1, network.size + 1)]
    deadline = time.monotonic() + wait_for_nodes
    while time.monotonic() < deadline and any(
        not _is_epmd(pid) for ns in namespaces for pid in namespace_pids(ns)
    ):
        time.sleep(0.5)
    for namespace in namespaces:
        for _ in range(50):
            pids = namespace_pids(namespace)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        # the namespace goes with its last process; the veth pair with the namespace
        _ip("netns", "del", namespace, check=False)
    _ip("link", "del", network.bridge, check=False)


def guard(owner_fd: int, state: Mapping[str, Any]) -> int:
    """Wait for the owner's word (leave) or its death (remove the network)."""
    while True:
        ready, _, _ = select.select([owner_fd], [], [], None)
        if ready:
            try:
                said = os.read(owner_fd, 1)
            except OSError:
                said = b""
            if said:
                return 0
            break
    remove_network(state, wait_for_nodes=_NODES_GRACE)
    return 0


def main(argv: Sequence[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    owner_fd, state = argv
    return guard(int(owner_fd), json.loads(state))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
