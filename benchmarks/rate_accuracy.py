"""Rate accuracy of every publisher over 10 s windows, and how long 1,000 clients take to
connect (issue 7).

Cases, each against a private RabbitMQ node with a raised file limit (so 1,000 connections
fit), one worker runtime in this process (uvloop), exactly as a run uses it:

* 1 publisher (+1 consumer) at 1, 100, 1,000 and 5,000 msg/s;
* 500 publishers + 500 consumers, one connection each (as PerfTest does), 2 msg/s each,
  on 100 classic queues.

Messages are 1 kB, non-persistent, with confirms (in-flight window 1,000), consumers with
prefetch 1,000 acking every message — the broker keeps up at these rates. For each
publisher, messages sent in each window / (rate x window) is its achieved/target. Window
edges lie half a send interval away from each publisher's own schedule (``origin + (k + ½)
/ rate``, its phase included), so a message sent a little late or early is not counted in
the wrong window — at 1 msg/s a 10 s window holds exactly 10 messages when the publisher
is on time. The report gives per-publisher min / median / max over all windows, the worst
window, how late the sampling itself was, and the client's and broker's CPU.

Connecting: the time from the worker's start until all its clients are connected, with
their channels open and confirm mode / consume set up (the worker connects 64 at a time).

    .venv/bin/python benchmarks/rate_accuracy.py [--windows 3] [--runs 1]

Bounded: each case lasts windows x 10 s plus a few seconds; queues are deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass

import uvloop
from benchlib import CpuMeter, load_average, percentile, private_node, spread

from flowdeck.engine import topology
from flowdeck.engine.commands import Stop, WorkerAssignment, WorkerCommand, WorkerMessage
from flowdeck.engine.spec import RunSpec
from flowdeck.engine.worker import _Worker

WINDOW = 10.0
#: Seconds after publishing starts before the first window (connections settle).
SETTLE = 1.0
TOLERANCE = 0.01


@dataclass(frozen=True)
class Case:
    publishers: int
    rate: float
    queues: int

    @property
    def label(self) -> str:
        return f"{self.publishers} publisher(s) x {self.rate:,g} msg/s"


CASES = (
    Case(1, 1.0, 1),
    Case(1, 100.0, 1),
    Case(1, 1000.0, 1),
    Case(1, 5000.0, 1),
    Case(500, 2.0, 100),
)


@dataclass
class Result:
    case: Case
    ratios: list[list[float]]  # per publisher, per window: achieved / target
    connect_seconds: float
    sample_late_ms: list[float]
    published: int
    consumed: int
    client_cores: float
    broker_cores: float
    others_cores: float


async def run_case(uri: str, case: Case, windows: int, broker_pid: int | None) -> Result:
    name = f"flowdeck-accuracy-{uuid.uuid4().hex[:8]}-%d"
    clients = 2 * case.publishers
    spec = RunSpec(
        name="rate-accuracy",
        uri=uri,
        queue_pattern=name,
        queues=case.queues,
        durable=False,
        publishers=case.publishers,
        consumers=case.publishers,
        rate=case.rate,
        message_size=1000,
        persistent=False,
        confirms=True,
        inflight=1000,
        prefetch=1000,
        ack_every=1,
        duration=SETTLE + windows * WINDOW + 5,
        workers=0,
    )
    await topology.declare(spec, uri)
    began = time.time()
    # Publishing starts at start_at; leave time to connect every client first.
    start_at = began + (3.0 if clients <= 10 else 20.0)
    worker = _Worker(WorkerAssignment(0, 1, spec, start_at, (uri,)), lambda _m: None)
    messages: list[WorkerMessage] = []
    worker.emit = messages.append
    commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()
    task = asyncio.create_task(worker.run(commands))
    connect_seconds = float("nan")
    ratios: list[list[float]] = []
    late_ms: list[float] = []
    meter = CpuMeter([None])
    try:
        while time.time() < start_at + 5:
            if len(worker.connections) >= clients:
                connect_seconds = time.time() - began
                break
            if task.done():
                task.result()  # raises what stopped the worker
            await asyncio.sleep(0.005)
        while not worker.publishing_started or len(worker.publishers) < case.publishers:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # every publisher's start() ran in the same callback
        publishers = list(worker.publishers)
        half = 0.5 / case.rate
        # Each publisher sends at its own phase of the send interval: its own window edges.
        samples = sorted(
            (p.pacer.intended_ns(0) / 1e9 + SETTLE + half + j * WINDOW, i, j)
            for i, p in enumerate(publishers)
            for j in range(windows + 1)
        )
        counts = [[0] * len(publishers) for _ in range(windows + 1)]
        meter = CpuMeter([os.getpid(), broker_pid])
        metering = False
        for edge, i, j in samples:
            await asyncio.sleep(max(0.0, edge - time.time()))
            counts[j][i] = publishers[i].published
            late_ms.append((time.time() - edge) * 1000)
            if not metering:
                meter.start()
                metering = True
        meter.stop()
        target = case.rate * WINDOW
        ratios = [
            [(counts[j + 1][i] - counts[j][i]) / target for j in range(windows)]
            for i in range(len(publishers))
        ]
        commands.put_nowait(Stop(3.0))
        report = await task
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await topology.delete_queues(uri, spec.queue_names)
    return Result(
        case=case,
        ratios=ratios,
        connect_seconds=connect_seconds,
        sample_late_ms=late_ms,
        published=report.counters.published,
        consumed=report.counters.consumed,
        client_cores=meter.cores(meter.pids[0]) if meter.pids else 0.0,
        broker_cores=meter.cores(broker_pid) if broker_pid else 0.0,
        others_cores=meter.others_cores(),
    )


def describe(result: Result) -> list[str]:
    per_publisher = [statistics.mean(r) for r in result.ratios]
    every_window = [x for r in result.ratios for x in r]
    worst = max(every_window, key=lambda x: abs(x - 1.0))
    within = sum(1 for x in every_window if abs(x - 1.0) <= TOLERANCE)
    lines = [
        f"{result.case.label}: achieved/target per publisher (mean of its windows) "
        f"min {min(per_publisher):.4f} median {statistics.median(per_publisher):.4f} "
        f"max {max(per_publisher):.4f}; every window min {min(every_window):.4f} "
        f"max {max(every_window):.4f} (worst {worst:.4f}); "
        f"{within}/{len(every_window)} windows within {TOLERANCE:.0%}",
        f"    sampling late by p50 {percentile(result.sample_late_ms, 50):.2f} ms, "
        f"max {max(result.sample_late_ms):.2f} ms; published {result.published:,}, "
        f"consumed {result.consumed:,}; client {result.client_cores:.2f} cores, "
        f"broker {result.broker_cores:.2f} cores, other work {result.others_cores:.2f} cores; "
        f"{2 * result.case.publishers} clients connected in {result.connect_seconds:.2f} s",
    ]
    return lines


async def main(args: argparse.Namespace) -> int:
    cases = [c for c in CASES if not args.only or c.publishers in args.only]
    results: list[Result] = []
    with private_node() as node:
        broker_pid = node.beam_pid()
        for run in range(args.runs):
            for case in cases:
                print(f"run {run + 1}/{args.runs}: {case.label} ({load_average()})", flush=True)
                result = await run_case(node.uri, case, args.windows, broker_pid)
                for line in describe(result):
                    print("  " + line, flush=True)
                results.append(result)
    print()
    print(f"## rate accuracy, {args.runs} run(s), {args.windows} windows of {WINDOW:g} s each")
    print(
        "| set-up | achieved/target per publisher: min / median / max | every window: "
        "min–max | windows within 1% | connect (s) |"
    )
    print("|---|---|---|---|---|")
    for case in cases:
        mine = [r for r in results if r.case == case]
        per_publisher = [statistics.mean(x) for r in mine for x in r.ratios]
        windows = [w for r in mine for x in r.ratios for w in x]
        within = sum(1 for w in windows if abs(w - 1.0) <= TOLERANCE)
        connects = [r.connect_seconds for r in mine]
        print(
            f"| {case.label} | {min(per_publisher):.4f} / "
            f"{statistics.median(per_publisher):.4f} / {max(per_publisher):.4f} | "
            f"{min(windows):.4f}–{max(windows):.4f} | {within}/{len(windows)} | "
            f"{spread(connects, '.2f')} |"
        )
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=3, help="10 s windows per case (1–12)")
    parser.add_argument("--runs", type=int, default=1, help="repeat every case (1–10)")
    parser.add_argument(
        "--only", type=int, nargs="*", help="only the cases with these publisher counts"
    )
    args = parser.parse_args()
    if not 1 <= args.windows <= 12:
        parser.error(f"--windows must be 1..12, got {args.windows}")
    if not 1 <= args.runs <= 10:
        parser.error(f"--runs must be 1..10, got {args.runs}")
    return args


if __name__ == "__main__":
    sys.exit(uvloop.run(main(parse())))
