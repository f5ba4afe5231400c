"""One owner for the private servers a flowdeck process starts: RabbitMQ nodes, Prometheus.

When the operator names no broker, flowdeck runs on a private node. Booting one costs
seconds, so a cockpit session keeps the node it started for its next launches and stops it
on quit; ``flowdeck run`` starts one for the run and stops it at the end. Both go through a
``Provisioner``: ``node()`` returns the running node or starts one, ``prometheus()`` starts a
throwaway Prometheus server, ``cluster(n)`` a private N-node cluster (kept and reused like
the node), ``close()`` stops everything it started.

Every node a provisioner starts is registered in the user's runtime directory (one JSON file
per node, with the owner's pid, start time and command), so ``flowdeck broker status`` in
another terminal sees the cockpit's node or a running ``flowdeck run``'s. An entry whose
owner is gone (or whose pid now belongs to another process) is removed by whoever reads it;
the node itself is already stopped by its guard (``collectors/node_guard.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType

import platformdirs
import psutil

from flowdeck.collectors.local_broker import LocalBroker, LocalCluster
from flowdeck.collectors.prometheus_server import PrometheusServer

#: Overrides the directory where started nodes are registered (tests, several users).
REGISTRY_ENV = "FLOWDECK_RUNTIME_DIR"


def registry_dir() -> Path:
    """``$FLOWDECK_RUNTIME_DIR`` if set, else ``nodes`` in the user's runtime directory."""
    if os.environ.get(REGISTRY_ENV):
        return Path(os.environ[REGISTRY_ENV])
    # Without XDG_RUNTIME_DIR (a root shell, a container) platformdirs falls back to a
    # per-user folder under /tmp, which serves as well, and warns on stderr about it: the
    # warning would stand in every command's output, so it is not shown.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return Path(platformdirs.user_runtime_dir("flowdeck")) / "nodes"


@dataclass(frozen=True, slots=True)
class RegisteredNode:
    """A private node some flowdeck process started and still owns."""

    nodename: str
    uri: str
    management_url: str
    prometheus_url: str
    base_dir: str
    node_pid: int
    owner_pid: int
    owner_started: float
    owner_command: str
    #: The private cluster the node belongs to ("" for a node on its own).
    cluster: str = ""


def _process_started(pid: int) -> float | None:
    """The start time of process ``pid`` (what tells it from a later one with its pid)."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def _entry_alive(entry: RegisteredNode) -> bool:
    started = _process_started(entry.owner_pid)
    # create_time is read from /proc in clock ticks: allow for rounding, not for a new process
    if started is None or abs(started - entry.owner_started) > 1.0:
        return False
    try:
        node = psutil.Process(entry.node_pid)
        return node.status() != psutil.STATUS_ZOMBIE and "rabbitmq" in " ".join(node.cmdline())
    except psutil.Error:
        return False


def registered_nodes(directory: Path | None = None) -> list[RegisteredNode]:
    """Running private nodes flowdeck processes on this machine started, oldest first.

    Entries whose owner or node is gone, and unreadable ones, are removed.
    """
    folder = directory or registry_dir()
    found: list[RegisteredNode] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = RegisteredNode(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _entry_alive(entry):
            found.append(entry)
        else:
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda entry: entry.owner_started)


class Provisioner:
    """Starts private servers on demand, reuses them, and stops them on ``close()``.

    ``name`` prefixes the node's name (``flowdeck-cockpit``, ``flowdeck-run``). Thread-safe:
    the cockpit calls ``node()`` from a worker thread.
    """

    def __init__(
        self,
        name: str = "flowdeck",
        *,
        registry: Path | None = None,
    ) -> None:
        self.name = name
        self._registry = registry
        self._lock = threading.Lock()
        self._node: LocalBroker | None = None
        self._entry: Path | None = None
        self._servers: list[PrometheusServer] = []
        self._cluster: LocalCluster | None = None
        self._cluster_entries: list[Path] = []
        #: How many times ``node()`` handed out a node it had started before.
        self.reused = 0

    @property
    def running_node(self) -> LocalBroker | None:
        """The node this provisioner started, if it still runs."""
        node = self._node
        return node if node is not None and node.running else None

    def node(self) -> LocalBroker:
        """The private node this provisioner runs, started now if there is none (seconds).

        Raises SourceError when the node cannot start (nothing is left running then).
        """
        with self._lock:
            if self._node is not None and self._node.running:
                self.reused += 1
                return self._node
            self._stop_node()  # one that died: its registration goes too
            node = LocalBroker(name=self.name)
            try:
                node.start()
            except BaseException:
                node.stop()
                raise
            self._node = node
            self._entry = self._register(node)
            return node

    def cluster(self, size: int = 3) -> LocalCluster:
        """The private cluster of ``size`` nodes this provisioner runs, started now if there
        is none of that size with every node up (tens of seconds on 2 cores).

        Every node is registered, named with its cluster. Raises SourceError when the
        cluster cannot start (nothing is left running then).
        """
        with self._lock:
            cluster = self._cluster
            if (
                cluster is not None
                and len(cluster.nodes) == size
                and all(node.running for node in cluster.nodes)
            ):
                self.reused += 1
                return cluster
            self._stop_cluster()
            cluster = LocalCluster(size, name=self.name)
            try:
                cluster.start()
            except BaseException:
                cluster.stop(cleanup=True)
                raise
            self._cluster = cluster
            self._cluster_entries = [
                entry
                for node in cluster.nodes
                if (entry := self._register(node, cluster=cluster.name)) is not None
            ]
            return cluster

    def prometheus(
        self, targets: Iterable[str], *, scrape_timeout: float = 20.0
    ) -> PrometheusServer:
        """A new private Prometheus server scraping ``targets``, up and scraping them.

        Raises SourceError when it cannot start or scrape (nothing is left running then).
        """
        server = PrometheusServer(targets)
        with self._lock:
            self._servers.append(server)
        try:
            server.start()
            server.wait_scraped(timeout=scrape_timeout)
        except BaseException:
            self._stop_server(server)
            raise
        return server

    def stop_prometheus(self, server: PrometheusServer) -> None:
        self._stop_server(server)

    def close(self) -> None:
        """Stop every server this provisioner started, and unregister its node."""
        with self._lock:
            servers, self._servers = self._servers, []
            for server in servers:
                with contextlib.suppress(Exception):
                    server.stop()
            self._stop_node()
            self._stop_cluster()

    def __enter__(self) -> Provisioner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------

    def _stop_server(self, server: PrometheusServer) -> None:
        with self._lock:
            if server in self._servers:
                self._servers.remove(server)
        server.stop()

    def _stop_node(self) -> None:
        node, self._node = self._node, None
        entry, self._entry = self._entry, None
        if entry is not None:
            entry.unlink(missing_ok=True)
        if node is not None:
            node.stop()

    def _stop_cluster(self) -> None:
        cluster, self._cluster = self._cluster, None
        entries, self._cluster_entries = self._cluster_entries, []
        for entry in entries:
            entry.unlink(missing_ok=True)
        if cluster is not None:
            cluster.stop()

    def _register(self, node: LocalBroker, *, cluster: str = "") -> Path | None:
        """Write the node's registry entry; a registry that cannot be written only costs
        ``broker status`` its view of this node, never the run."""
        if node.pid is None:
            return None
        me = psutil.Process()
        try:
            command = " ".join(me.cmdline())
        except psutil.Error:
            command = ""
        entry = RegisteredNode(
            nodename=node.nodename,
            uri=node.uri,
            management_url=node.management_url,
            prometheus_url=node.prometheus_url,
            base_dir=str(node.base_dir),
            node_pid=node.pid or 0,
            owner_pid=os.getpid(),
            owner_started=me.create_time(),
            owner_command=command,
            cluster=cluster,
        )
        folder = self._registry or registry_dir()
        path = folder / f"{node.nodename.split('@')[0]}.json"
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(entry), indent=2))
            tmp.chmod(0o600)
            tmp.replace(path)
        except OSError:
            return None
        return path
