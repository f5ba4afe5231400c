"""A publisher sends nothing before the run starts it: reads on its link, a new rate or a
new window while its worker waits for the run's ``start_at`` must not publish early (a
message older than the run's start is not the run's to its consumers, and the run counted
it lost)."""

from __future__ import annotations

import asyncio
import time

from flowdeck.engine.client_base import PacedPublisher
from flowdeck.engine.samples import LatencySamples


class Recorded(PacedPublisher):
    """A publisher whose link takes every write, noting the send times."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(
            publisher_id=1,
            loop=loop,
            confirms=True,
            inflight=100,
            rate=1000.0,
            first_sequence=0,
            confirm_latency=LatencySamples(),
        )
        self.sent: list[int] = []

    def _write(self, count: int, sequence: int, now: int, intended: list[int]) -> None:
        self.sent.extend([now] * count)


async def test_nothing_is_sent_before_start_whatever_calls_pump() -> None:
    publisher = Recorded(asyncio.get_running_loop())
    await asyncio.sleep(0.05)  # 50 messages' worth of the rate since it was made
    publisher.on_read_done()
    publisher.set_rate(2000.0)
    publisher.set_inflight(200)
    publisher.resume()
    await asyncio.sleep(0.02)
    assert publisher.sent == [] and publisher.published == 0

    started = time.time_ns()
    publisher.start()
    await asyncio.sleep(0.05)
    publisher.stop()
    assert publisher.sent, "nothing sent after start"
    assert min(publisher.sent) >= started
