"""Clock-based pacing of one publisher: how many messages are due, and when each was meant
to go.

Message ``k`` after the pacer's origin is due at ``origin + k / rate``. The publisher asks
:meth:`Pacer.due` whenever it wakes up (a timer, an ack freeing the in-flight window) and
sends that many: the rate comes from the clock, not from how precisely the loop wakes —
asyncio sleeps below a millisecond are unreliable and uvloop returns from them at once.
The intended send time of each message stays on the schedule even when the publisher was
held back (in-flight window full, broker flow control), so latency measured from it shows
the time spent blocked. The schedule restarts from now when the rate or the in-flight
window changes or publishing resumes after a pause. A rate of 0 means as fast as the
window allows: every message is due, and its intended time is its actual send time.

After a stall (window full, broker flow control, an alarm) the messages owed are all due
at once: the publisher catches up in a burst above its rate. With ``catch_up`` off (what
PerfTest does), a debt of more than :data:`JITTER_S` of the rate is written off instead:
the schedule restarts from now and the skipped sends are counted in :attr:`Pacer.skipped`.
The intended-send latency stays honest either way: the next message sent carries the
intended time of the oldest one held back, so the whole stall shows as one sample.

Each schedule starts at its *phase* into the send interval, not at ``now``: publisher ``k``
sends at ``origin + (phase + n) / rate`` with ``phase = spread_phase(k)``. Publishers
started together (a run's start, a rate change, a resume) would otherwise all be due in
the same instant of every interval — 500 publishers at 2 msg/s, one burst of 500 messages
every 0.5 s that the worker's loop and the broker drain in series, latency made by the
load tool. PerfTest spreads its producers the same way, with a random start delay. The
intended time of each message is its own slot, so the latency measured from it stays the
time the message spent waiting, not the phase.
"""

from __future__ import annotations

NS_PER_S = 1_000_000_000
#: Upper bound on what ``due`` reports, so callers can size batches with it.
UNLIMITED = 1 << 62
#: Without catch-up, a debt of up to this many seconds of the rate is a timer's jitter and
#: is still sent; more is a stall, and is skipped.
JITTER_S = 0.1
#: The golden ratio's fractional part: successive multiples of it, taken modulo 1, fall
#: into the largest gap left by those before (any count of publishers, any worker's share).
_GOLDEN = 0.6180339887498949


def spread_phase(index: int) -> float:
    """Where in each send interval the ``index``-th publisher sends, as a fraction of the
    interval. Publishers 0..N-1 cover [0, 1) for any N with no gap wider than 1.9 / N, and
    publishers added later go into the widest gaps; a worker's share (every W-th index) is
    spread too."""
    return (index * _GOLDEN) % 1.0


class Pacer:
    __slots__ = (
        "_held_index",
        "_held_ns",
        "_interval_ns",
        "_origin_count",
        "_origin_ns",
        "catch_up",
        "phase",
        "rate",
        "sent",
        "skipped",
    )

    def __init__(
        self, rate: float, now_ns: int, *, catch_up: bool = True, phase: float = 0.0
    ) -> None:
        if not 0.0 <= phase < 1.0:
            raise ValueError(f"phase must be in [0, 1) of the send interval, got {phase}")
        self.rate = 0.0
        #: Fraction of the send interval each schedule starts after its ``now``.
        self.phase = phase
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
        """Change the rate (msg/s, 0 = unlimited); the new schedule starts at ``now_ns``
        plus the phase."""
        if rate < 0:
            raise ValueError(f"rate must be >= 0 msg/s, got {rate}")
        self.rate = rate
        self._interval_ns = NS_PER_S / rate if rate > 0 else 0.0
        self.restart(now_ns)

    def restart(self, now_ns: int) -> None:
        """Start the schedule afresh at ``now_ns`` plus the phase (after a pause: a pause is
        not a debt)."""
        self._origin_ns = now_ns + int(self.phase * self._interval_ns)
        self._origin_count = self.sent
        self._held_index = -1

    def due(self, now_ns: int) -> int:
        """Messages due by ``now_ns`` and not yet taken."""
        if self.rate <= 0:
            return UNLIMITED
        if now_ns < self._origin_ns:
            return 0  # the schedule starts at its phase, a little after it was (re)started
        scheduled = int((now_ns - self._origin_ns) * self.rate / NS_PER_S) + 1
        owed = max(0, self._origin_count + scheduled - self.sent)
        if not owed and now_ns >= self.intended_ns(self.sent):
            # Woken at the next message's intended time, which is rounded down to the
            # nanosecond (30 msg/s: 33,333,333 ns): the division above can put it a hair
            # later, and the publisher would sleep again and send it a timer tick late.
            owed = 1
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
