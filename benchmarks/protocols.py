"""The hot path of each wire protocol at full speed: msg/s and client CPU per message.

One publisher (confirms, in-flight 1000) and one consumer (prefetch 1000; the stream
protocol's counts chunks) in one client process, 1 kB persistent messages, against one
private RabbitMQ node with the stream and AMQP 1.0 plugins, each set-up in turn:

* AMQP 0.9.1 to a quorum queue (acks every 100, multiple flag)
* AMQP 1.0 to a quorum queue (unsettled sends, each delivery accepted and settled)
* AMQP 0.9.1 to a stream queue
* the stream protocol to a stream queue
* the stream protocol with sub-entries of 100 messages

Each runs flowdeck's worker runtime exactly as a run uses it, for ``--seconds``; figures are
taken over the steady part (after a warm-up second) from the process's CPU time
(``time.process_time``) and the messages consumed, with the broker's CPU per message over
the same seconds beside them, so it is clear which side is the limit.

    .venv/bin/python benchmarks/protocols.py --runs 3 --seconds 10

Bounded: each set-up lasts ``--seconds`` plus a few seconds of set-up and drain; queues are
unique and deleted afterwards; the node is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

from benchlib import cpu_seconds, load_average, private_node, spread

from flowdeck.collectors import LocalBroker
from flowdeck.engine import topology
from flowdeck.engine.commands import Stop, WorkerAssignment, WorkerCommand, WorkerMessage
from flowdeck.engine.snapshot import ClientSnapshot
from flowdeck.engine.spec import RunSpec
from flowdeck.engine.worker import run_worker

WARM_UP = 2.0

#: name -> the spec fields that make the set-up.
SETUPS: dict[str, dict[str, Any]] = {
    "AMQP 0.9.1, quorum": {"protocol": "amqp0.9.1", "queue_type": "quorum", "ack_every": 100},
    "AMQP 1.0, quorum": {"protocol": "amqp1.0", "queue_type": "quorum"},
    "AMQP 0.9.1, stream": {
        "protocol": "amqp0.9.1",
        "queue_type": "stream",
        "ack_every": 100,
        "stream_offset": "next",
    },
    "stream protocol": {"protocol": "stream", "queue_type": "stream", "stream_offset": "next"},
    "stream protocol, sub-entries of 100": {
        "protocol": "stream",
        "queue_type": "stream",
        "stream_offset": "next",
        "sub_entry_size": 100,
    },
}


@dataclass(frozen=True)
class Figure:
    rate: float  # consumed msg/s
    cpu_us: float  # client CPU µs per message (publish + consume)
    broker_us: float  # the broker's CPU µs per message, same seconds


async def one(node: LocalBroker, fields: dict[str, Any], seconds: float) -> Figure:
    name = f"flowdeck-bench-{uuid.uuid4().hex[:8]}"
    spec = RunSpec(
        uri=node.uri,
        queue_pattern=name,
        publishers=1,
        consumers=1,
        rate=0,
        message_size=1000,
        inflight=1000,
        prefetch=1000,
        duration=seconds + 30,
        workers=0,
        **fields,
    )
    declared = await topology.declare(spec, node.uri)
    marks: list[tuple[float, float, int, float]] = []
    broker = node.beam_pid()

    def emit(message: WorkerMessage) -> None:
        if isinstance(message, ClientSnapshot):
            consumed = message.counters.consumed
            marks.append((time.monotonic(), time.process_time(), consumed, cpu_seconds(broker)))

    commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()
    assignment = WorkerAssignment(
        0, 1, spec, time.time() + 0.2, (node.uri,), stream_port=node.stream_port or 5552
    )
    try:
        task = asyncio.create_task(run_worker(assignment, commands, emit))
        await asyncio.sleep(seconds + 0.5)
        commands.put_nowait(Stop(3.0))
        await task
    finally:
        await topology.undeclare((node.uri,), declared)
    steady = [m for m in marks if m[0] - marks[0][0] >= WARM_UP - 1][: int(seconds - WARM_UP)]
    first, last = steady[0], steady[-1]
    consumed = max(last[2] - first[2], 1)
    return Figure(
        rate=consumed / (last[0] - first[0]),
        cpu_us=(last[1] - first[1]) / consumed * 1e6,
        broker_us=(last[3] - first[3]) / consumed * 1e6,
    )


async def main(runs: int, seconds: float, only: list[str]) -> None:
    with private_node() as node:
        print(load_average(), flush=True)
        found: dict[str, list[Figure]] = {name: [] for name in SETUPS if not only or name in only}
        for run in range(1, runs + 1):
            for name in found:
                figure = await one(node, SETUPS[name], seconds)
                found[name].append(figure)
                print(
                    f"run {run} {name:<38} {figure.rate:>9,.0f} msg/s  client "
                    f"{figure.cpu_us:6.1f} µs/msg  broker {figure.broker_us:6.1f} µs/msg",
                    flush=True,
                )
        print(f"\nmedian (min-max) over {runs} run(s) of {seconds:g} s, {load_average()}")
        print(f"{'set-up':<38} {'msg/s':>22} {'client µs/msg':>22} {'broker µs/msg':>22}")
        for name, figures in found.items():
            rates = [f.rate for f in figures]
            print(
                f"{name:<38} {spread(rates, ',.0f'):>22} "
                f"{spread([f.cpu_us for f in figures]):>22} "
                f"{spread([f.broker_us for f in figures]):>22}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--only", action="append", default=[], help="a set-up's name")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.seconds, args.only))
