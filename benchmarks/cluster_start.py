"""How long a private 3-node RabbitMQ cluster takes to be ready on this machine.

``LocalCluster`` (what ``flowdeck broker start --nodes 3`` uses) boots every node at once,
the others joining the first as it comes up; "ready" is every node's AMQP, management and
Prometheus endpoints answering and the first node's management API listing every node as
running. Each run also measures the cluster idle (CPU of the Erlang VMs over ``--idle``
seconds, their resident memory) and its stop (all nodes at once, SIGTERM).

Variants are compared in the same invocation, runs interleaved, so a busy machine weighs on
each alike; every line says the load and what other work took while the cluster idled:

* ``together-2:2``: the default, every node at once, two Erlang schedulers per node (+S 2:2);
* ``together-1:1``: one scheduler per node;
* ``first-alone-2:2``: the first node booted alone, then the others (``first_alone=True``).

    .venv/bin/python benchmarks/cluster_start.py [--runs 3] [--nodes 3] [--variants ...]

Bounded: each start times out after 180 s; every cluster is stopped and its data removed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import psutil
from benchlib import CpuMeter, load_average, spread

from flowdeck.collectors.local_broker import LocalCluster

VARIANTS = {
    "together-2:2": ("2:2", False),
    "together-1:1": ("1:1", False),
    "first-alone-2:2": ("2:2", True),
}


@dataclass(frozen=True)
class ClusterRun:
    variant: str
    ready: float
    idle_cores: float
    rss_mb: float
    stopped: float
    others_cores: float


def one_run(nodes: int, variant: str, idle: float) -> ClusterRun:
    schedulers, first_alone = VARIANTS[variant]
    cluster = LocalCluster(
        nodes, name="flowdeck-bench", schedulers=schedulers, first_alone=first_alone
    )
    try:
        cluster.start()
        beams = [pid for node in cluster.nodes if (pid := node.beam_pid()) is not None]
        meter = CpuMeter(beams)
        meter.start()
        time.sleep(idle)
        meter.stop()
        rss = sum(psutil.Process(pid).memory_info().rss for pid in beams) / 2**20
    finally:
        stop_began = time.monotonic()
        cluster.stop()
        stopped = time.monotonic() - stop_began
    return ClusterRun(
        variant=variant,
        ready=cluster.started_in or 0.0,
        idle_cores=sum(meter.used.values()) / max(meter.wall, 1e-9),
        rss_mb=rss,
        stopped=stopped,
        others_cores=meter.others_cores(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--idle", type=float, default=10.0, help="seconds measured idle")
    args = parser.parse_args()
    runs: list[ClusterRun] = []
    for number in range(1, args.runs + 1):
        for variant in args.variants:
            print(f"run {number}, {variant}, {load_average()} ...", flush=True)
            run = one_run(args.nodes, variant, args.idle)
            runs.append(run)
            print(
                f"  ready in {run.ready:.1f} s; idle {run.idle_cores:.3f} cores, "
                f"{run.rss_mb:.0f} MB; stopped in {run.stopped:.1f} s; other work "
                f"{run.others_cores:.2f} cores",
                flush=True,
            )
    print(f"\n{args.nodes}-node cluster, median (min–max) of {args.runs} runs:")
    for variant in args.variants:
        mine = [r for r in runs if r.variant == variant]
        print(
            f"  {variant}: ready {spread([r.ready for r in mine])} s, "
            f"idle {spread([r.idle_cores for r in mine], '.3f')} cores, "
            f"{statistics.median(r.rss_mb for r in mine):.0f} MB, "
            f"stop {spread([r.stopped for r in mine])} s, "
            f"other work {spread([r.others_cores for r in mine], '.2f')} cores"
        )


if __name__ == "__main__":
    main()
