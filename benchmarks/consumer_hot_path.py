"""CPU per delivery of a consumer's hot path alone: ``ConsumerChannel.on_deliver`` with no
work time and nothing rejected (what every flowdeck run without them does per message),
fed in-process with flowdeck bodies, no broker and no socket.

    .venv/bin/python benchmarks/consumer_hot_path.py --deliveries 200000 --repeats 7

A/B: run it from two trees (each with the tree first on ``sys.path``) in turns; the
minimum of the repeats is the figure least touched by a busy machine. Bounded: ``--repeats``
passes over ``--deliveries`` prebuilt bodies.
"""

from __future__ import annotations

import argparse
import statistics
import time

from flowdeck.engine.amqp.frames import BODY_FIELDS
from flowdeck.engine.consumer import Consumer, ConsumerChannel, ConsumerTally
from flowdeck.engine.samples import LatencySamples


class _Channel:
    """What a consuming channel's listener uses of its channel: an id and a write."""

    id = 1
    listener: object = None

    def write(self, data: bytes | bytearray) -> None:
        pass


def one_pass(deliveries: int, size: int) -> float:
    """µs of CPU per delivery over one pass (acks every 100, flushed every 1,000 reads)."""
    consumer = Consumer(
        consumer_id=0,
        connection=None,  # type: ignore[arg-type]  # not used on the delivery path
        queue="q",
        prefetch=1000,
        ack_every=100,
        auto_ack=False,
        arguments=None,
        tally=ConsumerTally({}),
        latency=LatencySamples(),
        run_start_ns=0,
    )
    channel = ConsumerChannel(consumer, _Channel())  # type: ignore[arg-type]
    now = time.time_ns()
    bodies = []
    for i in range(deliveries):
        body = bytearray(size)
        BODY_FIELDS.pack_into(body, 0, i % 4, i, now, now)
        bodies.append(body)
    deliver = channel.on_deliver
    started = time.process_time()
    for i, body in enumerate(bodies):
        deliver(i + 1, False, body, 0, size)
        if i % 1000 == 999:
            channel.on_read_done()
    return (time.process_time() - started) / deliveries * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    if not (1_000 <= args.deliveries <= 2_000_000 and 1 <= args.repeats <= 50):
        parser.error("--deliveries 1,000..2,000,000 and --repeats 1..50")
    figures = [one_pass(args.deliveries, args.size) for _ in range(args.repeats)]
    print(
        f"on_deliver: {min(figures):.3f} µs CPU per delivery (min of {args.repeats}), "
        f"median {statistics.median(figures):.3f}"
    )


if __name__ == "__main__":
    main()
