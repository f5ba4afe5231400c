"""A Spark standalone master and workers from the pyspark package, on loopback or as hosts.

Shared by the report job's cluster test, the Spark workers' tests and benchmark: the same
master and workers an operator starts with ``spark-class``, logging into a directory of
their own, stopped (terminated, then killed) when the block ends. By default everything is
bound to 127.0.0.1; ``separate_hosts`` makes hosts of their own on this machine (a network
namespace each, on a bridge, with a host name of its own) for the workers to run on.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not in {log} after {seconds} s:\n{log.read_text()[-3000:]}")


# -- hosts of their own on this machine ------------------------------------------------------


@dataclass(frozen=True)
class Host:
    """A host of its own on this machine: a network namespace with one address on the
    bridge, and a host name of its own (each process started in it gets a UTS namespace
    named so; the pid namespace is the machine's, so its pids are this machine's pids)."""

    namespace: str
    address: str
    name: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this host (the process keeps its pid through the execs)."""
        return [
            "ip", "netns", "exec", self.namespace, "unshare", "--uts",
            "sh", "-c", 'hostname "$0" && exec "$@"', self.name, *argv,
        ]  # fmt: skip

    def pids(self) -> list[int]:
        """Every process running on this host."""
        listed = _ip("netns", "pids", self.namespace, check=False)
        return [int(pid) for pid in listed.split()]


@dataclass(frozen=True)
class Hosts:
    """The bridge, this machine's address on it (``address``), and the hosts behind it."""

    bridge: str
    address: str
    hosts: tuple[Host, ...]


def can_make_hosts() -> str:
    """Why ``separate_hosts`` cannot work here ('' when it can): it needs root and ``ip``."""
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "making network namespaces needs iproute2's ip and util-linux's unshare"
    return ""


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.213.N.0/24 that no address or route of this machine touches, N from the pid so
    that test processes running at once pick different ones."""
    used = _ip("-4", "-o", "addr") + _ip("-4", "route")
    for step in range(256):
        subnet = ipaddress.IPv4Network(f"10.213.{(os.getpid() + step) % 256}.0/24")
        if f"10.213.{subnet.network_address.packed[2]}." not in used:
            return subnet
    raise OSError("no free 10.213.N.0/24 subnet on this machine")


@contextmanager
def separate_hosts(count: int) -> Iterator[Hosts]:
    """``count`` hosts behind a bridge of this machine, each in a network namespace of its
    own joined to the bridge by a veth pair; the bridge holds this machine's address (.1),
    the hosts .2, .3, ... of a private 10.213.N.0/24. Everything is removed when the block
    ends (and at exit, should the block never end): every process left on the hosts is
    killed, the namespaces, links and bridge deleted. Names carry the pid, so test
    processes running at once do not collide."""
    why_not = can_make_hosts()
    if why_not:
        raise OSError(why_not)
    pid = os.getpid()
    subnet = _free_subnet()
    addresses = [str(address) for address in subnet.hosts()]
    bridge = f"fdbr{pid}"
    hosts = tuple(
        Host(f"flowdeck-host-{pid}-{index}", addresses[index + 1], f"loadhost-{chr(97 + index)}")
        for index in range(count)
    )
    removed = False

    def remove() -> None:
        nonlocal removed
        if removed:
            return
        removed = True
        for host in hosts:
            for leftover in host.pids():
                with suppress(ProcessLookupError):
                    os.kill(leftover, signal.SIGKILL)
        for index, host in enumerate(hosts):
            _ip("link", "del", f"fdv{pid}-{index}", check=False)
            _ip("netns", "del", host.namespace, check=False)
        _ip("link", "del", bridge, check=False)

    atexit.register(remove)
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{addresses[0]}/{subnet.prefixlen}", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for index, host in enumerate(hosts):
            outside, inside = f"fdv{pid}-{index}", f"fdp{pid}-{index}"
            _ip("netns", "add", host.namespace)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", host.namespace)
            _ip("link", "set", outside, "master", bridge, "up")
            inner = ("netns", "exec", host.namespace, "ip")
            _ip(*inner, "addr", "add", f"{host.address}/{subnet.prefixlen}", "dev", inside)
            _ip(*inner, "link", "set", inside, "up")
            _ip(*inner, "link", "set", "lo", "up")
        yield Hosts(bridge, addresses[0], hosts)
    finally:
        remove()
        atexit.unregister(remove)


# -- the standalone cluster ------------------------------------------------------------------


@contextmanager
def standalone_cluster(
    where: Path,
    workers: int = 1,
    cores: int = 1,
    memory: str = "1g",
    *,
    master_host: str = "127.0.0.1",
    worker_hosts: Sequence[Host] = (),
) -> Iterator[tuple[str, dict[str, str]]]:
    """A master and ``workers`` workers of ``cores`` cores each; the master URL and the
    environment that reaches it (SPARK_HOME, the master's address, this interpreter for
    PySpark). The master listens on ``master_host``; with ``worker_hosts`` each worker runs
    on its host, bound to its address (one worker per host, ``workers`` is ignored)."""
    home = spark_home()
    where.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": master_host,
        "SPARK_LOG_DIR": str(where / "logs"),
        "SPARK_WORKER_DIR": str(where / "work"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    port = free_port()
    url = f"spark://{master_host}:{port}"
    spark_class = str(home / "bin" / "spark-class")
    master_log = where / "master.log"
    places: list[Host | None] = list(worker_hosts) or [None] * workers
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with master_log.open("wb") as out:
            processes.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", master_host,
                 "--port", str(port), "--webui-port", str(free_port())],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        wait_for(master_log, "I have been elected leader", processes[0], 120)
        for index, host in enumerate(places):
            address = host.address if host is not None else master_host
            worker = [
                spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", address,
                "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                "--work-dir", str(where / "work" / str(index)),
            ]  # fmt: skip
            worker_log = where / f"worker-{index}.log"
            with worker_log.open("wb") as out:
                processes.append(subprocess.Popen(
                    host.command(worker) if host is not None else worker,
                    env={**env, "SPARK_LOCAL_IP": address}, stdout=out, stderr=subprocess.STDOUT,
                ))  # fmt: skip
        for index in range(len(places)):
            log = where / f"worker-{index}.log"
            wait_for(log, "Successfully registered with master", processes[index + 1], 120)
        yield url, env
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
