"""Client CPU per message and msg/s: flowdeck's lean path against plain aio-pika.

The issue-7 set-up: 1 kB persistent messages, one publisher with confirms and an in-flight
window of 1000, one consumer with prefetch 1000 acking every 100 with the multiple flag, a
classic durable queue, one client process. Each path runs ``--seconds`` against the same
broker in the same invocation; figures are taken over the steady part (after a warm-up
second) from the process's CPU time (``time.process_time``) and the messages consumed.
Also measured: the lean path at a fixed 5,000 msg/s, and end-to-end p50 at 1,000 msg/s
with read holding as the engine sets it (off at that rate) against holding forced on.

    .venv/bin/python benchmarks/engine_throughput.py --runs 5 --seconds 10
    .venv/bin/python benchmarks/engine_throughput.py --runs 5 --seconds 10 --queue-type quorum

The broker's CPU per message (its Erlang VM, by psutil, over the same seconds) is printed
beside the client's, so it is clear which side is the limit.

Every run is bounded (``--seconds`` each, a few seconds of setup); queues are unique and
deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from dataclasses import dataclass

import aio_pika
from benchlib import SHARED_URI, cpu_seconds, listening_pid, load_average, machine_seconds

from flowdeck.engine import latency as hdr
from flowdeck.engine.commands import Stop, WorkerAssignment, WorkerCommand, WorkerMessage
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.snapshot import ClientSnapshot
from flowdeck.engine.spec import RunSpec

URI = SHARED_URI
WARM_UP = 2.0
#: Queue arguments per --queue-type (set by main); both kinds are durable.
QUEUE_ARGS: dict[str, str] = {}
#: The broker's Erlang VM, whose CPU is read beside the client's.
BROKER_PID: int | None = None


@dataclass(frozen=True)
class Figure:
    rate: float  # consumed msg/s
    cpu_us: float  # client CPU µs per message (publish + consume)
    p50_us: float | None = None
    broker_us: float | None = None  # broker CPU µs per message, same seconds
    others_cores: float | None = None  # cores the rest of the machine used meanwhile


async def declare(name: str) -> None:
    connection = await aio_pika.connect(URI)
    channel = await connection.channel()
    await channel.declare_queue(name, durable=True, arguments=dict(QUEUE_ARGS) or None)
    await connection.close()


async def delete(name: str) -> None:
    connection = await aio_pika.connect(URI)
    channel = await connection.channel()
    await channel.queue_delete(name)
    await connection.close()


async def lean(seconds: float, rate: float = 0.0, read_hold: float | None = None) -> Figure:
    """flowdeck's worker runtime, exactly as a run uses it."""
    import flowdeck.engine.worker as worker_module

    name = f"flowdeck-bench-{uuid.uuid4().hex[:8]}"
    spec = RunSpec(
        uri=URI,
        queue_pattern=name,
        queues=1,
        queue_type=QUEUE_ARGS.get("x-queue-type", "classic"),
        publishers=1,
        consumers=1,
        rate=rate,
        message_size=1000,
        persistent=True,
        confirms=True,
        inflight=1000,
        prefetch=1000,
        ack_every=100,
        duration=seconds + 30,
        workers=0,
    )
    await declare(name)
    marks: list[tuple[float, float, int, ClientSnapshot, float, float]] = []

    def emit(message: WorkerMessage) -> None:
        if isinstance(message, ClientSnapshot):
            marks.append(
                (
                    time.monotonic(),
                    time.process_time(),
                    message.counters.consumed,
                    message,
                    cpu_seconds(BROKER_PID),
                    machine_seconds()[0],
                )
            )

    original = worker_module.READ_HOLD_SECONDS, worker_module.READ_HOLD_ABOVE
    if read_hold is not None:  # force holding on (or off) whatever the load
        worker_module.READ_HOLD_SECONDS = read_hold
        worker_module.READ_HOLD_ABOVE = -1.0 if read_hold else float("inf")
    commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()
    try:
        task = asyncio.create_task(
            worker_module.run_worker(
                WorkerAssignment(0, 1, spec, time.time() + 0.2, (URI,)), commands, emit
            )
        )
        await asyncio.sleep(seconds + 0.5)
        commands.put_nowait(Stop(5.0))
        await task
    finally:
        worker_module.READ_HOLD_SECONDS, worker_module.READ_HOLD_ABOVE = original
        await delete(name)
    steady = [m for m in marks if m[0] - marks[0][0] >= WARM_UP - 1][: int(seconds - WARM_UP)]
    first, last = steady[0], steady[-1]
    consumed = last[2] - first[2]
    merged = hdr.merge(
        m[3].latency.get((LatencyKind.END_TO_END, SendBasis.ACTUAL), b"") for m in steady[1:]
    )
    return Figure(
        rate=consumed / (last[0] - first[0]),
        cpu_us=(last[1] - first[1]) / max(consumed, 1) * 1e6,
        p50_us=float(merged.get_value_at_percentile(50)) if merged.total_count else None,
        broker_us=(last[4] - first[4]) / max(consumed, 1) * 1e6 if BROKER_PID else None,
        others_cores=((last[5] - first[5]) - (last[1] - first[1]) - (last[4] - first[4]))
        / (last[0] - first[0]),
    )


async def plain_aio_pika(seconds: float) -> Figure:
    """What a straightforward aio-pika client does: one task per publish, a window of
    1000 unconfirmed messages, a consumer acking every 100th delivery with multiple.
    """
    name = f"flowdeck-bench-{uuid.uuid4().hex[:8]}"
    await declare(name)
    publish_connection = await aio_pika.connect(URI)
    consume_connection = await aio_pika.connect(URI)
    consumed = 0
    stop_at = time.monotonic() + seconds
    try:
        consume_channel = await consume_connection.channel()
        await consume_channel.set_qos(prefetch_count=1000)
        queue = await consume_channel.get_queue(name)

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal consumed
            consumed += 1
            if consumed % 100 == 0:
                await message.ack(multiple=True)

        await queue.consume(on_message)
        channel = await publish_connection.channel(publisher_confirms=True)
        window = asyncio.Semaphore(1000)
        body = b"x" * 1000

        async def publish_one() -> None:
            try:
                await channel.default_exchange.publish(
                    aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=name,
                )
            finally:
                window.release()

        async def publish_loop() -> None:
            pending: set[asyncio.Task[None]] = set()
            while time.monotonic() < stop_at:
                await window.acquire()
                task = asyncio.create_task(publish_one())
                pending.add(task)
                task.add_done_callback(pending.discard)
            await asyncio.gather(*pending, return_exceptions=True)

        publishing = asyncio.create_task(publish_loop())
        await asyncio.sleep(WARM_UP)
        wall0, cpu0, consumed0 = time.monotonic(), time.process_time(), consumed
        broker0, machine0 = cpu_seconds(BROKER_PID), machine_seconds()[0]
        await asyncio.sleep(seconds - WARM_UP - 0.5)
        wall1, cpu1, consumed1 = time.monotonic(), time.process_time(), consumed
        broker1, machine1 = cpu_seconds(BROKER_PID), machine_seconds()[0]
        await publishing
    finally:
        await publish_connection.close()
        await consume_connection.close()
        await delete(name)
    count = consumed1 - consumed0
    return Figure(
        rate=count / (wall1 - wall0),
        cpu_us=(cpu1 - cpu0) / max(count, 1) * 1e6,
        broker_us=(broker1 - broker0) / max(count, 1) * 1e6 if BROKER_PID else None,
        others_cores=((machine1 - machine0) - (cpu1 - cpu0) - (broker1 - broker0))
        / (wall1 - wall0),
    )


def spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:,.1f}"
    return f"{statistics.median(values):,.1f} (range {min(values):,.1f}–{max(values):,.1f})"


async def main(args: argparse.Namespace) -> None:
    global BROKER_PID
    results: dict[str, list[Figure]] = {}
    if args.queue_type == "quorum":
        QUEUE_ARGS["x-queue-type"] = "quorum"
    BROKER_PID = listening_pid(5672)
    print(
        f"{args.queue_type} durable queue; broker Erlang VM pid {BROKER_PID or 'not visible'}; "
        f"{load_average()}",
        flush=True,
    )

    def add(key: str, figure: Figure) -> None:
        results.setdefault(key, []).append(figure)
        p50 = f", e2e p50 {figure.p50_us:,.0f} µs" if figure.p50_us else ""
        broker = f", broker {figure.broker_us:.0f} µs CPU/msg" if figure.broker_us else ""
        if figure.others_cores is not None:
            broker += f", other work on the machine {figure.others_cores:.2f} cores"
        print(
            f"  {key}: {figure.rate:,.0f} msg/s, {figure.cpu_us:.1f} µs CPU/msg{broker}{p50}",
            flush=True,
        )

    for run in range(args.runs):
        print(f"run {run + 1}/{args.runs} ({args.loop} loop, {load_average()})", flush=True)
        add("lean full speed", await lean(args.seconds))
        add("aio-pika full speed", await plain_aio_pika(args.seconds))
        add("lean at 5,000 msg/s", await lean(args.seconds, rate=5000.0))
        if args.latency:
            add("lean at 1,000 msg/s (engine's read holding)", await lean(args.seconds, 1000.0))
            add("lean at 1,000 msg/s (holding forced on)", await lean(args.seconds, 1000.0, 0.001))
    print()
    print(
        f"## {args.runs} run(s) of {args.seconds:g} s, {args.queue_type} queue, "
        f"{args.loop} loop, median (range)"
    )
    print("| set-up | msg/s | client CPU µs/msg | broker CPU µs/msg | other work, cores |")
    print("|---|---|---|---|---|")
    for key, figures in results.items():
        broker = [f.broker_us for f in figures if f.broker_us is not None]
        print(
            f"| {key} | {spread([f.rate for f in figures])} | "
            f"{spread([f.cpu_us for f in figures])} | {spread(broker)} | "
            f"{spread([f.others_cores for f in figures if f.others_cores is not None])} |"
        )
    lean_runs, plain_runs = results["lean full speed"], results["aio-pika full speed"]
    cpu_ratio = [p.cpu_us / lf.cpu_us for lf, p in zip(lean_runs, plain_runs, strict=True)]
    rate_ratio = [lf.rate / p.rate for lf, p in zip(lean_runs, plain_runs, strict=True)]
    print()
    print(f"aio-pika CPU per message / lean, same run: {spread(cpu_ratio)}×")
    print(f"lean max rate / aio-pika max rate, same run: {spread(rate_ratio)}×")
    if args.latency:
        auto = results["lean at 1,000 msg/s (engine's read holding)"]
        forced = results["lean at 1,000 msg/s (holding forced on)"]
        ratios = [
            f.p50_us / a.p50_us for a, f in zip(auto, forced, strict=True) if a.p50_us and f.p50_us
        ]
        if ratios:
            print(
                f"e2e p50 at 1,000 msg/s, holding forced on / as the engine sets it: "
                f"{spread(ratios)}×"
            )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per measurement (10–20)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument(
        "--queue-type",
        choices=("classic", "quorum"),
        default="classic",
        help="the queue both paths use (durable either way)",
    )
    parser.add_argument(
        "--latency",
        action="store_true",
        help="also measure e2e p50 at 1,000 msg/s with and without holding",
    )
    args = parser.parse_args()
    if not 5 <= args.seconds <= 60:
        parser.error(f"--seconds must be 5..60, got {args.seconds:g}")
    return args


def run(args: argparse.Namespace) -> int:
    coroutine = main(args)
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(coroutine)
    else:
        asyncio.run(coroutine)
    return 0


if __name__ == "__main__":
    sys.exit(run(parse()))
