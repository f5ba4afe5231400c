"""flowdeck's own pacing against PerfTest's, at the seed's benchmark #3 shape (issue 26).

Many slow publishers are where a load tool's pacing can add latency of its own: 500
publishers at 2 msg/s that all send in the same millisecond every 0.5 s hand the broker,
and the one worker loop that also runs the consumers, a burst of 500 messages to drain in
series twice a second. Two measurements on one private RabbitMQ node (file limit 8,192, so
1,000 connections fit):

1. **Send-time spread** (the mechanism): one worker runtime in this process (uvloop), as a
   run uses it, with the shape's publishers and consumers; every send of every publisher
   is recorded for ``--spread-seconds``. Printed: where in the send interval the sends fall
   (the share in its busiest 1 %, the 5–95 % range of their offsets), how late each send
   left against its intended time, and the worker's e2e p50/p99 (actual and intended send
   time) over the same seconds.
2. **Side by side**: ``flowdeck run --perftest LINE`` and, with ``--perftest PATH`` (a
   PerfTest 2.x launcher), PerfTest with the same LINE, alternately, ``--pairs`` times.
   Latency is the median over the steady seconds (from ``--settle`` on) of the per-second
   e2e p50 and p99 each tool prints (PerfTest's end-of-run percentiles include its start-up
   backlog); the ratio flowdeck / PerfTest is taken per pair.

The shape: ``--preset`` (scaled by ``--scale``) gives publishers, consumers, queues, rate,
in-flight and prefetch; flags override each. Default: bench3's 500 publishers, 500
consumers and 100 quorum queues (``x-max-in-memory-length = 0``, 1 kB persistent
messages, confirms, in-flight and prefetch 30) at 2 msg/s per publisher::

    .venv/bin/python benchmarks/pacing_vs_perftest.py --perftest /path/to/perftest
    .venv/bin/python benchmarks/pacing_vs_perftest.py --preset bench5 --scale 0.1 \\
        --perftest /path/to/perftest

Bounded: the spread lasts ``--spread-seconds`` plus connecting; each run ``--duration``
plus its drain; queues are deleted after every run and the node is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import uvloop
from benchlib import load_average, private_node, spread

from flowdeck.engine import latency as hdr
from flowdeck.engine import topology
from flowdeck.engine.commands import Stop, WorkerAssignment, WorkerCommand, WorkerMessage
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.perftest import spec_from_perftest
from flowdeck.engine.presets import preset
from flowdeck.engine.publisher import Publisher
from flowdeck.engine.snapshot import ClientSnapshot
from flowdeck.engine.worker import _Worker

ROOT = Path(__file__).resolve().parent.parent
FLOWDECK = ROOT / ".venv" / "bin" / "flowdeck"
#: flowdeck's per-second progress line (stderr).
FLOWDECK_TICK = re.compile(
    r"\[\s*(?P<elapsed>\d+)/\d+ s\] target\s+\S+/s\s+publish\s+(?P<publish>[\d,]+)/s"
    r"\s+confirm\s+[\d,]+/s\s+consume\s+(?P<consume>[\d,]+)/s\s+pending\s+[\d,]+"
    r"\s+e2e p50\s+(?P<p50>[\d.,-]+) p99\s+(?P<p99>[\d.,-]+) ms"
)
#: PerfTest's per-second line (stdout), its historical format.
PERFTEST_TICK = re.compile(
    r"time (?P<elapsed>[\d.]+) s, sent: (?P<publish>[\d.]+) msg/s.*received: "
    r"(?P<consume>[\d.]+) msg/s.*consumer latency: \d+/(?P<p50>\d+)/\d+/\d+/(?P<p99>\d+)/\d+ "
    r"(?P<unit>µs|ms)"
)


@dataclass(frozen=True)
class Shape:
    publishers: int
    consumers: int
    queues: int
    rate: float
    inflight: int
    prefetch: int
    size: int

    def perftest_line(self, pattern: str, duration: float) -> str:
        """The PerfTest options of this shape; flowdeck runs the same line (``--perftest``)."""
        return (
            f"-x {self.publishers} -y {self.consumers} -qq -qa x-max-in-memory-length=0 "
            f"-qp {pattern} -qpf 1 -qpt {self.queues} -r {self.rate:g} -c {self.inflight} "
            f"-q {self.prefetch} -s {self.size} -z {duration:g}"
        )

    def describe(self) -> str:
        return (
            f"{self.publishers} publishers x {self.rate:g} msg/s, {self.consumers} consumers, "
            f"{self.queues} quorum queues, in-flight {self.inflight}, prefetch {self.prefetch}, "
            f"{self.size} B persistent"
        )


@dataclass
class Seconds:
    """One tool's per-second figures over the steady part of a run."""

    p50_ms: list[float]
    p99_ms: list[float]
    publish: list[float]
    consume: list[float]

    @property
    def p50(self) -> float:
        return statistics.median(self.p50_ms) if self.p50_ms else float("nan")

    @property
    def p99(self) -> float:
        return statistics.median(self.p99_ms) if self.p99_ms else float("nan")

    def line(self) -> str:
        return (
            f"e2e p50 {self.p50:.2f} ms, p99 {self.p99:.2f} ms (median of {len(self.p50_ms)} s); "
            f"publish {statistics.median(self.publish):,.0f}/s, "
            f"consume {statistics.median(self.consume):,.0f}/s"
        )


def number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("-", "") else float("nan")


# -- 1. send-time spread --------------------------------------------------------------------


@dataclass
class Spread:
    sends: int
    busiest_share: float  # of all messages, in the busiest 1 % of the send interval
    busiest_intended: float  # the same by their intended send times
    offset_range_ms: tuple[float, float]  # 5th and 95th percentile of the offsets
    late_ms: tuple[float, float, float]  # p50, p99, max of send time - intended time
    e2e: tuple[float, float]  # p50, p99 ms, actual send basis (median of seconds)
    e2e_intended: tuple[float, float]
    interval_ms: float
    loop_lag_ms: tuple[float, float, float]  # p50, p99, max of a 5 ms timer's lateness
    snapshot_ms: tuple[float, float]  # median and max of one snapshot's work on the loop
    cpu_us: float  # this process's CPU per message over the settled seconds
    cpu_cores: float
    runqueue_share: float  # of the settled seconds, waiting for a core (Linux schedstat)


async def send_spread(uri: str, shape: Shape, seconds: float) -> Spread:
    pattern = f"flowdeck-spread-{uuid.uuid4().hex[:8]}-%d"
    spec = replace(
        spec_from_perftest(shape.perftest_line(pattern, seconds + 10)), uri=uri, workers=0
    )
    await topology.declare(spec, uri)
    start_at = time.time() + 20.0  # time to connect every client first
    messages: list[WorkerMessage] = []
    worker = _Worker(WorkerAssignment(0, 1, spec, start_at, (uri,)), messages.append)
    commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()
    task = asyncio.create_task(worker.run(commands))
    sends: list[tuple[int, int, int]] = []  # (send ns, intended ns of the first, count)
    lags: list[float] = []
    snapshot_ms: list[float] = []
    emit_snapshot = worker._emit_snapshot

    def timed_snapshot() -> None:
        began = time.perf_counter()
        emit_snapshot()
        snapshot_ms.append((time.perf_counter() - began) * 1000)

    worker._emit_snapshot = timed_snapshot  # type: ignore[method-assign]
    probe = asyncio.create_task(_loop_lag(lags, start_at + 1.0, start_at + seconds))
    try:
        while len(worker.publishers) < shape.publishers or len(worker.consumers) < shape.consumers:
            if task.done():
                task.result()  # raises what stopped the worker
            await asyncio.sleep(0.01)
        if worker.publishing_started:
            raise SystemExit("connecting took longer than 20 s: the machine is too busy")
        for publisher in worker.publishers:
            publisher._send = _recording(publisher, publisher._send, sends)  # type: ignore[method-assign]
        await asyncio.sleep(max(0.0, start_at + 1.0 - time.time()))
        cpu0, wall0, waited0 = time.process_time(), time.monotonic(), _runqueue_seconds()
        await asyncio.sleep(max(0.0, start_at + seconds - time.time()))
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        waited = _runqueue_seconds() - waited0
        commands.put_nowait(Stop(3.0))
        await task
    finally:
        for running in (task, probe):
            if not running.done():
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        await topology.delete_queues(uri, spec.queue_names)

    interval_ns = 1e9 / shape.rate
    origin_ns = start_at * 1e9
    settled = [s for s in sends if s[0] >= origin_ns + 1e9]  # past the first second
    offsets: list[float] = []
    for sent, _, count in settled:
        offsets.extend([((sent - origin_ns) % interval_ns) / 1e6] * count)
    intended_offsets = [((i - origin_ns) % interval_ns) / 1e6 for _, i, _ in settled]
    late = sorted((sent - intended) / 1e6 for sent, intended, _ in settled)
    offsets.sort()
    snapshots = [m for m in messages if isinstance(m, ClientSnapshot)]
    snapshots = [m for m in snapshots[:-1] if m.at >= start_at + 1.5]  # the last: the drain's

    def e2e(basis: SendBasis) -> tuple[float, float]:
        p50s, p99s = [], []
        for snapshot in snapshots:
            encoded = snapshot.latency.get((LatencyKind.END_TO_END, basis))
            histogram = hdr.decode(encoded) if encoded else None
            if histogram is None or not histogram.get_total_count():
                continue
            values = hdr.values_at_percentiles(histogram, (50.0, 99.0))
            p50s.append(values[50.0] / 1000)
            p99s.append(values[99.0] / 1000)
        if not p50s:
            return float("nan"), float("nan")
        return statistics.median(p50s), statistics.median(p99s)

    return Spread(
        sends=len(offsets),
        busiest_share=_busiest(offsets, interval_ns / 1e6),
        busiest_intended=_busiest(intended_offsets, interval_ns / 1e6),
        offset_range_ms=(_rank(offsets, 5), _rank(offsets, 95)),
        late_ms=(_rank(late, 50), _rank(late, 99), late[-1] if late else float("nan")),
        e2e=e2e(SendBasis.ACTUAL),
        e2e_intended=e2e(SendBasis.INTENDED),
        interval_ms=interval_ns / 1e6,
        loop_lag_ms=(_rank(sorted(lags), 50), _rank(sorted(lags), 99), max(lags, default=0.0)),
        snapshot_ms=(statistics.median(snapshot_ms), max(snapshot_ms)),
        cpu_us=cpu / max(1, len(offsets)) * 1e6,
        cpu_cores=cpu / wall,
        runqueue_share=waited / wall,
    )


def _runqueue_seconds() -> float:
    """Seconds this thread (the worker's loop) has waited for a core, from Linux's
    schedstat; NaN where that is not available."""
    try:
        with open("/proc/thread-self/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return float("nan")


async def _loop_lag(lags: list[float], since: float, until: float) -> None:
    """How late a 5 ms sleep wakes on the worker's loop (ms), between ``since`` and ``until``."""
    while time.time() < until:
        began = time.perf_counter()
        await asyncio.sleep(0.005)
        if time.time() >= since:
            lags.append((time.perf_counter() - began - 0.005) * 1000)


def _recording(
    publisher: Publisher, send: Callable[[int, int], None], sends: list[tuple[int, int, int]]
) -> Callable[[int, int], None]:
    pacer = publisher.pacer

    def recorded(count: int, now: int) -> None:
        sends.append((now, pacer.intended_ns(pacer.sent), count))
        send(count, now)

    return recorded


def _busiest(offsets_ms: list[float], interval_ms: float) -> float:
    """Share of ``offsets_ms`` in the busiest hundredth of the interval."""
    bins = [0] * 100
    for offset in offsets_ms:
        bins[min(99, int(offset / interval_ms * 100))] += 1
    return max(bins) / max(1, len(offsets_ms))


def _rank(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))]


def describe_spread(result: Spread) -> str:
    low, high = result.offset_range_ms
    return (
        f"{result.sends:,} messages over the settled seconds; the busiest 1 % of the "
        f"{result.interval_ms:g} ms send interval held {result.busiest_share:.1%} of them "
        f"(evenly spread: ~1 %; by intended send time {result.busiest_intended:.1%}); "
        f"offsets 5–95 % {low:.1f}–{high:.1f} ms; sent later than "
        f"intended p50 {result.late_ms[0]:.2f} ms, p99 {result.late_ms[1]:.2f} ms, max "
        f"{result.late_ms[2]:.1f} ms; worker e2e p50 / p99 {result.e2e[0]:.2f} / "
        f"{result.e2e[1]:.2f} ms (from the intended send time {result.e2e_intended[0]:.2f} / "
        f"{result.e2e_intended[1]:.2f} ms); loop lag p50 {result.loop_lag_ms[0]:.2f} ms, p99 "
        f"{result.loop_lag_ms[1]:.2f} ms, max {result.loop_lag_ms[2]:.1f} ms; a snapshot's work "
        f"on the loop {result.snapshot_ms[0]:.2f} ms (max {result.snapshot_ms[1]:.2f}); "
        f"worker CPU {result.cpu_us:.0f} µs per message, {result.cpu_cores:.2f} cores; the "
        f"loop waited for a core {result.runqueue_share:.1%} of the time"
    )


# -- 2. side by side ------------------------------------------------------------------------


def run_flowdeck(
    node_uri: str,
    management_url: str,
    line: str,
    workers: int | None,
    settle: float,
    pythonpath: str | None = None,
) -> Seconds:
    command = [
        str(FLOWDECK),
        "run",
        "--perftest",
        line,
        "--uri",
        node_uri,
        "--management-url",
        management_url,
        "--no-record",
        "--cleanup",
        "--json",
    ]
    if workers is not None:
        command += ["--workers", str(workers)]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    which = f"PYTHONPATH={pythonpath} " if pythonpath else ""
    print(f"  $ {which}flowdeck {' '.join(command[1:])}  ({load_average()})", flush=True)
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    if result.returncode not in (0, 1):
        raise SystemExit(f"flowdeck run ended with {result.returncode}: {result.stderr[-2000:]}")
    return _seconds(FLOWDECK_TICK, result.stderr, settle)


def run_perftest(launcher: str, node_uri: str, line: str, settle: float) -> Seconds:
    command = [launcher, "-h", node_uri, *line.split()]
    print(f"  $ {' '.join(command)}  ({load_average()})", flush=True)
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"PerfTest ended with {result.returncode}: {result.stdout[-2000:]}")
    return _seconds(PERFTEST_TICK, result.stdout, settle)


def _seconds(tick: re.Pattern[str], output: str, settle: float) -> Seconds:
    rows = []
    for match in tick.finditer(output):
        row = match.groupdict()
        scale = 1000.0 if row.pop("unit", "ms") == "µs" else 1.0
        if float(row["elapsed"]) < settle:
            continue
        rows.append(
            (
                number(row["p50"]) / scale,
                number(row["p99"]) / scale,
                number(row["publish"]),
                number(row["consume"]),
            )
        )
    rows = rows[:-1]  # the closing second is partial
    rows = [r for r in rows if r[0] == r[0]]
    if not rows:
        raise SystemExit(f"no per-second figures from {settle:g} s on:\n{output[-2000:]}")
    return Seconds(*(list(column) for column in zip(*rows, strict=True)))


def delete_pattern(management_url: str, pattern: str, queues: int) -> None:
    """PerfTest leaves its quorum queues behind; delete them through the management API."""
    with httpx.Client(base_url=management_url, auth=("guest", "guest"), timeout=30) as http:
        for i in range(1, queues + 1):
            http.delete(f"/api/queues/%2F/{pattern.replace('%d', str(i))}")


def main(args: argparse.Namespace) -> int:
    base = preset(args.preset, args.scale)
    shape = Shape(
        publishers=args.publishers or base.publishers,
        consumers=args.consumers or base.consumers,
        queues=args.queues or base.queues,
        rate=args.rate or base.rate,
        inflight=args.inflight or base.inflight,
        prefetch=args.prefetch or base.prefetch,
        size=base.message_size,
    )
    print(f"shape: {shape.describe()} ({args.preset} x {args.scale:g})", flush=True)
    pairs: list[tuple[Seconds, Seconds | None]] = []
    earlier: list[Seconds] = []
    spreads: list[Spread] = []
    with private_node() as node:
        management = node.management_url
        for run in range(args.spread_runs):
            print(f"send-time spread {run + 1}/{args.spread_runs} ({load_average()})", flush=True)
            result = uvloop.run(send_spread(node.uri, shape, args.spread_seconds))
            print("  " + describe_spread(result), flush=True)
            spreads.append(result)
        for pair in range(args.pairs):
            print(f"pair {pair + 1}/{args.pairs}", flush=True)
            line = shape.perftest_line("pacing-fd-%d", args.duration)
            flowdeck = run_flowdeck(node.uri, management, line, args.workers, args.settle)
            print(f"    flowdeck: {flowdeck.line()}", flush=True)
            if args.compare_with:
                earlier.append(
                    run_flowdeck(
                        node.uri, management, line, args.workers, args.settle, args.compare_with
                    )
                )
                print(f"    flowdeck from {args.compare_with}: {earlier[-1].line()}", flush=True)
            perftest = None
            if args.perftest:
                line = shape.perftest_line("pacing-pt-%d", args.duration)
                try:
                    perftest = run_perftest(args.perftest, node.uri, line, args.settle)
                finally:
                    delete_pattern(management, "pacing-pt-%d", shape.queues)
                print(
                    f"    PerfTest: {perftest.line()}; flowdeck / PerfTest p50 "
                    f"{flowdeck.p50 / perftest.p50:.2f}x, p99 {flowdeck.p99 / perftest.p99:.2f}x",
                    flush=True,
                )
            pairs.append((flowdeck, perftest))
    print()
    print(
        f"## {shape.describe()}; private node, {args.duration:g} s runs, steady from "
        f"{args.settle:g} s; {load_average()}"
    )
    if spreads:
        print(
            "send-time spread: busiest 1 % of the interval holds "
            f"{spread([100 * s.busiest_share for s in spreads], '.1f')} % of the sends "
            f"({spread([100 * s.busiest_intended for s in spreads], '.1f')} % by intended "
            "time); "
            f"sent later than intended p99 {spread([s.late_ms[1] for s in spreads], '.2f')} ms; "
            f"worker e2e p50 {spread([s.e2e[0] for s in spreads], '.2f')} ms, p99 "
            f"{spread([s.e2e[1] for s in spreads], '.2f')} ms"
        )
    if pairs:
        print(
            "| pair | flowdeck e2e p50 / p99 ms | PerfTest e2e p50 / p99 ms | ratio p50 "
            "| ratio p99 |"
        )
        print("|---|---|---|---|---|")
        for i, (f, p) in enumerate(pairs, 1):
            theirs = f"{p.p50:.2f} / {p.p99:.2f}" if p else "-"
            r50 = f"{f.p50 / p.p50:.2f}x" if p else "-"
            r99 = f"{f.p99 / p.p99:.2f}x" if p else "-"
            print(f"| {i} | {f.p50:.2f} / {f.p99:.2f} | {theirs} | {r50} | {r99} |")
        for i, (e, (_, p)) in enumerate(zip(earlier, pairs, strict=False), 1):
            versus = f"; / PerfTest p50 {e.p50 / p.p50:.2f}x, p99 {e.p99 / p.p99:.2f}x" if p else ""
            print(
                f"pair {i}, flowdeck from {args.compare_with}: e2e p50 {e.p50:.2f} ms, p99 "
                f"{e.p99:.2f} ms{versus}"
            )
        compared = [(f, p) for f, p in pairs if p is not None]
        if compared:
            print(
                f"median (range) of the pairs: flowdeck / PerfTest p50 "
                f"{spread([f.p50 / p.p50 for f, p in compared], '.2f')}x, p99 "
                f"{spread([f.p99 / p.p99 for f, p in compared], '.2f')}x"
            )
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bench3", help="where the shape comes from")
    parser.add_argument("--scale", type=float, default=1.0, help="the preset's --scale")
    parser.add_argument("--publishers", type=int, help="override the preset's")
    parser.add_argument("--consumers", type=int, help="override the preset's")
    parser.add_argument("--queues", type=int, help="override the preset's")
    parser.add_argument("--rate", type=float, help="msg/s per publisher (default 2 for bench3)")
    parser.add_argument("--inflight", type=int, help="override the preset's")
    parser.add_argument("--prefetch", type=int, help="override the preset's")
    parser.add_argument("--perftest", help="a PerfTest launcher; without it flowdeck runs alone")
    parser.add_argument("--pairs", type=int, default=3, help="flowdeck/PerfTest pairs (0–10)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per run (20–300)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds before steady")
    parser.add_argument("--workers", type=int, help="flowdeck's --workers (default: its own)")
    parser.add_argument(
        "--compare-with",
        metavar="DIR",
        help="also run, in each pair, the flowdeck importable from DIR (PYTHONPATH): an "
        "earlier version unpacked there as DIR/flowdeck",
    )
    parser.add_argument("--spread-runs", type=int, default=1, help="send-time spreads (0–5)")
    parser.add_argument("--spread-seconds", type=float, default=10.0, help="seconds (3–60)")
    args = parser.parse_args()
    if args.rate is None and args.preset == "bench3":
        args.rate = 2.0
    if not 0 <= args.pairs <= 10:
        parser.error(f"--pairs must be 0..10, got {args.pairs}")
    if not 20 <= args.duration <= 300:
        parser.error(f"--duration must be 20..300 s, got {args.duration:g}")
    if not 0 <= args.settle < args.duration - 5:
        parser.error(f"--settle must be 0..duration-5 s, got {args.settle:g}")
    if not 0 <= args.spread_runs <= 5:
        parser.error(f"--spread-runs must be 0..5, got {args.spread_runs}")
    if not 3 <= args.spread_seconds <= 60:
        parser.error(f"--spread-seconds must be 3..60, got {args.spread_seconds:g}")
    return args


if __name__ == "__main__":
    sys.exit(main(parse()))
