"""Private RabbitMQ nodes for the tests that break a broker (fixture ``private_broker``),
and private clusters owned by another process (``owned_cluster``)."""

from __future__ import annotations

import json
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import psutil

from flowdeck.collectors.local_broker import LocalBroker, LocalCluster


class PrivateNodes:
    """Private RabbitMQ nodes (collectors.LocalBroker) for tests that break a broker.

    ``nodes(file_limit=200)`` starts one, ready, with LocalBroker's arguments. Nodes take
    seconds to start and the machine is small: share one per module (or package) and
    ``discard`` it when the module is done, so idle nodes do not pile up. Test nodes are
    thrown away, so they are killed rather than shut down gracefully (seconds each).
    """

    def __init__(self) -> None:
        self.started: list[LocalBroker] = []

    def __call__(self, **options: Any) -> LocalBroker:
        node = LocalBroker(name="flowdeck-test", **options)
        self.started.append(node)
        return node.start()

    def discard(self, node: LocalBroker) -> None:
        node.kill()
        shutil.rmtree(node.base_dir, ignore_errors=True)
        if node in self.started:
            self.started.remove(node)

    def discard_all(self) -> None:
        for node in list(self.started):
            self.discard(node)


#: Another flowdeck process owning a private cluster: prints the cluster's state, then waits
#: (bounded) to be killed, as a cockpit or a `flowdeck run` would hold one.
_CLUSTER_OWNER = """
import json, sys, time
from flowdeck.collectors import Provisioner
cluster = Provisioner(name="flowdeck-test").cluster(int(sys.argv[1]))
print(json.dumps(cluster.to_state()), flush=True)
time.sleep(900)
"""


@dataclass
class OwnedCluster:
    """A private cluster another process owns (``owner``), and a handle on it.

    The handle (``LocalCluster.attach``) steers the nodes (kill one, read its ports) without
    owning them: the nodes' guards watch ``owner``, so killing it must take them down.
    """

    owner: subprocess.Popen[str]
    cluster: LocalCluster

    def discard(self) -> None:
        """Kill the owner (its guards stop the nodes), then whatever is left."""
        if self.owner.poll() is None:
            self.owner.kill()
        self.owner.wait(10)
        deadline = time.monotonic() + 20
        while cluster_vms(self.cluster.name) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.cluster.kill()
        shutil.rmtree(self.cluster.base_dir, ignore_errors=True)


def owned_cluster(size: int, env: dict[str, str], *, timeout: float = 240.0) -> OwnedCluster:
    """Start a ``size``-node cluster in an owner process (through its Provisioner, so its
    nodes are registered in ``env``'s FLOWDECK_RUNTIME_DIR); fail within ``timeout``."""
    owner = subprocess.Popen(
        [sys.executable, "-c", _CLUSTER_OWNER, str(size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert owner.stdout is not None and owner.stderr is not None
    ready, _, _ = select.select([owner.stdout], [], [], timeout)
    line = owner.stdout.readline() if ready else ""
    if not line.startswith("{"):
        owner.kill()
        raise AssertionError(f"the cluster's owner said {line!r}: {owner.stderr.read()[-2000:]}")
    return OwnedCluster(owner, LocalCluster.attach(json.loads(line)))


def cluster_vms(cluster_name: str) -> list[int]:
    """Pids of the Erlang VMs (beam.smp) running a node of the cluster ``cluster_name``."""
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if not (proc.info["name"] or "").startswith("beam"):
                continue
            # the node's name is in its environment, not on its command line
            if proc.environ().get("RABBITMQ_NODENAME", "").startswith(f"{cluster_name}-n"):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found
