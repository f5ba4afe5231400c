"""Maximum rate with 2 worker processes against 1, with each worker's CPU and the broker's.

A run through the real controller (``engine.Controller``, worker processes spawned as in
``flowdeck run --workers N``) against a private RabbitMQ node, flat out (no rate limit),
with a set-up that lightens the broker so it is less of a limit:

* ``queues``: 4 publishers (confirms, in-flight 1,000), 4 classic non-durable queues,
  4 consumers (prefetch 1,000, acking every 100 with the multiple flag), 1 kB transient
  messages;
* ``unroutable``: 4 publishers without confirms sending to a routing key no queue is bound
  to — the broker only parses and drops, the lightest work it can do per message — and no
  consumers.

1 and 2 workers alternate ``--runs`` times; each run lasts ``--seconds`` and figures are
taken over its steady part (from the 4th second) from the controller's per-second ticks,
with the CPU of every worker process, of the controller process and of the broker's Erlang
VM read with psutil at the same moments. The ratio 2 workers / 1 worker is taken per pair
of runs.

    .venv/bin/python benchmarks/workers_scaling.py [--runs 3] [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from dataclasses import dataclass

from benchlib import (
    cpu_seconds,
    load_average,
    machine_seconds,
    private_node,
    spread,
    worker_pids,
)

from flowdeck.collectors import Broker
from flowdeck.engine.controller import Controller
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.spec import RunSpec

SETTLE = 4.0


@dataclass
class Figure:
    workers: int
    rate: float  # msg/s: consumed (queues) or published (unroutable)
    worker_cores: list[float]
    controller_cores: float
    broker_cores: float
    others_cores: float  # everything else on the machine (other people's work)

    @property
    def client_us(self) -> float:
        return sum(self.worker_cores) / max(self.rate, 1e-9) * 1e6


def spec_for(setup: str, uri: str, seconds: float) -> RunSpec:
    name = f"flowdeck-scaling-{uuid.uuid4().hex[:8]}-%d"
    common = dict(
        name=f"workers-{setup}",
        uri=uri,
        queue_pattern=name,
        queues=4,
        durable=False,
        publishers=4,
        rate=0.0,
        message_size=1000,
        persistent=False,
        duration=seconds,
    )
    if setup == "queues":
        return RunSpec(
            **common,
            confirms=True,
            inflight=1000,
            consumers=4,
            prefetch=1000,
            ack_every=100,
        )
    return RunSpec(
        **common,
        routing_key=f"nobody-listens-{uuid.uuid4().hex[:8]}",
        confirms=False,
        inflight=0,
        consumers=0,
    )


async def one_run(
    setup: str, workers: int, node_uri: str, management: str, seconds: float, broker_pid: int | None
) -> Figure:
    spec = spec_for(setup, node_uri, seconds)
    controller = Controller(
        spec,
        broker=Broker.parse(node_uri, management_url=management),
        workers=workers,
        cleanup=True,
    )
    marks: list[tuple[Tick, float, dict[int, float], float, float]] = []

    def listen(update: object) -> None:
        if isinstance(update, Tick):
            pids = worker_pids()
            marks.append(
                (
                    update,
                    cpu_seconds(broker_pid),
                    {p: cpu_seconds(p) for p in pids},
                    time.process_time(),
                    machine_seconds()[0],
                )
            )

    controller.add_listener(listen)
    await controller.start()
    summary: RunSummary = await controller.wait()
    if summary.outcome == "failed":
        raise SystemExit(f"run failed: {'; '.join(summary.errors)}")
    steady = [m for m in marks if SETTLE <= m[0].elapsed <= seconds - 0.5]
    first, last = steady[0], steady[-1]
    wall = last[0].at - first[0].at
    if setup == "queues":
        count = last[0].totals.consumed - first[0].totals.consumed
    else:
        count = last[0].totals.published - first[0].totals.published
    worker_cores = sorted(
        ((last[2][p] - first[2].get(p, last[2][p])) / wall for p in last[2]), reverse=True
    )
    controller_cores = (last[3] - first[3]) / wall
    broker_cores = (last[1] - first[1]) / wall
    machine = (last[4] - first[4]) / wall
    return Figure(
        workers=workers,
        rate=count / wall,
        worker_cores=worker_cores,
        controller_cores=controller_cores,
        broker_cores=broker_cores,
        others_cores=machine - sum(worker_cores) - controller_cores - broker_cores,
    )


def show(setup: str, figure: Figure) -> None:
    cores = " + ".join(f"{c:.2f}" for c in figure.worker_cores)
    print(
        f"  {setup}, {figure.workers} worker(s): {figure.rate:,.0f} msg/s; workers {cores} "
        f"cores ({figure.client_us:.1f} µs/msg); controller {figure.controller_cores:.2f}; "
        f"broker {figure.broker_cores:.2f} cores "
        f"({figure.broker_cores / max(figure.rate, 1e-9) * 1e6:.0f} µs/msg); "
        f"other work on the machine {figure.others_cores:.2f} cores",
        flush=True,
    )


async def main(args: argparse.Namespace) -> int:
    results: dict[tuple[str, int], list[Figure]] = {}
    with private_node() as node:
        broker_pid = node.beam_pid()
        for run in range(args.runs):
            for setup in args.setups:
                print(f"run {run + 1}/{args.runs}, {setup} ({load_average()})", flush=True)
                for workers in (1, 2):
                    figure = await one_run(
                        setup, workers, node.uri, node.management_url, args.seconds, broker_pid
                    )
                    show(setup, figure)
                    results.setdefault((setup, workers), []).append(figure)
    print()
    print(
        f"## workers: {args.runs} run(s) of {args.seconds:g} s each, private node, "
        f"{os.cpu_count()} cores shared by broker and workers, median (range)"
    )
    print(
        "| set-up | workers | msg/s | worker CPU, cores (sum) | client µs/msg | "
        "broker cores | broker µs/msg | other work, cores | 2 workers / 1, rate |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for setup in args.setups:
        ones, twos = results[(setup, 1)], results[(setup, 2)]
        ratio = [b.rate / a.rate for a, b in zip(ones, twos, strict=True)]
        for figures in (ones, twos):
            print(
                f"| {setup} | {figures[0].workers} | {spread([f.rate for f in figures], ',.0f')}"
                f" | {spread([sum(f.worker_cores) for f in figures], '.2f')} | "
                f"{spread([f.client_us for f in figures])} | "
                f"{spread([f.broker_cores for f in figures], '.2f')} | "
                f"{spread([f.broker_cores / f.rate * 1e6 for f in figures], '.0f')} | "
                f"{spread([f.others_cores for f in figures], '.2f')} | "
                f"{spread(ratio, '.2f') + '×' if figures is twos else ''} |"
            )
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="pairs of runs (1–10)")
    parser.add_argument("--seconds", type=float, default=15.0, help="per run (8–60)")
    parser.add_argument(
        "--setups", nargs="+", choices=("queues", "unroutable"), default=["queues", "unroutable"]
    )
    args = parser.parse_args()
    if not 1 <= args.runs <= 10:
        parser.error(f"--runs must be 1..10, got {args.runs}")
    if not 8 <= args.seconds <= 60:
        parser.error(f"--seconds must be 8..60, got {args.seconds:g}")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
