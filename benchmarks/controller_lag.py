"""Event-loop lag of the controller's loop while its workers run flat out (issue 7).

The controller runs here as ``flowdeck run`` runs it (``asyncio.run``, worker processes,
the management API watched, the session recorded to a temporary directory, the CLI's
progress printer as a listener writing to /dev/null). A probe task on the same loop sleeps
10 ms again and again and records by how much each sleep overshoots: that is how late
anything on the controller's loop (a steering command, a tick, a screen update) runs.

Cases, each against a private RabbitMQ node with a raised file limit:

* ``idle``: the probe alone, no run (the floor on this machine, same invocation);
* ``flat-out``: 4 publishers without a rate limit (confirms, in-flight 1,000), 4 classic
  queues, 4 consumers acking every 100 — workers as fast as the broker lets them;
* ``bench5``: the busiest preset at scale 1 — 1,000 publishers x 100 msg/s, 200 quorum
  queues, 1,000 consumers, 2,000 connections (far more than this machine can carry, so
  every worker is saturated and the broker is overloaded).

Lag is reported for the loaded part (after ``start()`` returned until the run's end) and,
separately, for the start (topology, worker boot, connecting) and the stop (drain, reports,
recorder close). The target: p99 under 100 ms while workers run flat out.

    .venv/bin/python benchmarks/controller_lag.py [--seconds 30] [--workers 1]

Bounded: each run lasts ``--seconds`` plus its start and drain; queues are deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchlib import CpuMeter, load_average, percentile, private_node, worker_pids

from flowdeck.cli.run import ProgressPrinter
from flowdeck.collectors import Broker
from flowdeck.engine.controller import Controller
from flowdeck.engine.presets import preset
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec

PROBE_INTERVAL = 0.010


@dataclass
class Lag:
    case: str
    load: list[float]  # overshoot in ms while the load ran
    start: list[float]
    stop: list[float]
    controller_cores: float
    broker_cores: float
    publish_rate: float
    others_cores: float = 0.0
    worker_cores: float = 0.0
    worst: list[tuple[float, float]] = field(default_factory=list)  # (s into the load, ms)


class Probe:
    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (when, overshoot ms)
        self._running = True

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._running:
            began = loop.time()
            await asyncio.sleep(PROBE_INTERVAL)
            now = loop.time()
            self.samples.append((time.monotonic(), (now - began - PROBE_INTERVAL) * 1000))

    def stop(self) -> None:
        self._running = False

    def between(self, t0: float, t1: float) -> list[float]:
        return [lag for at, lag in self.samples if t0 <= at < t1]


def flat_out(uri: str, seconds: float) -> RunSpec:
    return RunSpec(
        name="flat-out",
        uri=uri,
        queue_pattern=f"flowdeck-lag-{uuid.uuid4().hex[:8]}-%d",
        queues=4,
        durable=False,
        publishers=4,
        rate=0.0,
        persistent=False,
        confirms=True,
        inflight=1000,
        consumers=4,
        prefetch=1000,
        ack_every=100,
        duration=seconds,
    )


async def idle(seconds: float, broker_pid: int | None) -> Lag:
    probe = Probe()
    task = asyncio.create_task(probe.run())
    meter = CpuMeter([os.getpid(), broker_pid])
    meter.start()
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    meter.stop()
    probe.stop()
    await task
    return Lag(
        "idle",
        probe.between(t0, time.monotonic()),
        [],
        [],
        meter.cores(os.getpid()),
        meter.cores(broker_pid) if broker_pid else 0.0,
        0.0,
        meter.others_cores(),
    )


async def loaded(
    case: str, spec: RunSpec, node: object, workers: int, broker_pid: int | None
) -> Lag:
    uri: str = node.uri  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="flowdeck-lag-") as sessions:
        controller = Controller(
            spec,
            broker=Broker.parse(uri, management_url=node.management_url),  # type: ignore[attr-defined]
            recording=RunRecording(Path(sessions)),
            workers=workers,
            cleanup=True,
        )
        devnull = open(os.devnull, "w")  # noqa: SIM115 - closed below
        controller.add_listener(ProgressPrinter(controller, devnull))
        probe = Probe()
        task = asyncio.create_task(probe.run())
        t_begin = time.monotonic()
        await controller.start()
        t_started = time.monotonic()
        workers_seen = worker_pids()
        meter = CpuMeter([os.getpid(), broker_pid, *workers_seen])
        meter.start()
        end_at = t_started + (controller.started_at + spec.duration - time.time())
        await asyncio.sleep(max(0.0, end_at - time.monotonic()))
        meter.stop()
        summary = await controller.wait()
        t_end = time.monotonic()
        probe.stop()
        await task
        devnull.close()
    if summary.outcome == "failed":
        print(f"  (the run failed: {'; '.join(summary.errors[:2])})", flush=True)
    return Lag(
        case,
        probe.between(t_started, end_at),
        probe.between(t_begin, t_started),
        probe.between(end_at, t_end),
        meter.cores(os.getpid()),
        meter.cores(broker_pid) if broker_pid else 0.0,
        summary.publish_rate,
        meter.others_cores(),
        sum(meter.cores(p) for p in workers_seen),
        sorted(
            ((at - t_started, lag) for at, lag in probe.samples if t_started <= at < end_at),
            key=lambda x: -x[1],
        )[:5],
    )


def line(lag: Lag) -> str:
    def stats(values: list[float]) -> str:
        if not values:
            return "-"
        return (
            f"p50 {percentile(values, 50):.1f} p99 {percentile(values, 99):.1f} "
            f"max {max(values):.1f} ms ({len(values)} probes)"
        )

    return (
        f"{lag.case}: while loaded {stats(lag.load)}; start {stats(lag.start)}; "
        f"stop {stats(lag.stop)}; controller process {lag.controller_cores:.2f} cores, "
        f"workers {lag.worker_cores:.2f} cores, "
        f"broker {lag.broker_cores:.2f} cores, other work {lag.others_cores:.2f} cores, "
        f"publish {lag.publish_rate:,.0f} msg/s"
        + (
            "; worst while loaded: "
            + ", ".join(f"{ms:.0f} ms at {at:.1f} s" for at, ms in lag.worst)
            if lag.worst
            else ""
        )
    )


async def main(args: argparse.Namespace) -> int:
    if args.diagnose:  # name every callback that holds the loop 50 ms or more
        logging.basicConfig(level=logging.WARNING, format="  asyncio: %(message)s")
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = 0.05
    results: list[Lag] = []
    with private_node() as node:
        broker_pid = node.beam_pid()
        for run in range(args.runs):
            print(f"run {run + 1}/{args.runs} ({load_average()})", flush=True)
            results.append(await idle(min(args.seconds, 10.0), broker_pid))
            print("  " + line(results[-1]), flush=True)
            if not args.only_bench5:
                spec = flat_out(node.uri, args.seconds)
                results.append(await loaded("flat-out", spec, node, args.workers, broker_pid))
                print("  " + line(results[-1]), flush=True)
            if not args.skip_bench5:
                spec = replace(preset("bench5"), uri=node.uri, duration=args.seconds)
                results.append(await loaded("bench5", spec, node, args.workers, broker_pid))
                print("  " + line(results[-1]), flush=True)
    print()
    print(
        f"## controller loop lag, {args.runs} run(s), {args.workers} worker process(es), "
        f"probe every {PROBE_INTERVAL * 1000:g} ms"
    )
    print(
        "| case | lag while loaded p50 / p99 / max ms | start p99 / max ms | "
        "stop p99 / max ms | controller cores | worker cores | broker cores | "
        "other work, cores | publish msg/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for case in dict.fromkeys(r.case for r in results):
        mine = [r for r in results if r.case == case]
        load = [x for r in mine for x in r.load]
        start = [x for r in mine for x in r.start]
        stop = [x for r in mine for x in r.stop]

        def p(values: list[float], q: float) -> str:
            return f"{percentile(values, q):.1f}" if values else "-"

        print(
            f"| {case} | {p(load, 50)} / {p(load, 99)} / {p(load, 100)} | "
            f"{p(start, 99)} / {p(start, 100)} | {p(stop, 99)} / {p(stop, 100)} | "
            f"{max(r.controller_cores for r in mine):.2f} | "
            f"{max(r.worker_cores for r in mine):.2f} | "
            f"{max(r.broker_cores for r in mine):.2f} | "
            f"{max(r.others_cores for r in mine):.2f} | "
            f"{max(r.publish_rate for r in mine):,.0f} |"
        )
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="per run (10–120)")
    parser.add_argument("--runs", type=int, default=1, help="repeat the cases (1–5)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (1–4)")
    parser.add_argument("--skip-bench5", action="store_true", help="only idle and flat-out")
    parser.add_argument(
        "--only-bench5", action="store_true", help="only idle and bench5 (to look at it)"
    )
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="asyncio debug mode: log every callback that holds the loop >= 50 ms (slower)",
    )
    args = parser.parse_args()
    if not 10 <= args.seconds <= 120:
        parser.error(f"--seconds must be 10..120, got {args.seconds:g}")
    if not 1 <= args.runs <= 5:
        parser.error(f"--runs must be 1..5, got {args.runs}")
    if not 1 <= args.workers <= 4:
        parser.error(f"--workers must be 1..4, got {args.workers}")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
