"""What the benchmark scripts share: who used the CPU (client, worker processes, broker),
private nodes with a raised file limit, and median (range) formatting.

The broker's CPU is that of its Erlang VM (``beam.smp``), found by the AMQP port it
listens on, read with psutil (user + system, all its threads). On this machine kind the
broker and flowdeck share 2 cores, so every figure says who used them.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil

# The scripts run as `python benchmarks/x.py`; make the project importable from a checkout.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from flowdeck.collectors.local_broker import LocalBroker  # noqa: E402

SHARED_URI = "amqp://guest:guest@127.0.0.1:5672/%2F"
SHARED_MANAGEMENT = "http://127.0.0.1:15672"
#: Enough file descriptors for 1,000 client connections and then some.
PRIVATE_FILE_LIMIT = 8192


def listening_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` of this machine, if it can be seen."""
    for conn in psutil.net_connections("tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            return int(conn.pid) if conn.pid is not None else None
    return None


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (0.0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def worker_pids() -> list[int]:
    """This process's flowdeck worker processes (children started by multiprocessing spawn)."""
    pids = []
    for child in psutil.Process().children():
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                pids.append(child.pid)
        except psutil.Error:
            continue
    return pids


def machine_seconds() -> tuple[float, float]:
    """CPU seconds the whole machine has been busy (all cores) and waiting on I/O."""
    times = psutil.cpu_times()
    iowait = float(getattr(times, "iowait", 0.0))
    return float(sum(times) - times.idle - iowait), iowait


class CpuMeter:
    """CPU seconds used by a set of processes between :meth:`start` and :meth:`stop`, and
    by the whole machine (so what other work took is visible too)."""

    def __init__(self, pids: Iterable[int | None]) -> None:
        self.pids = [p for p in pids if p is not None]
        self._start: dict[int, float] = {}
        self._wall = 0.0
        self._machine = (0.0, 0.0)
        self.used: dict[int, float] = {}
        self.wall = 0.0
        #: Average cores the whole machine was busy, and spent waiting on I/O.
        self.machine_cores = 0.0
        self.iowait_cores = 0.0

    def start(self) -> None:
        self._wall = time.monotonic()
        self._machine = machine_seconds()
        self._start = {p: cpu_seconds(p) for p in self.pids}

    def stop(self) -> dict[int, float]:
        self.wall = time.monotonic() - self._wall
        self.used = {p: cpu_seconds(p) - self._start.get(p, 0.0) for p in self.pids}
        busy, iowait = machine_seconds()
        self.machine_cores = (busy - self._machine[0]) / max(self.wall, 1e-9)
        self.iowait_cores = (iowait - self._machine[1]) / max(self.wall, 1e-9)
        return self.used

    def others_cores(self) -> float:
        """Average cores used by everything else on the machine."""
        return self.machine_cores - sum(self.used.values()) / max(self.wall, 1e-9)

    def cores(self, pid: int) -> float:
        """Average cores ``pid`` used over the measured wall time."""
        return self.used.get(pid, 0.0) / max(self.wall, 1e-9)


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (1 min) {five:.1f} (5 min) on {os.cpu_count()} cores"


@contextlib.contextmanager
def private_node(file_limit: int = PRIVATE_FILE_LIMIT) -> Iterator[LocalBroker]:
    """A private RabbitMQ node with ``file_limit`` file descriptors, stopped afterwards."""
    node = LocalBroker(name="flowdeck-bench", file_limit=file_limit)
    print(f"starting a private RabbitMQ node (file limit {file_limit}) ...", flush=True)
    node.start()
    print(f"  {node.nodename} up in {node.started_in:.1f} s at {node.uri}", flush=True)
    try:
        yield node
    finally:
        node.stop()


def spread(values: list[float], fmt: str = ",.1f") -> str:
    """``median (min–max)`` of ``values``; the value alone when there is one."""
    if not values:
        return "n/a"
    if len(values) == 1:
        return format(values[0], fmt)
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{format(mid, fmt)} ({format(low, fmt)}–{format(high, fmt)})"


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by the nearest-rank method."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]
