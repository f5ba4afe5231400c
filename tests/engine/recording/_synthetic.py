"""Synthetic runs for the recording tests: snapshots, broker samples, and a recorder
process that the SIGKILL test kills (``python _synthetic.py ROOT SESSION_ID``).
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
from flowdeck.engine.latency import LATENCY_KEYS, LatencyKey, encode, new_histogram, record
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec

SETTINGS = Settings.of(
    inflight=200, prefetch=100, ack_every=2, rate=500.0, publishers=2, consumers=2
)
SPEC = RunSpec(
    name="synthetic sweep",
    uri="amqp://flow:s3cret-pw@127.0.0.1:5672/%2F",
    publishers=4,
    consumers=4,
    rate=500.0,
    duration=600,
)


@dataclass
class SyntheticWorker:
    """One worker's cumulative counters and every latency it reported, for expectations."""

    worker: int
    counters: Counters = field(default_factory=Counters)
    latencies: dict[LatencyKey, list[int]] = field(default_factory=dict)
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    def snapshot(
        self,
        at: float,
        published: int = 1000,
        with_latency: bool = True,
        errors: tuple[str, ...] = (),
    ) -> ClientSnapshot:
        consumed = published - self.rng.randint(0, 20)
        self.counters = self.counters + Counters(
            published=published,
            confirmed=published - 3,
            nacked=1,
            returned=2,
            consumed=consumed,
            acked=consumed,
            redelivered=self.rng.randint(0, 2),
            duplicates=self.rng.randint(0, 1),
        )
        latency: dict[LatencyKey, bytes] = {}
        if with_latency:
            for key in LATENCY_KEYS:
                histogram = new_histogram()
                values = [int(self.rng.lognormvariate(7.5, 0.8)) + 1 for _ in range(200)]
                for value in values:
                    record(histogram, value)
                self.latencies.setdefault(key, []).extend(values)
                latency[key] = encode(histogram)
        return ClientSnapshot(
            worker=self.worker,
            at=at,
            interval=1.0,
            counters=self.counters,
            pending_confirms=self.rng.randint(0, 200),
            unacked=self.rng.randint(0, 100),
            connections=4,
            blocked=0,
            settings=SETTINGS,
            target_rate=1000.0,
            latency=latency,
            errors=errors,
        )


def broker_sample(at: float, queues: int = 3) -> BrokerSample:
    return BrokerSample(
        source="management",
        taken_at=at,
        figures_at=at - 2.5,
        statistics_interval=5.0,
        nodes=(
            NodeSample(
                "rabbit@a",
                mem_used=100,
                mem_limit=1000,
                disk_free=5000,
                disk_free_limit=50,
                partitions=("rabbit@c",),
                raft_term_total=4,
                raft_commit_latency=0.002,
                connections_running=3,
                connections_flow=2,
                connections_blocking=0,
                connections_blocked=0,
                channels_running=4,
                channels_flow=1,
            ),
            NodeSample(
                "rabbit@b",
                mem_used=200,
                mem_limit=1000,
                mem_alarm=True,
                disk_free=4000,
                disk_free_limit=50,
            ),
        ),
        queues=tuple(
            QueueSample(
                f"q-{i}",
                "/",
                "quorum",
                ready=10 * i,
                unacked=i,
                consumers=1,
                publish_rate=100.0,
                leader="rabbit@a",
                members=("rabbit@a", "rabbit@b", "rabbit@c"),
                online=("rabbit@a", "rabbit@b"),
                state="running",
            )
            for i in range(queues)
        ),
        publish_rate=1000.0,
        deliver_rate=990.0,
        unconfirmed=12,
        unacked=30,
        connections=8,
        connections_blocked=0,
        connections_blocking=1,
        connections_flow=2,
        channels=8,
        channels_flow=1,
        run_publishers=4,
        run_publishers_flow=2,
        publishers_in_flow=(1, 3),
        run_accepted=9_000,
        run_accept_rate=880.5,
        run_unconfirmed=40,
        run_delivered=8_700,
        run_deliver_rate=870.0,
        run_acked=8_650,
        run_ack_rate=865.0,
        run_unacked=50,
        stream_connections=5,
        stream_consumers=2,
        stream_offset_lag=1_250,
        stream_offset_lag_max=1_000,
        stream_publishers=3,
        stream_errored=0,
    )


def record_until_killed(
    root: Path,
    session_id: str,
    workers: int = 2,
    tick_seconds: float = 0.05,
    limit_seconds: float = 60.0,
) -> None:
    """Record one synthetic second every ``tick_seconds`` until killed (or the limit).

    Prints ``tick N MONOTONIC`` after each second is handed to the recorder, so the test
    knows what was recorded when.
    """
    from flowdeck.engine.recording.recorder import Recorder

    recorder = Recorder(root, SPEC, session_id=session_id, flush_seconds=0.2)
    start = time.time()
    recorder.start(start)
    synthetic = [SyntheticWorker(w) for w in range(workers)]
    deadline = time.monotonic() + limit_seconds
    second = 0
    while time.monotonic() < deadline:
        second += 1
        for worker in synthetic:
            recorder.snapshot(worker.snapshot(start + second, with_latency=second % 2 == 0))
        recorder.broker(broker_sample(start + second))
        print(f"tick {second} {time.monotonic()}", flush=True)
        time.sleep(tick_seconds)
    recorder.close("completed", {}, time.time())


if __name__ == "__main__":
    record_until_killed(Path(sys.argv[1]), sys.argv[2])
