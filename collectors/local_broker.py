"""A private RabbitMQ node started from the installed ``rabbitmq-server``.

flowdeck uses one when the operator names no broker, and tests and demos use one whenever
they need to break a broker (alarms, kill, restart) without touching the shared one. Each
node has its own name, data and log directory, Erlang cookie and ports (all on 127.0.0.1),
the management and prometheus plugins on, and statistics every second, so its figures are
fresh enough to watch a run by.

Start-up costs seconds (the Erlang VM boots, then the plugins): share one node per test
module. The default epmd on port 4369 is shared with every other node on the machine, which
is fine: it only maps node names to distribution ports.

A node never outlives the process that started it, however that process dies: ``start()``
runs a tiny guard beside it (``collectors/node_guard.py``, in a session of its own) that
holds one end of a pipe whose other end only the owner holds. When the owner dies, even by
SIGKILL, the kernel closes its end and the guard stops the node (and removes a throwaway
node's data). A guard is used rather than ``PR_SET_PDEATHSIG`` on the start script because
that signal follows the *thread* that spawned the node, and the cockpit starts its node
from a short-lived worker thread. ``stop()``, ``kill()`` and ``detach()`` stand the guard
down first; ``detach()`` is how ``flowdeck broker start`` leaves a node to the user.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import random
import re
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx
import psutil

from flowdeck.collectors.broker_settings import broker_setting
from flowdeck.collectors.errors import SourceError
from flowdeck.collectors.node_guard import OwnerGuard
from flowdeck.collectors.node_network import NetworkError, NodeNetwork
from flowdeck.collectors.untrusted import SPEC_FILE_LIMIT, read_file_json

#: Where Debian puts the real scripts; ``/usr/sbin/rabbitmq-server`` is a wrapper that
#: switches to the ``rabbitmq`` user and its files, which a private node must not use.
_DEBIAN_SCRIPTS = Path("/usr/lib/rabbitmq/bin")
_INSTALL_HINT = "run scripts/setup or apt-get install rabbitmq-server"
#: The CLI tools (rabbitmqctl) take a distribution port this far above the node's.
_CLI_DIST_OFFSET = 10000
_CLI_DIST_RANGE = 10

#: Erlang's ``+S Schedulers:SchedulersOnline`` argument.
_SCHEDULERS = re.compile(r"[1-9][0-9]{0,2}(:[1-9][0-9]{0,2})?")

#: RabbitMQ's ``cluster_partition_handling`` modes.
PARTITION_HANDLING = ("ignore", "pause_minority", "autoheal")
#: Seconds of ``net_ticktime`` and of the AMQP heartbeat on nodes in network namespaces.
ISOLATED_NET_TICKTIME = 10
ISOLATED_HEARTBEAT = 5

_T = TypeVar("_T")
_node_numbers = itertools.count(1)
_live: set[LocalBroker] = set()
_live_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files for a node's TLS listeners (AMQPS and HTTPS management).

    ``verify_peer`` asks clients for a certificate signed by ``ca_file``;
    ``fail_if_no_peer_cert`` refuses clients that have none.
    """

    ca_file: Path
    cert_file: Path
    key_file: Path
    verify_peer: bool = True
    fail_if_no_peer_cert: bool = False


def find_tool(name: str) -> Path:
    """The RabbitMQ script ``name`` (``rabbitmq-server``, ``rabbitmqctl``) to run directly.

    Raises SourceError with the install command when RabbitMQ is not installed.
    """
    debian = _DEBIAN_SCRIPTS / name
    if debian.is_file() and os.access(debian, os.X_OK):
        return debian
    found = shutil.which(name)
    if found is None:
        raise SourceError(f"{name} is not installed; {_INSTALL_HINT}")
    return Path(found)


#: Where picked ports start: above the well-known and registered services most machines run.
_PICKED_LOW = 20000
#: Picks from the operating system's randomness, not the ``random`` module's state, which
#: tests and libraries seed: two test processes' first private nodes, booting at once, picked
#: the same distribution port and one died at boot (``dist_port_already_used``).
_PICKS = random.SystemRandom()
_PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_low() -> int:
    """The first port the kernel hands to outgoing connections (Linux's
    ``ip_local_port_range``; 32768 where it cannot be read)."""
    try:
        return int(_PORT_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(*, below: int = 65536) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, below ``below``, and below the
    range the kernel hands to outgoing connections: a port picked there could be taken as
    the local port of any connection (a load run opens hundreds) between the pick and the
    listener's bind, and a node whose plugin listener then failed to bind died at boot
    (``rabbitmq_prometheus`` ``bad_return``, seen beside a CPU hog)."""
    top = min(below, ephemeral_low())
    if top - 1 <= _PICKED_LOW:  # an unusual port range: anywhere below ``below``
        top = below
    low = _PICKED_LOW if top - 1 > _PICKED_LOW else 1024
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", _PICKS.randint(low, top - 1)))
            except OSError:
                continue
            port: int = sock.getsockname()[1]
        return port
    raise SourceError(f"found no free TCP port below {top} on 127.0.0.1; free some ports")


def port_taken(port: int) -> bool:
    """True when something already listens on ``port`` of 127.0.0.1 (or of every address).

    SO_REUSEADDR, as RabbitMQ's own listeners use it: connections of a node that just
    stopped, left in TIME_WAIT, do not make its port look taken to its restart.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _port_answers(port: int, timeout: float = 0.5, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _checked_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """Broker settings by key, each value checked and in its canonical Erlang term (a
    SourceError for an unknown key or a value it cannot take)."""
    checked: dict[str, str] = {}
    for key, value in settings.items():
        row = broker_setting(key)
        checked[row.key] = row.term(str(value))
    return checked


class LocalBroker:
    """One private RabbitMQ node; ``start()`` it or use it as a context manager.

    Ports left as ``None`` are picked free. ``base_dir`` holds the node's data (mnesia),
    logs, config and cookie; when not given a temporary directory is made and removed by
    ``stop()``. ``file_limit`` caps the node's file descriptors (and so its connections).
    A node still running when the interpreter exits is stopped by an ``atexit`` hook.
    ``rabbit_settings`` are broker settings (collectors/broker_settings.py, key -> value,
    e.g. ``{"credit_flow_default_credit": "{100,50}"}``) written to the node's
    ``advanced.config`` at every start; ``collect_statistics_interval`` sets
    ``stats_interval_ms`` too.
    """

    def __init__(
        self,
        name: str = "flowdeck",
        base_dir: Path | str | None = None,
        amqp_port: int | None = None,
        management_port: int | None = None,
        prometheus_port: int | None = None,
        dist_port: int | None = None,
        stats_interval_ms: int = 1000,
        file_limit: int | None = None,
        tls: TlsFiles | None = None,
        amqps_port: int | None = None,
        management_tls_port: int | None = None,
        *,
        stream_port: int | None = None,
        start_timeout: float = 120.0,
        nodename: str | None = None,
        cookie: str | None = None,
        schedulers: str | None = None,
        peers: Sequence[str] = (),
        remove_data: bool | None = None,
        host: str = "127.0.0.1",
        netns: str | None = None,
        partition_handling: str | None = None,
        rabbit_settings: Mapping[str, str] | None = None,
    ) -> None:
        #: Broker settings written to advanced.config at every start (key -> Erlang term).
        self.rabbit_settings = _checked_settings(rabbit_settings or {})
        if "collect_statistics_interval" in self.rabbit_settings:
            stats_interval_ms = int(self.rabbit_settings["collect_statistics_interval"])
        if stats_interval_ms < 100:
            raise SourceError(
                f"stats_interval_ms must be at least 100, got {stats_interval_ms}; "
                "1000 is what flowdeck uses"
            )
        if schedulers is not None and not _SCHEDULERS.fullmatch(schedulers):
            raise SourceError(
                f"schedulers must be Erlang's +S form such as 1:1 or 2:2, got {schedulers!r}"
            )
        if partition_handling is not None and partition_handling not in PARTITION_HANDLING:
            raise SourceError(
                f"partition_handling must be one of {', '.join(PARTITION_HANDLING)}, "
                f"got {partition_handling!r}"
            )
        #: The address the node listens on: 127.0.0.1, or its own in a network namespace.
        self.host = host
        #: The network namespace the node runs in (None: the machine's own network).
        self.netns = netns
        #: RabbitMQ's ``cluster_partition_handling`` (None: RabbitMQ's default, ignore).
        self.partition_handling = partition_handling
        self.nodename = nodename or f"{name}-{os.getpid()}-{next(_node_numbers)}@localhost"
        self._owns_base_dir = base_dir is None if remove_data is None else remove_data
        self.base_dir = (
            Path(tempfile.mkdtemp(prefix=f"{name}-node-")) if base_dir is None else Path(base_dir)
        )
        self.amqp_port = amqp_port or free_port()
        self.management_port = management_port or free_port()
        self.prometheus_port = prometheus_port or free_port()
        #: The stream protocol's listener (rabbitmq_stream, on with rabbitmq_amqp1_0).
        self.stream_port: int | None = stream_port or free_port()
        # The CLI's own distribution ports sit _CLI_DIST_OFFSET above: below the outgoing
        # connections' range too.
        self.dist_port = dist_port or free_port(
            below=min(65536, ephemeral_low()) - _CLI_DIST_OFFSET - _CLI_DIST_RANGE
        )
        self.stats_interval_ms = stats_interval_ms
        self.file_limit = file_limit
        self.tls = tls
        self.amqps_port = (amqps_port or free_port()) if tls else None
        self.management_tls_port = (management_tls_port or free_port()) if tls else None
        self.start_timeout = start_timeout
        #: Erlang schedulers (``+S``, e.g. ``"1:1"``); ``None`` lets the VM take one per core.
        self.schedulers = schedulers
        #: Nodes a first boot joins (classic config peer discovery); see LocalCluster.
        self.peers = tuple(peers)
        #: Seconds the last start took until AMQP, management and Prometheus all answered.
        self.started_in: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._cookie = cookie or secrets.token_hex(20)
        self._guard: OwnerGuard | None = None
        #: A cluster's directory, removed with the last of its nodes' data (see OwnerGuard).
        self._data_parent: Path | None = None

    # -- where it is ---------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """AMQP URI with the node's default user (guest, allowed from loopback)."""
        return f"amqp://guest:guest@{self.host}:{self.amqp_port}/%2F"

    @property
    def amqps_uri(self) -> str:
        if self.amqps_port is None:
            raise SourceError(f"node {self.nodename} has no TLS listener; start it with tls=")
        return f"amqps://guest:guest@localhost:{self.amqps_port}/%2F"

    @property
    def management_url(self) -> str:
        return f"http://{self.host}:{self.management_port}"

    @property
    def management_tls_url(self) -> str:
        if self.management_tls_port is None:
            raise SourceError(f"node {self.nodename} has no TLS listener; start it with tls=")
        return f"https://localhost:{self.management_tls_port}"

    @property
    def prometheus_url(self) -> str:
        """Base URL of the rabbitmq_prometheus endpoint (metrics at ``/metrics``)."""
        return f"http://{self.host}:{self.prometheus_port}"

    @property
    def log_dir(self) -> Path:
        return self.base_dir / "log"

    @property
    def pid(self) -> int | None:
        """Process id of the node's start script (its child is the Erlang VM)."""
        if self._process is not None:
            return self._process.pid
        return self._pid

    @property
    def running(self) -> bool:
        pid = self.pid
        if pid is None:
            return False
        if self._process is not None:
            return self._process.poll() is None
        # A node another process started: make sure the pid was not reused by something else.
        try:
            proc = psutil.Process(pid)
            alive = proc.status() != psutil.STATUS_ZOMBIE
            return alive and "rabbitmq" in " ".join(proc.cmdline())
        except psutil.Error:
            return False

    def beam_pid(self) -> int | None:
        """Process id of the node's Erlang VM (``beam.smp``), if it runs."""
        pid = self.pid
        if pid is None:
            return None
        try:
            parent = psutil.Process(pid)
            for proc in [parent, *parent.children(recursive=True)]:
                if proc.name().startswith("beam"):
                    return int(proc.pid)
        except psutil.Error:
            return None
        return None

    # -- life cycle ----------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> LocalBroker:
        """Start the node and wait until AMQP, management and Prometheus answer."""
        if self.running:
            return self
        server = find_tool("rabbitmq-server")
        self._check_ports_free()
        self._write_files()
        began = time.monotonic()
        log = (self.base_dir / "startup.log").open("ab")
        limit = self.file_limit

        def before_exec() -> None:
            # A node's connections are file descriptors: take all the hard limit allows
            # (shells often start at a soft 1024), or exactly ``file_limit`` when given.
            _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if limit is not None:
                cap = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
                resource.setrlimit(resource.RLIMIT_NOFILE, (cap, cap))
            elif hard != resource.RLIM_INFINITY:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

        try:
            # A session of its own: Ctrl-C in the operator's terminal reaches flowdeck, which
            # then stops the node in order, instead of the node dying under the run.
            self._process = subprocess.Popen(
                [*self._exec_prefix(), str(server)],
                env=self._environment(),
                cwd=self.base_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=before_exec,
            )
        finally:
            log.close()
        self._pid = self._process.pid
        with _live_lock:
            _live.add(self)
        try:
            self._start_guard()
            self._wait_until_ready(began, self.start_timeout if timeout is None else timeout)
        except BaseException:
            self.kill()
            raise
        self.started_in = time.monotonic() - began
        return self

    def stop(self, timeout: float = 60.0, *, cleanup: bool | None = None) -> None:
        """Stop the node gracefully (SIGTERM; SIGKILL after ``timeout``).

        ``cleanup`` removes the base directory; by default it is removed when flowdeck
        made it. ``restart()`` keeps it, so durable queues and messages survive.
        """
        pid = self.pid
        if pid is not None and self.running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not self._wait_gone(timeout):
                self.kill()
        self._forget()
        if cleanup if cleanup is not None else self._owns_base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the Erlang VM, as a crash would; the data directory stays for restart()."""
        beam = self.beam_pid()
        for pid in (beam, self.pid):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._wait_gone(10.0)
        self._forget()

    def restart(self, timeout: float | None = None) -> LocalBroker:
        """Stop (if running) and start again on the same ports and data directory."""
        if self.running:
            self.stop(cleanup=False)
        return self.start(timeout)

    def detach(self) -> dict[str, Any]:
        """Leave the node running after this process exits; returns its state for attach()."""
        with _live_lock:
            _live.discard(self)
        self._stand_guard_down()
        state = self.to_state()
        self._process = None
        return state

    def to_state(self) -> dict[str, Any]:
        """What another process needs to find and stop this node (JSON-serialisable)."""
        return {
            "nodename": self.nodename,
            "base_dir": str(self.base_dir),
            "owns_base_dir": self._owns_base_dir,
            "pid": self.pid,
            "amqp_port": self.amqp_port,
            "management_port": self.management_port,
            "prometheus_port": self.prometheus_port,
            "stream_port": self.stream_port,
            "dist_port": self.dist_port,
            "amqps_port": self.amqps_port,
            "management_tls_port": self.management_tls_port,
            "stats_interval_ms": self.stats_interval_ms,
            "cookie": self._cookie,
            "uri": self.uri,
            "management_url": self.management_url,
            "prometheus_url": self.prometheus_url,
            "started_in": self.started_in,
            "schedulers": self.schedulers,
            "peers": list(self.peers),
            "host": self.host,
            "netns": self.netns,
            "partition_handling": self.partition_handling,
            "rabbit_settings": dict(self.rabbit_settings),
        }

    @classmethod
    def attach(cls, state: Mapping[str, Any]) -> LocalBroker:
        """A handle on a node another flowdeck process started (see detach())."""
        broker = cls.__new__(cls)
        broker.nodename = str(state["nodename"])
        broker.base_dir = Path(state["base_dir"])
        broker._owns_base_dir = bool(state.get("owns_base_dir", False))
        broker.amqp_port = int(state["amqp_port"])
        broker.management_port = int(state["management_port"])
        broker.prometheus_port = int(state["prometheus_port"])
        stream_port = state.get("stream_port")
        broker.stream_port = None if stream_port is None else int(stream_port)
        broker.dist_port = int(state["dist_port"])
        broker.amqps_port = state.get("amqps_port")
        broker.management_tls_port = state.get("management_tls_port")
        broker.stats_interval_ms = int(state.get("stats_interval_ms", 1000))
        broker.file_limit = None
        broker.tls = None
        broker.start_timeout = 120.0
        schedulers = state.get("schedulers")
        broker.schedulers = schedulers if isinstance(schedulers, str) else None
        peers = state.get("peers")
        broker.peers = tuple(str(p) for p in peers) if isinstance(peers, list) else ()
        broker._data_parent = None
        broker.started_in = state.get("started_in")
        broker._process = None
        pid = state.get("pid")
        broker._pid = None if pid is None else int(pid)
        broker._cookie = str(state["cookie"])
        broker._guard = None
        broker.host = str(state.get("host") or "127.0.0.1")
        netns = state.get("netns")
        broker.netns = netns if isinstance(netns, str) else None
        handling = state.get("partition_handling")
        broker.partition_handling = handling if isinstance(handling, str) else None
        settings = state.get("rabbit_settings")
        broker.rabbit_settings = _checked_settings(settings if isinstance(settings, dict) else {})
        return broker

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalBroker({self.nodename}, {state}, amqp {self.amqp_port})"

    # -- steering the node ---------------------------------------------------------------

    def set_memory_watermark(
        self, fraction: float | None = None, *, absolute: str | None = None
    ) -> None:
        """Set the memory high watermark: a fraction of RAM (0.4 is RabbitMQ's default) or
        an absolute size such as ``"50MB"``. A tiny value raises the memory alarm at once."""
        if (fraction is None) == (absolute is None):
            raise SourceError("give the memory watermark either as a fraction or absolute=")
        if absolute is not None:
            self.rabbitmqctl("set_vm_memory_high_watermark", "absolute", absolute)
        else:
            self.rabbitmqctl("set_vm_memory_high_watermark", repr(float(fraction or 0.0)))

    def set_disk_free_limit(self, limit: int | str) -> None:
        """Set the disk free limit in bytes or as ``"50MB"``/``"1000GB"`` (no TB); a limit above the
        free space raises the disk alarm."""
        self.rabbitmqctl("set_disk_free_limit", str(limit))

    def rabbitmqctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``rabbitmqctl`` against this node and return what it printed."""
        ctl = find_tool("rabbitmqctl")
        try:
            done = subprocess.run(
                [*self._exec_prefix(), str(ctl), "-n", self.nodename, "-q", *args],
                env=self._environment(),
                cwd=self.base_dir,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SourceError(
                f"rabbitmqctl {' '.join(args)} on {self.nodename} did not finish in {timeout:g} s"
            ) from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise SourceError(
                f"rabbitmqctl {' '.join(args)} on {self.nodename} failed "
                f"(exit {done.returncode}): {' '.join(said[-3:])}"
            )
        return done.stdout

    # -- internals -----------------------------------------------------------------------

    def _ports(self) -> dict[str, int | None]:
        return {
            "AMQP": self.amqp_port,
            "management": self.management_port,
            "prometheus": self.prometheus_port,
            "stream": self.stream_port,
            "distribution": self.dist_port,
            "AMQPS": self.amqps_port,
            "management TLS": self.management_tls_port,
        }

    def _exec_prefix(self) -> list[str]:
        """What runs a program in the node's network namespace (none: the machine's)."""
        if self.netns is None:
            return []
        return [shutil.which("ip") or "/usr/sbin/ip", "netns", "exec", self.netns]

    def _check_ports_free(self) -> None:
        """Fail before booting when a port is taken: the node would boot its plugins, then
        die on ``could_not_start_listener``, and a client on that port would reach whatever
        listens there (the shared broker, say) instead. A node in a namespace of its own
        has every port of its own address."""
        if self.netns is not None:
            return
        for role, port in self._ports().items():
            if port is not None and port_taken(port):
                raise SourceError(
                    f"the {role} port {port} on 127.0.0.1 is already in use (another broker "
                    "or program listens there); choose a free port, or leave it out to get one"
                )

    def _start_guard(self) -> None:
        """Start the guard that stops this node if this process dies (module docstring)."""
        self._stand_guard_down()  # the guard of a run of this node that died
        if self._process is not None:
            # the start script's pid is the node's session and process group
            self._guard = OwnerGuard(
                self._process.pid,
                self.base_dir,
                self._owns_base_dir,
                remove_parent=self._data_parent if self._owns_base_dir else None,
            )

    def _stand_guard_down(self) -> None:
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.stand_down()

    def _environment(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "TERM")
        env = {key: os.environ[key] for key in keep if key in os.environ}
        base = self.base_dir
        interface = "{" + self.host.replace(".", ",") + "}"
        erl_args = (
            # Do not spin idle schedulers: the machine is shared with the load clients.
            f"+sbwt none +sbwtdcpu none +sbwtdio none -kernel inet_dist_use_interface {interface}"
        )
        if self.netns is not None:
            # A peer cut off is found out after net_ticktime (60 s by default): 10 s keeps a
            # partition drill short, and is far above what a busy 2-core machine delays.
            erl_args += f" -kernel net_ticktime {ISOLATED_NET_TICKTIME}"
        if self.schedulers is not None:
            erl_args += f" +S {self.schedulers}"
        env.update(
            {
                "HOME": str(base),  # the Erlang cookie, for the node and rabbitmqctl alike
                "RABBITMQ_NODENAME": self.nodename,
                "RABBITMQ_USE_LONGNAME": "false" if self.netns is None else "true",
                "RABBITMQ_BASE": str(base),
                "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
                "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
                "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
                "RABBITMQ_LOG_BASE": str(self.log_dir),
                "RABBITMQ_PID_FILE": str(base / "node.pid"),
                "RABBITMQ_NODE_IP_ADDRESS": self.host,
                "RABBITMQ_NODE_PORT": str(self.amqp_port),
                "RABBITMQ_DIST_PORT": str(self.dist_port),
                "RABBITMQ_CTL_DIST_PORT_MIN": str(self.dist_port + _CLI_DIST_OFFSET),
                "RABBITMQ_CTL_DIST_PORT_MAX": str(
                    self.dist_port + _CLI_DIST_OFFSET + _CLI_DIST_RANGE
                ),
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": erl_args,
                # in a namespace the node starts that namespace's own epmd, on its address
                "ERL_EPMD_ADDRESS": self.host,
            }
        )
        return env

    def _write_files(self) -> None:
        base = self.base_dir
        base.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        cookie = base / ".erlang.cookie"
        if not cookie.exists():
            cookie.write_text(self._cookie)
        else:
            self._cookie = cookie.read_text().strip()
        cookie.chmod(0o400)
        (base / "rabbitmq-env.conf").write_text("# flowdeck private node: settings in env\n")
        (base / "enabled_plugins").write_text(
            "[rabbitmq_management,rabbitmq_prometheus,rabbitmq_stream,rabbitmq_stream_management,rabbitmq_amqp1_0].\n"
        )
        (base / "rabbitmq.conf").write_text(self._config_text())
        # A quorum queue's ready/unacked counts refresh on its Ra tick, 5 s by default
        # whatever collect_statistics_interval says (rabbitmq.conf has no key for it in
        # 3.10): tick as often as the statistics, so queue depth moves every second too.
        rabbit = [f"{{quorum_tick_interval, {self.stats_interval_ms}}}"] + [
            f"{{{key}, {term}}}" for key, term in self.rabbit_settings.items()
        ]
        (base / "advanced.config").write_text(f"[{{rabbit, [{', '.join(rabbit)}]}}].\n")

    def _config_text(self) -> str:
        lines = [
            f"listeners.tcp.default = {self.host}:{self.amqp_port}",
            f"management.tcp.port = {self.management_port}",
            f"management.tcp.ip = {self.host}",
            f"prometheus.tcp.port = {self.prometheus_port}",
            f"prometheus.tcp.ip = {self.host}",
            f"collect_statistics_interval = {self.stats_interval_ms}",
            "log.file.level = info",
            "log.console = false",
        ]
        if self.stream_port is not None:
            lines += [
                f"stream.listeners.tcp.1 = {self.host}:{self.stream_port}",
                f"stream.advertised_host = {self.host}",
                f"stream.advertised_port = {self.stream_port}",
            ]
        if self.partition_handling is not None:
            lines.append(f"cluster_partition_handling = {self.partition_handling}")
        if self.netns is not None:
            lines += [
                # clients come through the bridge, not loopback: guest must be let in
                "loopback_users = none",
                # a client of a node cut off hears nothing, not even a reset: a short
                # heartbeat (negotiated down from the client's 60 s) lets it find out
                f"heartbeat = {ISOLATED_HEARTBEAT}",
            ]
        if self.peers:
            # Read only on a first boot (an empty data directory): the node joins the
            # cluster of the first peer that answers; a restart rejoins from its own data.
            lines.append("cluster_formation.peer_discovery_backend = classic_config")
            # the peer may still be booting: try to join it for up to two minutes
            lines.append("cluster_formation.discovery_retry_limit = 240")
            lines.append("cluster_formation.discovery_retry_interval = 500")
            lines += [
                f"cluster_formation.classic_config.nodes.{number} = {peer}"
                for number, peer in enumerate(self.peers, 1)
            ]
        if self.tls is not None:
            tls = self.tls
            lines += [
                f"listeners.ssl.default = {self.amqps_port}",
                f"ssl_options.cacertfile = {tls.ca_file}",
                f"ssl_options.certfile = {tls.cert_file}",
                f"ssl_options.keyfile = {tls.key_file}",
                f"ssl_options.verify = {'verify_peer' if tls.verify_peer else 'verify_none'}",
                f"ssl_options.fail_if_no_peer_cert = {str(tls.fail_if_no_peer_cert).lower()}",
                f"management.ssl.port = {self.management_tls_port}",
                f"management.ssl.cacertfile = {tls.ca_file}",
                f"management.ssl.certfile = {tls.cert_file}",
                f"management.ssl.keyfile = {tls.key_file}",
            ]
        return "\n".join(lines) + "\n"

    def _wait_until_ready(self, began: float, timeout: float) -> None:
        deadline = began + timeout
        waiting_for = "the AMQP port"
        with httpx.Client(timeout=2.0, auth=("guest", "guest")) as http:
            while time.monotonic() < deadline:
                if not self.running:
                    raise SourceError(
                        f"private RabbitMQ node {self.nodename} exited while starting: "
                        f"{self._log_tail()} (logs in {self.log_dir})"
                    )
                if _port_answers(self.amqp_port, host=self.host):
                    waiting_for = "the management API"
                    with contextlib.suppress(httpx.HTTPError, ValueError):
                        overview = http.get(f"{self.management_url}/api/overview")
                        # The plugins start before the AMQP listener: a port something else
                        # answers on is not this node's until the node lists it as its own.
                        if overview.status_code == 200 and self._listens_on_amqp(overview.json()):
                            waiting_for = "the Prometheus endpoint"
                            metrics = http.get(f"{self.prometheus_url}/metrics")
                            if metrics.status_code == 200:
                                return
                time.sleep(0.2)
        raise SourceError(
            f"private RabbitMQ node {self.nodename} did not answer on {waiting_for} within "
            f"{timeout:g} s; see {self.log_dir}: {self._log_tail()}"
        )

    def _listens_on_amqp(self, overview: Any) -> bool:
        if not isinstance(overview, dict) or overview.get("node") != self.nodename:
            return False
        listeners = overview.get("listeners")
        return isinstance(listeners, list) and any(
            isinstance(listener, dict)
            and listener.get("protocol") == "amqp"
            and listener.get("port") == self.amqp_port
            for listener in listeners
        )

    def _log_tail(self) -> str:
        lines: list[str] = []
        for path in [self.base_dir / "startup.log", *sorted(self.log_dir.glob("*.log"))]:
            with contextlib.suppress(OSError):
                lines += path.read_text(errors="replace").splitlines()[-3:]
        return " | ".join(line.strip() for line in lines if line.strip())[-600:]

    def _wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        if self._process is not None:
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
        while self.running:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        # The VM may outlive its start script by a moment; wait for the ports to close.
        while _port_answers(self.amqp_port, 0.2, self.host):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def _forget(self) -> None:
        with _live_lock:
            _live.discard(self)
        self._stand_guard_down()
        self._process = None
        self._pid = None


@dataclass(frozen=True, slots=True)
class NodeAddress:
    """Where one node of a private cluster answers: what a run needs to reach it (an AMQP
    URI with the guest user, the management API, the prometheus endpoint's port)."""

    nodename: str
    amqp_uri: str
    management_url: str
    prometheus_port: int


#: Erlang schedulers per node of a private cluster: two, whatever the machine, so N nodes
#: never run N x cores schedulers. Measured on 2 cores (benchmarks/cluster_start.py, three
#: interleaved runs each, the machine otherwise busy): 2:2 was ready in 36.5 s (median)
#: against 49.3 s for 1:1, idle at 0.026 against 0.030 cores, for 20 MB more. Idle
#: schedulers do not spin (``+sbwt none``), so the extra ones cost little, and a node that
#: holds the only busy queue leader can use both cores, which 1:1 would forbid.
CLUSTER_SCHEDULERS = "2:2"
#: How an isolated cluster (nodes in network namespaces) handles a partition: the seed-style
#: set-up's pause_minority (a node that sees itself in the minority pauses, its clients
#: move to the majority, and it resumes once it sees the majority again).
ISOLATED_PARTITION_HANDLING = "pause_minority"
#: Most nodes a private cluster may have: each costs about 130 MB and a share of two cores.
MAX_CLUSTER_NODES = 9


#: What a joiner of a new cluster says when it made its tables before the first node's
#: feature flags reached it: it joined nothing and holds no data, so it starts afresh.
_SCHEMA_RACE = "schema_integrity_check_failed"
#: What the first node says when it synced its feature flags with a joiner whose tables
#: were not yet active ("All replicas on diskfull nodes are not active yet", seen under
#: load): the joiner is in its cluster already, so it starts again on its own data.
_FLAGS_RACE = "incompatible_feature_flags"
#: How many times a node that lost one of those races is started again.
_RACE_RESTARTS = 2


class LocalCluster:
    """Private RabbitMQ nodes joined into one cluster: ``start()`` it or use it as a context
    manager.

    Every node is a LocalBroker with its own name (``<cluster>-n1@localhost``, ``-n2``, ...),
    ports and data directory, all under ``base_dir``, and one Erlang cookie they share (nodes
    of a cluster must, and rabbitmqctl uses it too). All nodes boot at once: the first as a
    cluster of its own, every other one with classic config peer discovery naming only the
    first, which it keeps trying to join (every 0.5 s, up to 2 min) while the first boots.
    So no node boots twice, as ``rabbitmqctl join_cluster`` would make it (``stop_app``,
    ``join_cluster``, ``start_app``), and there is no race between blank nodes: only the
    first forms a cluster (RabbitMQ 3.10 lets two blank peers that do not see each other
    running each form their own). Booting the first node alone and then the others
    (``first_alone=True``) took 73-74 s where booting together took 40-50 s (+S 1:1, loaded
    2-core machine; benchmarks/cluster_start.py). Each node has its own guard, so the whole
    cluster dies with its owner, and a node restarted alone gets a guard again.

    ``isolated=True`` runs every node in a network namespace of its own, on a bridge
    (``collectors/node_network.py``): nodes named by address with long names
    (``<cluster>-n1@10.231.X.2``), each with its own epmd, ``pause_minority`` unless
    ``partition_handling`` says otherwise, and links ``partition()`` cuts and ``heal()``
    restores. The default, on loopback, is unchanged by it.
    """

    def __init__(
        self,
        size: int = 3,
        name: str = "flowdeck",
        base_dir: Path | str | None = None,
        *,
        schedulers: str | None = CLUSTER_SCHEDULERS,
        stats_interval_ms: int = 1000,
        start_timeout: float = 180.0,
        first_alone: bool = False,
        isolated: bool = False,
        partition_handling: str | None = None,
        rabbit_settings: Mapping[str, str] | None = None,
    ) -> None:
        if not 1 <= size <= MAX_CLUSTER_NODES:
            raise SourceError(
                f"a private cluster has 1 to {MAX_CLUSTER_NODES} nodes, got {size}; "
                "3 is the seed's set-up"
            )
        self.name = f"{name}-{os.getpid()}-{next(_node_numbers)}"
        self._owns_base_dir = base_dir is None
        self.base_dir = (
            Path(tempfile.mkdtemp(prefix=f"{name}-cluster-"))
            if base_dir is None
            else Path(base_dir)
        )
        self.schedulers = schedulers
        self.start_timeout = start_timeout
        #: Boot the first node before the others (slower; kept to measure the difference).
        self.first_alone = first_alone
        #: Seconds the last ``start()`` took until every node answered and had joined.
        self.started_in: float | None = None
        cookie = secrets.token_hex(20)
        #: The namespaces the nodes run in (``isolated``; see collectors/node_network.py).
        self.network = NodeNetwork.plan(self.name, size) if isolated else None
        #: ``cluster_partition_handling``: pause_minority on an isolated cluster unless
        #: told otherwise, RabbitMQ's default (ignore) on the loopback one.
        self.partition_handling = partition_handling or (
            ISOLATED_PARTITION_HANDLING if isolated else None
        )
        first = self._nodename(1)
        self.nodes: list[LocalBroker] = []
        for number in range(1, size + 1):
            if self.network is not None:
                self.nodes.append(
                    self._isolated_node(
                        number,
                        self.network,
                        name,
                        cookie,
                        stats_interval_ms,
                        first,
                        rabbit_settings or {},
                    )
                )
                continue
            node = _with_distinct_ports(
                self.nodes,
                lambda number=number: LocalBroker(  # type: ignore[misc]
                    name=name,
                    base_dir=self.base_dir / f"n{number}",
                    nodename=f"{self.name}-n{number}@localhost",
                    cookie=cookie,
                    schedulers=schedulers,
                    peers=() if number == 1 else (first,),
                    remove_data=self._owns_base_dir,
                    stats_interval_ms=stats_interval_ms,
                    start_timeout=start_timeout,
                    partition_handling=partition_handling,
                    rabbit_settings=rabbit_settings,
                ),
            )
            if self._owns_base_dir:
                node._data_parent = self.base_dir
            self.nodes.append(node)

    def _nodename(self, number: int) -> str:
        if self.network is None:
            return f"{self.name}-n{number}@localhost"
        return f"{self.name}-n{number}@{self.network.address(number)}"

    def _isolated_node(
        self,
        number: int,
        network: NodeNetwork,
        name: str,
        cookie: str,
        stats_interval_ms: int,
        first: str,
        rabbit_settings: Mapping[str, str],
    ) -> LocalBroker:
        """Node ``number`` in its own namespace, on its own address, with a long node name
        by that address. Its ports are ones free on this machine's loopback too, although
        no other program shares its address: whatever still assumes a private node is on
        127.0.0.1 (a Prometheus target built from the port alone) then finds nothing,
        rather than the machine's own broker on RabbitMQ's usual ports."""
        node = LocalBroker(
            name=name,
            base_dir=self.base_dir / f"n{number}",
            nodename=self._nodename(number),
            cookie=cookie,
            schedulers=self.schedulers,
            peers=() if number == 1 else (first,),
            remove_data=self._owns_base_dir,
            stats_interval_ms=stats_interval_ms,
            start_timeout=self.start_timeout,
            host=network.address(number),
            netns=network.namespace(number),
            partition_handling=self.partition_handling,
            rabbit_settings=rabbit_settings,
        )
        if self._owns_base_dir:
            node._data_parent = self.base_dir
        return node

    # -- where it is ---------------------------------------------------------------------

    @property
    def addresses(self) -> list[NodeAddress]:
        """Every node's AMQP URI, management URL and prometheus port, in node order."""
        return [
            NodeAddress(node.nodename, node.uri, node.management_url, node.prometheus_port)
            for node in self.nodes
        ]

    @property
    def uris(self) -> list[str]:
        return [node.uri for node in self.nodes]

    @property
    def running(self) -> bool:
        """True while any node runs."""
        return any(node.running for node in self.nodes)

    def find_node(self, ref: str) -> LocalBroker | None:
        """The node ``ref`` names: its number (``2``), ``n2``, or its name with or without
        ``@host``; ``None`` when no node has that name."""
        for number, node in enumerate(self.nodes, 1):
            short = node.nodename.split("@")[0]
            if ref in (str(number), f"n{number}", short, node.nodename):
                return node
        return None

    # -- life cycle ----------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> LocalCluster:
        """Start every node that is not running and wait until all have joined one cluster.

        Every node boots at once: a fresh cluster's nodes join the first as it comes up, and
        nodes with data (a restart) each wait for the others' tables. Raises SourceError
        naming the node that failed; nothing is left running then.
        """
        limit = self.start_timeout if timeout is None else timeout
        began = time.monotonic()
        fresh = not (self.nodes[0].base_dir / "mnesia").is_dir()
        try:
            if self.network is not None:
                self._create_network()
            if fresh and self.first_alone:
                self.nodes[0].start(limit)
            self._start_nodes([n for n in self.nodes if not n.running], began + limit)
            self._wait_joined(began + limit)
            if fresh:
                self._enable_feature_flags()
        except BaseException:
            self.kill()
            raise
        self.started_in = time.monotonic() - began
        return self

    def stop(self, timeout: float = 60.0, *, cleanup: bool | None = None) -> None:
        """Stop every node at once (SIGTERM; SIGKILL after ``timeout``); ``cleanup`` removes
        the cluster's directory (by default when flowdeck made it)."""
        remove = cleanup if cleanup is not None else self._owns_base_dir
        _each(self.nodes, lambda node: node.stop(timeout, cleanup=remove))
        if self.network is not None:
            # made again by the next start (a restart on kept data), on the same subnet
            self.network.remove()
        if remove:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL every node; their data (and an isolated cluster's network) stays:
        ``stop(cleanup=True)`` removes it."""
        _each(self.nodes, lambda node: node.kill())

    def detach(self) -> dict[str, Any]:
        """Leave every node running after this process exits; the state for attach()."""
        for node in self.nodes:
            node.detach()
        if self.network is not None:
            self.network.stand_guard_down()
        return self.to_state()

    def to_state(self) -> dict[str, Any]:
        """What another process needs to find, steer and stop the cluster."""
        return {
            "cluster": self.name,
            "base_dir": str(self.base_dir),
            "owns_base_dir": self._owns_base_dir,
            "schedulers": self.schedulers,
            "started_in": self.started_in,
            "nodes": [node.to_state() for node in self.nodes],
            "network": None if self.network is None else self.network.to_state(),
            "partition_handling": self.partition_handling,
        }

    @classmethod
    def attach(cls, state: Mapping[str, Any]) -> LocalCluster:
        """A handle on a cluster another flowdeck process started (see detach())."""
        cluster = cls.__new__(cls)
        cluster.name = str(state["cluster"])
        cluster.base_dir = Path(state["base_dir"])
        cluster._owns_base_dir = bool(state.get("owns_base_dir", False))
        schedulers = state.get("schedulers")
        cluster.schedulers = schedulers if isinstance(schedulers, str) else None
        cluster.start_timeout = 180.0
        cluster.first_alone = False
        cluster.started_in = state.get("started_in")
        cluster.nodes = [LocalBroker.attach(node) for node in state["nodes"]]
        network = state.get("network")
        cluster.network = NodeNetwork.from_state(network) if isinstance(network, dict) else None
        handling = state.get("partition_handling")
        cluster.partition_handling = handling if isinstance(handling, str) else None
        for node in cluster.nodes:
            node._data_parent = cluster.base_dir if cluster._owns_base_dir else None
        return cluster

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        up = sum(node.running for node in self.nodes)
        return f"LocalCluster({self.name}, {up} of {len(self.nodes)} nodes running)"

    # -- the partition drill ---------------------------------------------------------------

    @property
    def isolated(self) -> bool:
        """True when every node runs in a network namespace of its own."""
        return self.network is not None

    def partition(self, ref: str) -> bool:
        """Cut node ``ref`` off the others and the clients (it keeps running); False when
        it was cut already. SourceError on a loopback cluster or an unknown node."""
        network, number = self._seat(ref)
        return _network_call(lambda: network.cut(number))

    def heal(self, ref: str) -> bool:
        """Put node ``ref`` back on the cluster's network; False when it was not cut."""
        network, number = self._seat(ref)
        return _network_call(lambda: network.heal(number))

    def cut_off(self) -> list[str]:
        """The names of the nodes whose link is cut now."""
        if self.network is None:
            return []
        network = self.network
        return [
            node.nodename
            for number, node in enumerate(self.nodes, 1)
            if _network_call(lambda number=number: network.is_cut(number))  # type: ignore[misc]
        ]

    def _seat(self, ref: str) -> tuple[NodeNetwork, int]:
        if self.network is None:
            raise SourceError(
                f"{self.name} runs on loopback, where no link can be cut: a partition needs "
                "a cluster whose nodes run in network namespaces (flowdeck broker start "
                "--nodes 3 --namespaces)"
            )
        node = self.find_node(ref)
        if node is None:
            raise SourceError(f"no node {ref!r} in {self.name}")
        return self.network, self.nodes.index(node) + 1

    # -- internals -----------------------------------------------------------------------

    def _create_network(self) -> None:
        network = self.network
        if network is not None:
            _network_call(network.create)

    def _start_nodes(self, nodes: Sequence[LocalBroker], deadline: float) -> None:
        """Boot ``nodes`` at once. Booted together, a node can lose a race with the others
        and exit (see _SCHEMA_RACE, _FLAGS_RACE): it is started again at once, afresh or on
        its own data, while the others still boot. Not after they finish: a joiner in the
        first node's cluster waits for that node's tables, so when the first node lost the
        race (seen on a slow 2-core machine) the joiners only gave up at the deadline."""

        def start(node: LocalBroker) -> None:
            for attempt in range(1, _RACE_RESTARTS + 2):
                try:
                    node.start(max(1.0, deadline - time.monotonic()))
                    return
                except SourceError as failure:
                    said = str(failure)
                    raced = _SCHEMA_RACE in said or _FLAGS_RACE in said
                    if not raced or attempt > _RACE_RESTARTS or time.monotonic() > deadline:
                        raise
                    if _SCHEMA_RACE in said:
                        shutil.rmtree(node.base_dir / "mnesia", ignore_errors=True)

        failures = _each(nodes, start, raise_first=False)
        if failures:
            raise failures[0]

    def _enable_feature_flags(self) -> None:
        """Every stable feature flag on, cluster-wide. Nodes booted together sometimes come
        up with all of them off (seen: a joiner synced before the first node had turned its
        flags on), and then the cluster refuses quorum and stream queues ("the
        corresponding feature flag is disabled"); a blank single node turns them on itself.
        """
        first = next((node for node in self.nodes if node.running), None)
        if first is not None:
            first.rabbitmqctl("enable_feature_flag", "all")

    def _wait_joined(self, deadline: float) -> None:
        """Until one running node's management API lists every node as running."""
        wanted = {node.nodename for node in self.nodes}
        seen: set[str] = set()
        with httpx.Client(timeout=2.0, auth=("guest", "guest")) as http:
            while True:
                for node in self.nodes:
                    if not node.running:
                        continue
                    with contextlib.suppress(httpx.HTTPError, ValueError):
                        listed = http.get(
                            f"{node.management_url}/api/nodes", params={"columns": "name,running"}
                        ).json()
                        seen = {
                            str(n.get("name"))
                            for n in listed
                            if isinstance(n, dict) and n.get("running")
                        }
                        if seen >= wanted:
                            return
                    break
                if time.monotonic() > deadline:
                    missing = ", ".join(sorted(wanted - seen))
                    raise SourceError(
                        f"private cluster {self.name}: {missing} did not join within the "
                        f"start timeout; see the logs under {self.base_dir}"
                    )
                time.sleep(0.2)


def _network_call(action: Callable[[], _T]) -> _T:
    """``action`` on a cluster's network, its NetworkError told as a SourceError."""
    try:
        return action()
    except NetworkError as exc:
        raise SourceError(str(exc)) from None


def _with_distinct_ports(
    others: Sequence[LocalBroker], make: Callable[[], LocalBroker]
) -> LocalBroker:
    """A node whose ports (and rabbitmqctl's port range) clash with no other node's: free
    ports are picked one at a time, and nothing listens on them until the nodes boot."""
    taken: set[int] = set()
    for other in others:
        taken |= _ports_of(other)
    for _ in range(20):
        node = make()
        if not _ports_of(node) & taken:
            return node
    raise SourceError("found no set of free TCP ports for a private cluster; free some ports")


def _ports_of(node: LocalBroker) -> set[int]:
    ports = {port for port in node._ports().values() if port is not None}
    cli = node.dist_port + _CLI_DIST_OFFSET
    return ports | set(range(cli, cli + _CLI_DIST_RANGE + 1))


def _each(
    nodes: Sequence[LocalBroker],
    action: Callable[[LocalBroker], object],
    *,
    raise_first: bool = True,
) -> list[BaseException]:
    """Run ``action`` on every node at once (each waits seconds on its own VM); the
    failures, or the first of them raised when ``raise_first``."""
    failures: list[BaseException] = []
    if len(nodes) <= 1:
        for node in nodes:
            try:
                action(node)
            except Exception as exc:  # collected, and raised below when asked
                failures.append(exc)
    else:
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            for future in [pool.submit(action, node) for node in nodes]:
                failure = future.exception()
                if failure is not None:
                    failures.append(failure)
    if failures and raise_first:
        raise failures[0]
    return failures


def live_brokers() -> Iterator[LocalBroker]:
    """Nodes this process started and has not stopped."""
    with _live_lock:
        return iter(list(_live))


def _stop_all_at_exit() -> None:
    _each(list(live_brokers()), lambda broker: broker.stop(timeout=20.0), raise_first=False)


atexit.register(_stop_all_at_exit)


#: What ``attach()`` needs from a saved state, and the JSON type each must have.
_STATE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "nodename": str,
    "base_dir": str,
    "amqp_port": int,
    "management_port": int,
    "prometheus_port": int,
    "dist_port": int,
    "cookie": str,
    "pid": (int, type(None)),
}


#: What a saved cluster state needs beside its nodes' states.
_CLUSTER_FIELDS: dict[str, type | tuple[type, ...]] = {
    "cluster": str,
    "base_dir": str,
    "nodes": list,
}


def load_state(path: Path) -> dict[str, Any]:
    """Read a node's or a cluster's state written by ``save_state`` (``flowdeck broker``).

    Raises UnreadableFile (one line naming the file) when it cannot be read within bounds
    or is not JSON, and ValueError, naming what is wrong, when it is not the object
    ``save_state`` writes.
    """
    data = read_file_json(path, what="broker state file", limit=SPEC_FILE_LIMIT)
    if not isinstance(data, dict):
        raise ValueError(f"it holds a JSON {type(data).__name__}, not a node's state object")
    if "cluster" in data or "nodes" in data:
        _check_fields(data, _CLUSTER_FIELDS)
        if not data["nodes"]:
            raise ValueError("its cluster has no nodes")
        for number, node in enumerate(data["nodes"], 1):
            if not isinstance(node, dict):
                raise ValueError(f"its node {number} is {node!r}, not a node's state object")
            _check_fields(node, _STATE_FIELDS, owner=f"node {number}")
        return data
    _check_fields(data, _STATE_FIELDS)
    return data


def _check_fields(
    data: Mapping[str, Any], fields: Mapping[str, type | tuple[type, ...]], owner: str = "it"
) -> None:
    for field, kind in fields.items():
        if field not in data and field != "pid":
            raise ValueError(f"{owner} has no {field!r}")
        value = data.get(field)
        if not isinstance(value, kind) or isinstance(value, bool):
            whose = "its" if owner == "it" else f"{owner}'s"
            raise ValueError(f"{whose} {field!r} is {value!r}")


def attach_state(state: Mapping[str, Any]) -> LocalBroker | LocalCluster:
    """A handle on the node or cluster a state from ``load_state`` describes."""
    if "cluster" in state:
        return LocalCluster.attach(state)
    return LocalBroker.attach(state)


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(state), indent=2))
    tmp.chmod(0o600)
    tmp.replace(path)
