"""Clock-based pacing of one publisher: how many messages are due, and when each was meant
to go.

Message ``k`` after the pacer's origin is due at ``origin + k / rate``. The publisher asks
:meth:`Pacer.due` whenever it wakes up (a timer, an ack freeing the in-flight window) and
sends that many: the rate comes from the clock, not from how precisely the loop wakes —
asyncio sleeps below a millisecond are unreliable and uvloop returns from them at once.
The intended send time of each message stays on the schedule even when the publisher was
held back (in-flight window full, broker flow control), so latency measured from it shows
the time spent blocked. The schedule restarts from now when the rate changes or publishing
resumes after a pause. A rate of 0 means as fast as the window allows: every message is
due, and its intended time is its actual send time.

After a stall (window full, broker flow control, an alarm) the messages owed are all due
at once: the publisher catches up in a burst above its rate. With ``catch_up`` off (what
PerfTest does), a debt of more than :data:`JITTER_S` of the rate is written off instead:
the schedule restarts from now and the skipped sends are counted in :attr:`Pacer.skipped`.
The intended-send latency stays honest either way: the next message sent carries the
intended time of the oldest one held back, so the whole stall shows as one sample.
"""

from __future__ import annotations

NS_PER_S = 1_000_000_000
#: Upper bound on what ``due`` reports, so callers can size batches with it.
UNLIMITED = 1 << 62
#: Without catch-up, a debt of up to this many seconds of the rate is a timer's jitter and
#: is still sent; more is a stall, and is skipped.
JITTER_S = 0.1


class Pacer:
    __slots__ = (
        "_held_index",
        "_held_ns",
        "_interval_ns",
        "_origin_count",
        "_origin_ns",
        "catch_up",
        "rate",
        "sent",
        "skipped",
    )

    def __init__(self, rate: float, now_ns: int, *, catch_up: bool = True) -> None:
        self.rate = 0.0
        self.sent = 0
        self.catch_up = catch_up
        #: Sends written off after stalls (only without catch-up).
        self.skipped = 0
        #: The message that carries the oldest held-back intended time, and that time.
        self._held_index = -1
        self._held_ns = 0
        self._origin_ns = now_ns
        self._origin_count = 0
        self._interval_ns = 0.0
        self.set_rate(rate, now_ns)

    def set_rate(self, rate: float, now_ns: int) -> None:
        """Change the rate (msg/s, 0 = unlimited); the new schedule starts at ``now_ns``."""
        if rate < 0:
            raise ValueError(f"rate must be >= 0 msg/s, got {rate}")
        self.rate = rate
        self._interval_ns = NS_PER_S / rate if rate > 0 else 0.0
        self.restart(now_ns)

    def restart(self, now_ns: int) -> None:
        """Start the schedule afresh at ``now_ns`` (after a pause: a pause is not a debt)."""
        self._origin_ns = now_ns
        self._origin_count = self.sent
        self._held_index = -1

    def due(self, now_ns: int) -> int:
        """Messages due by ``now_ns`` and not yet taken."""
        if self.rate <= 0:
            return UNLIMITED
        scheduled = int((now_ns - self._origin_ns) * self.rate / NS_PER_S) + 1
        owed = max(0, self._origin_count + scheduled - self.sent)
        if self.catch_up or owed <= max(1.0, self.rate * JITTER_S):
            return owed
        if self._held_index != self.sent:  # the first write-off of this stall
            self._held_ns = self.intended_ns(self.sent)
            self._held_index = self.sent
        self.skipped += owed - 1
        self._origin_ns = now_ns
        self._origin_count = self.sent
        return 1

    def intended_ns(self, index: int) -> int:
        """Intended send time of the ``index``-th message (counting from 0 over the life of
        the pacer); only meaningful with a rate > 0.
        """
        if index == self._held_index:
            return self._held_ns
        return self._origin_ns + int((index - self._origin_count) * self._interval_ns)

    def next_due_ns(self) -> int:
        """When the next message not yet taken is due (now-ish when rate is 0)."""
        return self.intended_ns(self.sent)

    def take(self, count: int) -> None:
        self.sent += count
