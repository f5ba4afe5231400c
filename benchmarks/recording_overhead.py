"""What recording costs, as a share of the engine's CPU at 10,000 msg/s.

The recorder never sees single messages: per second it gets one ClientSnapshot per worker
(counters and four HDR histograms), one or two BrokerSamples and a few events. This
benchmark feeds a Recorder the stream a 10,000 msg/s run produces (histograms holding
10,000 latencies a second spread over the workers, broker samples with per-queue rows),
measures the process CPU the recorder spends (its calls and its writer thread, parts
really written to disk), and divides by the engine's CPU for the same second of traffic.

The engine's CPU per message is measured by an in-process run on the shared broker
(``--engine-run``, default when the broker answers) or taken from ``--engine-us-per-msg``.

    .venv/bin/python benchmarks/recording_overhead.py [--seconds 300] [--workers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

from flowdeck.collectors import Broker
from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LATENCY_KEYS, encode, new_histogram, record
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.recording.recorder import Recorder
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec

RATE = 10_000  # msg/s, the budget's reference load
BUDGET = 0.02


def cpu_seconds() -> float:
    """CPU of this process, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def histogram_pool(per_worker_rate: int, size: int = 16) -> list[dict[tuple, bytes]]:
    """Encoded histograms as workers send them, built before timing (that is engine work)."""
    rng = random.Random(1)
    pool = []
    for _ in range(size):
        latency = {}
        for key in LATENCY_KEYS:
            histogram = new_histogram()
            for _ in range(per_worker_rate):
                record(histogram, int(rng.lognormvariate(8.0, 1.0)) + 50)
            latency[key] = encode(histogram)
        pool.append(latency)
    return pool


def synthetic_stream(
    seconds: int, workers: int, queues: int, start: float
) -> list[tuple[list[ClientSnapshot], BrokerSample]]:
    """Per second: every worker's snapshot and one broker sample, built before timing
    (making them is the engine's and the collectors' work, not the recorder's).
    """
    per_worker = RATE // workers
    pool = histogram_pool(per_worker)
    settings = Settings.of(
        inflight=1000, prefetch=1000, ack_every=1, rate=0.0, publishers=workers, consumers=workers
    )
    stream = []
    for second in range(1, seconds + 1):
        at = start + second
        total = per_worker * second
        counters = Counters(published=total, confirmed=total, consumed=total, acked=total)
        snapshots = [
            ClientSnapshot(
                worker=worker,
                at=at,
                interval=1.0,
                counters=counters,
                pending_confirms=500,
                unacked=200,
                connections=2,
                blocked=0,
                settings=settings,
                target_rate=0.0,
                latency=pool[(second * workers + worker) % len(pool)],
            )
            for worker in range(workers)
        ]
        broker = BrokerSample(
            source="management",
            taken_at=at,
            figures_at=at - 2,
            statistics_interval=5.0,
            nodes=(
                NodeSample(
                    "rabbit@bench",
                    mem_used=10**9,
                    mem_limit=4 * 10**9,
                    disk_free=10**11,
                    disk_free_limit=5 * 10**7,
                ),
            ),
            queues=tuple(QueueSample(f"q-{i}", "/", "quorum", 100, 50, 1) for i in range(queues)),
            publish_rate=RATE,
            deliver_rate=RATE,
            unconfirmed=500,
            unacked=200,
            connections=2 * workers,
            connections_blocked=0,
            connections_blocking=0,
        )
        stream.append((snapshots, broker))
    return stream


def measure_recorder(seconds: int, workers: int, queues: int, root: Path) -> float:
    """CPU seconds the recorder spends on ``seconds`` of the stream, writer thread included."""
    start = time.time()
    stream = synthetic_stream(seconds, workers, queues, start)
    spec = RunSpec(name="recording overhead", duration=seconds + 1)
    began = cpu_seconds()
    recorder = Recorder(root, spec, flush_seconds=2.0)
    recorder.start(start)
    for second, (snapshots, broker) in enumerate(stream, start=1):
        for snapshot in snapshots:
            recorder.snapshot(snapshot)
        recorder.broker(broker)
        if second % 60 == 0:
            recorder.event(RunEvent(start + second, EventKind.PHASE, f"phase at {second} s"))
    recorder.close("completed", {}, start + seconds + 1)
    used = cpu_seconds() - began
    if recorder.error:
        sys.exit(f"recording failed: {recorder.error}")
    published = open_session(recorder.session_dir).totals().published
    assert published == RATE // workers * workers * seconds, published
    return used


async def engine_us_per_message(uri: str, rate: int, seconds: float) -> float:
    """CPU per message of an in-process run (publisher, consumer, controller), unrecorded.

    Measured between the run's first and last per-second Tick, so connection set-up and
    drain do not count; what the process spends per message published while running.
    """
    from flowdeck.engine.controller import Controller
    from flowdeck.engine.progress import Tick

    name = f"flowdeck-bench-{uuid.uuid4().hex[:8]}"
    spec = RunSpec(
        name="engine cpu",
        uri=uri,
        queue_pattern=name,
        publishers=1,
        consumers=1,
        rate=rate,
        duration=seconds,
        workers=0,
        durable=False,
        persistent=False,
    )
    controller = Controller(spec, broker=Broker.parse(uri), workers=0, cleanup=True)
    ticks: list[tuple[float, int, int]] = []

    def on_update(update: object) -> None:
        if isinstance(update, Tick):
            ticks.append((cpu_seconds(), update.totals.published, update.totals.consumed))

    controller.add_listener(on_update)
    await controller.start()
    await controller.wait()
    if len(ticks) < 3:
        raise RuntimeError(f"only {len(ticks)} ticks from the engine run")
    (cpu_first, published_first, _), (cpu_last, published_last, consumed_last) = (
        ticks[0],
        ticks[-1],
    )
    messages = max(1, published_last - published_first)
    used = cpu_last - cpu_first
    print(
        f"engine run (in-process, {rate:,} msg/s asked): {messages:,} published between "
        f"first and last tick ({consumed_last:,} consumed in all), {used:.2f} s CPU"
    )
    return used / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=300, help="run seconds to simulate")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument(
        "--engine-us-per-msg",
        type=float,
        default=None,
        help="engine CPU per message in µs (skips the engine run)",
    )
    parser.add_argument("--uri", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    parser.add_argument("--engine-rate", type=int, default=RATE)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as root:
        used = measure_recorder(args.seconds, args.workers, args.queues, Path(root))
    seconds = args.seconds
    per_second_ms = used / seconds * 1000
    print(
        f"recorder: {seconds} s of a {RATE:,} msg/s run ({args.workers} workers, "
        f"{args.queues} queues) cost {used:.3f} s CPU = {per_second_ms:.2f} ms CPU per run "
        f"second"
    )

    if args.engine_us_per_msg is not None:
        estimates = {"given": args.engine_us_per_msg}
    else:
        try:
            measured = asyncio.run(engine_us_per_message(args.uri, args.engine_rate, 8.0))
            estimates = {"measured": measured, "brief low": 10.0, "brief high": 25.0}
        except Exception as exc:  # no broker: fall back to the brief's range
            print(f"engine run not possible ({exc}); using 10-25 µs/msg")
            estimates = {"low": 10.0, "high": 25.0}
    for label, us_per_msg in estimates.items():
        engine_ms = us_per_msg * RATE / 1000
        ratio = per_second_ms / engine_ms
        verdict = "within" if ratio < BUDGET else "OVER"
        print(
            f"engine ({label}): {us_per_msg:.1f} µs/msg -> {engine_ms:.0f} ms CPU per second "
            f"at {RATE:,} msg/s; recording = {ratio:.2%} of it ({verdict} the "
            f"{BUDGET:.0%} budget)"
        )


if __name__ == "__main__":
    main()
