"""What placing workers with Spark costs the controller, and how long Spark takes to start.

For 1, 2 and 4 workers, one run with local worker processes (the pipe) and one with the
workers as Spark tasks on ``local[N]`` (the TCP link), each through the real controller
against the shared broker on localhost:5672: one publisher (``--rate`` msg/s, confirms)
and one consumer per worker, one queue each. Over the steady part (from the 4th second)
the benchmark reads the controller process's own CPU (the Spark JVM is a child process
and not counted) and the CPU time the controller's loop thread spends in its message
handler (merging snapshots, changes applied, events), per snapshot. Start-up is the time from
``controller.start()`` to the run's start: worker processes booting, or the SparkContext
starting (the first one in a process boots the JVM: "cold"; later ones reuse it) and the
tasks connecting back.

``--standalone`` runs the same 2-worker Spark run on a standalone master and two 1-core
Spark workers on 127.0.0.1 started from the pyspark package (tests/spark_cluster.py),
and prints the per-host rows.

    .venv/bin/python benchmarks/spark_workers.py [--seconds 20] [--rate 200] [--standalone]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
from benchlib import load_average

from flowdeck.engine.controller import Controller
from flowdeck.engine.process import WorkerFailed, WorkerLost
from flowdeck.engine.progress import Tick
from flowdeck.engine.snapshot import ClientSnapshot
from flowdeck.engine.spark_workers import SparkPlacement
from flowdeck.engine.spec import RunSpec
from tests.spark_cluster import standalone_cluster

URI = os.environ.get("FLOWDECK_TEST_URI", "amqp://guest:guest@127.0.0.1:5672/%2F")
SETTLE = 4.0


class TimedController(Controller):
    """The controller, timing its message handler (the merge of every worker message)."""

    handler_seconds = 0.0
    snapshots = 0

    def _on_message(self, message: object) -> None:  # type: ignore[override]
        began = time.thread_time()  # CPU of the loop's thread: not inflated by a busy machine
        super()._on_message(message)  # type: ignore[arg-type]
        if self.started_at and time.time() >= self.started_at + SETTLE:
            self.handler_seconds += time.thread_time() - began
            self.snapshots += isinstance(message, ClientSnapshot)
        if isinstance(message, WorkerFailed | WorkerLost):
            print(f"  ! {message}", file=sys.stderr)


@dataclass
class Figure:
    how: str
    workers: int
    start_seconds: float
    context_seconds: float
    publish_rate: float
    controller_ms_per_worker_s: float  # controller CPU, ms per worker per second
    handler_us_per_snapshot: float
    hosts: list[str]


async def one_run(workers: int, spark: str | None, seconds: float, rate: float) -> Figure:
    name = f"flowdeck-bench-sw-{uuid.uuid4().hex[:6]}"
    spec = RunSpec(
        uri=URI,
        publishers=workers,
        consumers=workers,
        queues=workers,
        rate=rate,
        duration=seconds,
        workers=workers,
        queue_pattern=f"{name}-%d",
    )
    placement = SparkPlacement(spark, workers=workers) if spark else None
    controller = TimedController(spec, workers=workers, placement=placement, cleanup=True)
    ticks: list[Tick] = []
    controller.add_listener(
        lambda update: ticks.append(update) if isinstance(update, Tick) else None
    )
    me = psutil.Process()
    began = time.monotonic()
    await controller.start()
    start_seconds = time.monotonic() - began
    await asyncio.sleep(max(0.0, controller.started_at + SETTLE - time.time()))
    cpu_before, wall_before = sum(me.cpu_times()[:2]), time.monotonic()
    await asyncio.sleep(max(0.0, controller.started_at + seconds - time.time()))
    cpu = sum(me.cpu_times()[:2]) - cpu_before
    wall = time.monotonic() - wall_before
    await controller.wait()
    steady = [t for t in ticks if t.second and t.second > SETTLE]
    rate_seen = sum(t.publish_rate for t in steady) / max(1, len(steady))
    rows = placement.rows if placement is not None else []
    return Figure(
        how=f"Spark {spark}" if spark else "processes",
        workers=workers,
        start_seconds=start_seconds,
        context_seconds=placement.context_seconds if placement is not None else 0.0,
        publish_rate=rate_seen,
        controller_ms_per_worker_s=1e3 * cpu / wall / workers,
        handler_us_per_snapshot=1e6 * controller.handler_seconds / max(1, controller.snapshots),
        hosts=[
            f"worker {r.worker} on {r.host} pid {r.pid}: {r.publishers} pub {r.consumers} con, "
            f"{r.published:,} published ({r.publish_rate:,.1f}/s), CPU "
            f"{'-' if r.cpu_percent is None else f'{r.cpu_percent:.0f}%'}"
            for r in rows
        ],
    )


def show(figure: Figure) -> None:
    print(
        f"{figure.how:<22}{figure.workers:>3} workers  start {figure.start_seconds:6.1f} s"
        f" (SparkContext {figure.context_seconds:5.1f} s)  publish {figure.publish_rate:7,.0f}/s"
        f"  controller CPU {figure.controller_ms_per_worker_s:6.1f} ms per worker-second"
        f"  handler {figure.handler_us_per_snapshot:6.0f} us per snapshot",
        flush=True,
    )
    for host in figure.hosts:
        print(f"    {host}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=200.0, help="msg/s per publisher")
    parser.add_argument("--standalone", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {load_average()}", flush=True)
    if args.standalone:
        with tempfile.TemporaryDirectory() as where, standalone_cluster(Path(where), 2) as (url, _):
            show(asyncio.run(one_run(2, url, args.seconds, args.rate)))
        return
    for workers in (1, 2, 4):
        show(asyncio.run(one_run(workers, None, args.seconds, args.rate)))
        show(asyncio.run(one_run(workers, f"local[{workers}]", args.seconds, args.rate)))
    print(f"load average after: {load_average()}", flush=True)


if __name__ == "__main__":
    main()
