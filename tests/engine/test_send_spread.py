"""Many slow publishers started together send spread over the send interval, against the
real broker: not all in the same instant, which would make a burst the worker's loop and
the broker drain in series (latency made by flowdeck itself).

Judged from the send times the publishers recorded, as offsets into the interval, and from
the run's own latency figures; no wall-clock windows.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

import pytest

from flowdeck.engine import latency as hdr
from flowdeck.engine import topology
from flowdeck.engine.commands import Stop, WorkerAssignment, WorkerCommand, WorkerMessage
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.publisher import Publisher
from flowdeck.engine.snapshot import ClientSnapshot
from flowdeck.engine.spec import RunSpec
from flowdeck.engine.worker import _Worker

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

PUBLISHERS = 100
RATE = 10.0
INTERVAL_NS = 1e9 / RATE
SECONDS = 3.0


def recording(publisher: Publisher, sends: list[tuple[int, int]]) -> Callable[[int, int], None]:
    """``publisher._send`` that first notes, for each message it sends, when it sent and
    when the message was intended to go."""
    send, pacer = publisher._send, publisher.pacer

    def recorded(count: int, now: int) -> None:
        sends.extend((now, pacer.intended_ns(pacer.sent + k)) for k in range(count))
        send(count, now)

    return recorded


def busiest_tenth(offsets: list[float]) -> float:
    """Share of ``offsets`` (fractions of the interval) in its busiest tenth."""
    bins = [0] * 10
    for offset in offsets:
        bins[min(9, int(offset * 10))] += 1
    return max(bins) / len(offsets)


@pytest.mark.slow
async def test_publishers_started_together_send_spread_over_the_interval(
    shared_uri: str, unique_name: str
) -> None:
    spec = RunSpec(
        name="send-spread-test",
        uri=shared_uri,
        queue_pattern=f"{unique_name}-%d",
        queues=1,
        durable=False,
        publishers=PUBLISHERS,
        consumers=1,
        rate=RATE,
        persistent=False,
        confirms=True,
        inflight=100,
        prefetch=1000,
        ack_every=10,
        duration=SECONDS + 5,
        workers=0,
    )
    await topology.declare(spec, shared_uri)
    messages: list[WorkerMessage] = []
    start_at = time.time() + 2.0
    worker = _Worker(WorkerAssignment(0, 1, spec, start_at, (shared_uri,)), messages.append)
    commands: asyncio.Queue[WorkerCommand] = asyncio.Queue()
    task = asyncio.create_task(worker.run(commands))
    sends: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 30
        while len(worker.publishers) < PUBLISHERS:
            assert not task.done(), task.result()
            assert time.monotonic() < deadline, "the publishers did not connect in 30 s"
            await asyncio.sleep(0.01)
        assert not worker.publishing_started, "connecting took longer than the start delay"
        for publisher in worker.publishers:
            publisher._send = recording(publisher, sends)  # type: ignore[method-assign]
        await asyncio.sleep(start_at + SECONDS - time.time())
        commands.put_nowait(Stop(3.0))
        report = await asyncio.wait_for(task, 60)
    finally:
        if not task.done():
            task.cancel()
        await topology.delete_queues(shared_uri, spec.queue_names)

    origin = start_at * 1e9
    assert len(sends) >= PUBLISHERS * RATE * (SECONDS - 0.5)
    intended = [((i - origin) % INTERVAL_NS) / INTERVAL_NS for _, i in sends]
    actual = [((s - origin) % INTERVAL_NS) / INTERVAL_NS for s, _ in sends]
    # Evenly spread, a tenth of the interval holds a tenth of the sends; all in one instant,
    # one tenth would hold them all. The actual send times may run a few ms late.
    assert busiest_tenth(intended) <= 0.15, sorted(intended)[:: PUBLISHERS // 10]
    assert busiest_tenth(actual) <= 0.25, sorted(actual)[:: PUBLISHERS // 10]
    # The intended send time is each publisher's own slot: the latency measured from it is
    # about the latency from the actual send, not that plus the phase (half an interval on
    # average, 50 ms here).
    # Each message's latency from its intended time is its latency from its actual send
    # plus its lateness, so the two bases' means differ by the sends' mean lateness (a mean
    # of sums is the sum of the means, whatever the load; medians are not: a busy run read
    # 65 ms between the two bases' p50s for a median lateness of 23 ms). An intended time
    # other than the publisher's own slot (an interval's shared start, say) would add its
    # phase, half an interval on average (50 ms here), which the sends do not show.
    e2e_ms = {}
    for basis in SendBasis:
        histogram = hdr.merge(
            m.latency[(LatencyKind.END_TO_END, basis)]
            for m in messages
            if isinstance(m, ClientSnapshot) and (LatencyKind.END_TO_END, basis) in m.latency
        )
        assert histogram.get_total_count() == len(sends), basis
        e2e_ms[basis] = histogram.get_mean_value() / 1000
    late_ms = statistics.fmean((actual - intended) / 1e6 for actual, intended in sends)
    added = e2e_ms[SendBasis.INTENDED] - e2e_ms[SendBasis.ACTUAL]
    print(f"\nmean e2e {e2e_ms} ms, mean lateness {late_ms:.2f} ms")
    assert abs(added - late_ms) < 0.2 * INTERVAL_NS / 1e6, (e2e_ms, late_ms)
    assert report.counters.consumed == report.counters.published
