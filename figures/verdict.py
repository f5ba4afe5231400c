"""Judging a phase: what state the broker and the clients were in, in the words of fixed rules.

The thresholds are constants here, quoted by :func:`rules` in every report, in the cockpit's
help and in ``docs/reports.md``, so a reader can check each verdict by hand against the
figures it names. The rules know the overload regime: a phase that drains a backlog left by
an earlier one, a phase too short to judge, publishers held by the broker's credit flow and
a phase paused throughout are states of their own, never mistaken for a setting's capacity.

In the order :func:`judge` tries them:

1. **paused**: publishers were paused throughout (an alarm still makes it overloaded).
2. **too short**: fewer than :data:`MIN_SECONDS` seconds of figures; not judged further.
3. **draining a backlog**: consumers took more than the phase brought in (consumed above
   :data:`CATCH_UP_SHARE` of what the broker took, per copy of a fanned-out message, while
   the queues did not grow), or
   queue depth began at a backlog (at least :data:`BACKLOG_SECONDS` seconds of the consume
   rate) and fell over the phase's recent window. Its latency is the backlog's wait and its
   throughput the backlog's, neither the setting's: never a candidate.
4. **overloaded**: a memory or disk alarm; queue depth ends above where it began and grows
   faster than max(:data:`DEPTH_GROWTH_MIN` msg/s, :data:`DEPTH_GROWTH_SHARE` of the
   publish rate); or consumers take less than :data:`CONSUME_KEEPS_UP` of what the broker
   took (confirmed with publisher confirms, else published), or leave behind at least
   :data:`BACKLOG_SECONDS` of their rate of it (and :data:`BACKLOG_MIN` messages): the
   backlog grows wherever it waits, in the queues or before them.
5. **throttled by credit flow**: the run's own publishers were in credit flow for at least
   :data:`FLOW_SHARE` of the phase's seconds: the broker held them back and messages
   waited before the queues.
6. **back-pressured**: a connection blocked by flow control (connection.blocked); publishers below
   :data:`TARGET_REACHED` of their target (or no target at all: as fast as confirms and
   flow control allow); pending confirms averaging :data:`WINDOW_FULL` or more of the
   in-flight window.
7. **catching up**: publishers sent above :data:`CATCH_UP_SHARE` of their target (the rate
   schedule making up for a stall or a pause): the figures are a catch-up's.
8. **sustainable**: none of the above.

``drain`` is not a judgement: the report and the cockpit give it to the seconds after
publishing stopped at the run's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

#: Queue depth "grows" when its slope exceeds this share of the publish rate...
DEPTH_GROWTH_SHARE = 0.02
#: ...and at least this many messages per second, and ends above where it started.
DEPTH_GROWTH_MIN = 1.0
#: Consumers "keep up" when they take at least this share of what the broker took.
CONSUME_KEEPS_UP = 0.95
#: Publishers are "held" when they reach less than this share of their target rate...
TARGET_REACHED = 0.95
#: ...or their pending confirms average at least this share of the in-flight window.
WINDOW_FULL = 0.90
#: Above this share of what came in (or of the target), consumers (or publishers) are
#: catching up on a backlog: above a second's jitter, below any real catch-up.
CATCH_UP_SHARE = 1.05
#: A phase needs this many seconds of figures to be judged at all.
MIN_SECONDS = 5
#: Queue depth at a phase's start is a backlog when it holds this many seconds of the
#: phase's consume rate (and at least :data:`BACKLOG_MIN` messages).
BACKLOG_SECONDS = 2.0
BACKLOG_MIN = 100.0
#: Depth "falls" when its recent slope is below minus this share of the consume rate (and
#: at least :data:`DEPTH_GROWTH_MIN` msg/s).
DEPTH_FALL_SHARE = 0.02
#: Throttled by credit flow: own publishers in flow for at least this share of the seconds.
FLOW_SHARE = 0.5


class Verdict(StrEnum):
    SUSTAINABLE = "sustainable"
    BACK_PRESSURED = "back-pressured"
    THROTTLED = "throttled by credit flow"
    OVERLOADED = "overloaded"
    DRAINING = "draining a backlog"
    CATCHING_UP = "catching up"
    TOO_SHORT = "too short to judge"
    #: Not a judgement: the consumers' drain after publishing stopped, which has no target
    #: and no load to judge. :func:`judge` never returns it; the figures give it to the
    #: drain phase.
    DRAIN = "drain"
    #: Not a judgement either: publishers were paused throughout the phase, so there is no
    #: load to judge (an alarm still makes it overloaded).
    PAUSED = "paused"

    @property
    def judged_capacity(self) -> bool:
        """Whether a phase in this state says what its setting can carry: a sweep's
        candidates come only from these."""
        return self in (Verdict.SUSTAINABLE, Verdict.BACK_PRESSURED, Verdict.THROTTLED)

    @property
    def inconclusive(self) -> bool:
        """Whether a phase in this state says nothing of its setting either way: its
        figures are a backlog's (draining it, catching up) or too few. The autopilot takes
        such a step again once the queues are empty."""
        return self in (Verdict.DRAINING, Verdict.CATCHING_UP, Verdict.TOO_SHORT)


@dataclass(frozen=True, slots=True)
class PhaseLoad:
    """What the verdict looks at, per phase (rates in msg/s, depth slopes in msg/s)."""

    publish_rate: float
    consume_rate: float
    target_rate: float | None  # None: no rate limit
    pending_confirms_mean: float
    inflight: int  # per publisher, 0 = no window
    publishers: int
    blocked_s: float
    alarm_s: float
    depth_start: float | None
    depth_end: float | None
    depth_slope: float | None
    #: The publish mean over the seconds not paused: what the target (taken over the same
    #: seconds) is compared with. None: no second was paused, the same as ``publish_rate``.
    publish_rate_unpaused: float | None = None
    #: The confirm mean, with publisher confirms on: what the broker took. Consumers keep up
    #: when they take what the broker took; the rest of the publish rate is messages still
    #: in flight (a widening in-flight window), not a backlog. None or 0: compare with publish.
    confirm_rate: float | None = None
    #: The phase's seconds, and those in which publishing was paused for all or part of
    #: the second. 0 and 0 (the default): not known, judged as a phase that published.
    seconds: int = 0
    paused_s: int = 0
    #: The depth's least-squares slope over the phase's recent window (``figures.trend``):
    #: which way the queues go now. None: not known (fewer than two polls).
    depth_recent_slope: float | None = None
    #: How many times each published message is consumed (a fanout to 3 queues: 3).
    fan_out: int = 1
    #: Seconds in which the run's own publishers were in credit flow (the broker's
    #: connection or channel state ``flow``).
    flow_s: float = 0.0
    #: Messages the clients had sent and the broker had not yet taken in, on average over
    #: the phase's polls (in socket buffers and processes held by credit flow), and the
    #: broker's accept rate: their wait is about the one over the other. None: not known.
    before_queues: float | None = None
    accept_rate: float | None = None
    #: The phase's messages (its client rows'): published, confirmed and consumed in it.
    #: Balance is judged on these over the phase's seconds, one span for both sides; the
    #: ``*_rate`` means divide by each side's own active time, which for consumers that
    #: started at the phase's end is a fraction of a second (a rate of thousands from a
    #: handful of messages). None: not known, the means are compared.
    published: int | None = None
    confirmed: int | None = None
    consumed: int | None = None

    def waiting(self) -> str:
        """Where messages waited before the queues, in words ("" when none did)."""
        if not self.before_queues or self.before_queues < DEPTH_GROWTH_MIN:
            return ""
        wait = ""
        if self.accept_rate:
            wait = f" (≈ {self.before_queues / self.accept_rate:.1f} s at the broker's "
            wait += f"{self.accept_rate:.0f} msg/s)"
        return f"{self.before_queues:.0f} messages waited before the queues{wait}"

    @property
    def paused_throughout(self) -> bool:
        return self.seconds > 0 and self.paused_s >= self.seconds

    @property
    def taken(self) -> tuple[float, str]:
        """What the broker took in (msg/s) and the word for it, over the phase's seconds:
        the same span as :attr:`consumed_per_copy`, so the two compare."""
        if self.confirm_rate:
            count, rate, what = self.confirmed, self.confirm_rate, "confirmed"
        else:
            count, rate, what = self.published, self.publish_rate, "published"
        return (self._per_second(count) if count is not None else rate), what

    @property
    def consumed_per_copy(self) -> float:
        """Consumed (msg/s over the phase's seconds) per copy of a fanned-out message."""
        if self.consumed is not None:
            return self._per_second(self.consumed) / max(1, self.fan_out)
        return self.consume_rate / max(1, self.fan_out)

    @property
    def left_behind(self) -> float | None:
        """Messages the broker took in the phase that its consumers did not take in it (per
        copy of a fanned-out message), from the phase's counts; None when not known. What
        is still on its way at the phase's end is in it: its growth over the phase is the
        rate times how much the end-to-end wait grew."""
        count = self.confirmed if self.confirm_rate else self.published
        if count is None or self.consumed is None:
            return None
        return count - self.consumed / max(1, self.fan_out)

    def balance_words(self, *, more: bool = False) -> str:
        """What consumers took against what the broker took (``more``: said as more than
        it), in the phase's message counts when known (so no rate is quoted beside the
        table's msg/s, which divides by each side's active time), else in msg/s."""
        taken, what = self.taken
        count = self.confirmed if self.confirm_rate else self.published
        if self.consumed is not None and count is not None:
            consumed = self.consumed / max(1, self.fan_out)
            if more:
                return (
                    f"consumers took {consumed:,.0f} messages, more than the {count:,} {what} "
                    f"in its {self.seconds} s"
                )
            return f"consumers took {consumed:,.0f} of the {count:,} messages {what} in its " + (
                f"{self.seconds} s"
            )
        if more:
            return (
                f"consumers took {self.consumed_per_copy:.1f} msg/s, more than the {taken:.1f} "
                f"msg/s {what}"
            )
        return f"consumers took {self.consumed_per_copy:.1f} of {taken:.1f} msg/s {what}"

    def _per_second(self, count: int) -> float:
        return count / self.seconds if self.seconds > 0 else 0.0


def _depth_words(load: PhaseLoad) -> str:
    if load.depth_start is None or load.depth_end is None:
        return "depth not known"
    return f"queue depth {load.depth_start:.0f} → {load.depth_end:.0f}"


def draining(load: PhaseLoad) -> str | None:
    """Why the phase drains a backlog (rule 3), or None."""
    taken, _ = load.taken
    consumed = load.consumed_per_copy
    # A queue that grew over the phase was not drained, whatever its consume mean says (a
    # phase whose consumers started at its end has a mean over a fraction of a second).
    grew = load.depth_slope is not None and load.depth_slope > max(
        DEPTH_GROWTH_MIN, DEPTH_GROWTH_SHARE * load.publish_rate
    )
    if (
        not grew
        and taken > 0
        and consumed > CATCH_UP_SHARE * taken
        and consumed - taken >= DEPTH_GROWTH_MIN
    ):
        return (
            f"{load.balance_words(more=True)} (> {CATCH_UP_SHARE:.0%}): a backlog "
            f"from before was being taken; {_depth_words(load)}"
        )
    start, recent_slope = load.depth_start, load.depth_recent_slope
    if start is None or recent_slope is None:
        return None
    backlog = max(BACKLOG_MIN, BACKLOG_SECONDS * load.consume_rate)
    falling = recent_slope < -max(DEPTH_GROWTH_MIN, DEPTH_FALL_SHARE * load.consume_rate)
    if start >= backlog and falling:
        return (
            f"{_depth_words(load)}, falling {-recent_slope:.1f} msg/s at the end: a backlog "
            f"of {start:.0f} messages (≥ {BACKLOG_SECONDS:g} s of the {load.consume_rate:.1f} "
            "msg/s consumed) was draining"
        )
    return None


def judge(load: PhaseLoad) -> tuple[Verdict, str]:
    """The phase's verdict and the reason, in the words of the rules above."""
    alarm = f"memory or disk alarm for {load.alarm_s:.0f} s" if load.alarm_s > 0 else ""
    if load.paused_throughout:
        consumed = f"consumers took {load.consume_rate:.1f} msg/s"
        if load.depth_start is not None and load.depth_end is not None:
            consumed += f", {_depth_words(load)}"
        if alarm:
            return Verdict.OVERLOADED, f"{alarm}; publishers paused throughout"
        return Verdict.PAUSED, f"publishers paused throughout: no load to judge; {consumed}"
    if 0 < load.seconds < MIN_SECONDS:
        return Verdict.TOO_SHORT, (
            f"{load.seconds} s of figures, fewer than the {MIN_SECONDS} s a verdict needs"
        )
    drain = draining(load)
    if drain is not None:
        return Verdict.DRAINING, drain

    overloaded: list[str] = [alarm] if alarm else []
    if (
        load.depth_slope is not None
        and load.depth_start is not None
        and load.depth_end is not None
        and load.depth_end > load.depth_start
        and load.depth_slope > max(DEPTH_GROWTH_MIN, DEPTH_GROWTH_SHARE * load.publish_rate)
    ):
        overloaded.append(f"queue depth growing {load.depth_slope:.1f} msg/s")
    taken, _ = load.taken
    left = load.left_behind
    if taken > 0 and load.consumed_per_copy < CONSUME_KEEPS_UP * taken:
        overloaded.append(f"{load.balance_words()} (< {CONSUME_KEEPS_UP:.0%})")
    elif (
        left is not None
        and load.consumed_per_copy > 0
        and left >= max(BACKLOG_MIN, BACKLOG_SECONDS * load.consumed_per_copy)
    ):
        # Within the share, but over a long phase the shortfall adds up: the seed's mirrored
        # queues without confirms took 96 % of what was sent for 90 s, the 14,000 left
        # behind waiting before the queues (empty) and e2e p99 climbing to 3.6 s.
        overloaded.append(
            f"{load.balance_words()}: {left:,.0f} left behind, "
            f"{left / load.consumed_per_copy:.1f} s of the consume rate "
            f"(≥ {BACKLOG_SECONDS:g} s)"
        )
    flow = ""
    if load.flow_s > 0:
        flow = f"publishers in credit flow for {load.flow_s:.0f} s"
    waiting = load.waiting()
    if overloaded:
        overloaded += [part for part in (flow, waiting) if part]
        return Verdict.OVERLOADED, "; ".join(overloaded)
    if load.seconds > 0 and load.flow_s >= FLOW_SHARE * load.seconds:
        held_back = waiting or "messages waited before the queues"
        return Verdict.THROTTLED, (
            f"{flow} of {load.seconds} (≥ {FLOW_SHARE:.0%}): the broker held them back; "
            f"{held_back}; {_depth_words(load)}"
        )

    held: list[str] = []
    if load.blocked_s > 0:
        held.append(f"connections blocked by flow control for {load.blocked_s:.0f} s")
    reached = load.publish_rate
    if load.publish_rate_unpaused is not None:
        reached = load.publish_rate_unpaused
    if load.target_rate is not None and load.target_rate > 0:
        if reached < TARGET_REACHED * load.target_rate:
            held.append(
                f"publishers reach {reached:.1f} of the {load.target_rate:.1f} msg/s "
                f"target (< {TARGET_REACHED:.0%})"
            )
    elif load.publish_rate > 0:
        held.append("no target rate: publishers go as fast as confirms and flow control allow")
    window = load.inflight * load.publishers
    if window > 0 and load.pending_confirms_mean >= WINDOW_FULL * window:
        held.append(
            f"pending confirms {load.pending_confirms_mean:.0f} fill the in-flight window "
            f"{window} (≥ {WINDOW_FULL:.0%})"
        )
    if flow:
        held.append(flow)
    if held:
        return Verdict.BACK_PRESSURED, "; ".join(held) + "; depth flat"
    if load.target_rate and reached > CATCH_UP_SHARE * load.target_rate:
        return Verdict.CATCHING_UP, (
            f"publishers sent {reached:.1f} msg/s, above the {load.target_rate:.1f} msg/s "
            f"target (> {CATCH_UP_SHARE:.0%}): the rate schedule catching up after a stall"
        )
    return Verdict.SUSTAINABLE, "consumers keep up, depth flat, target reached"


def rules() -> tuple[str, ...]:
    """The verdict rules in words, with the constants they use: what every report, the
    cockpit's help and the docs quote."""
    return (
        "paused: publishers paused throughout the phase (an alarm still makes it "
        "overloaded); not judged, never a sweep row",
        f"too short to judge: fewer than {MIN_SECONDS} s of figures",
        f"draining a backlog: consumers took more than {CATCH_UP_SHARE:.0%} of what the broker "
        "took in the phase while the queues did not grow, or queue depth began at a backlog "
        f"(≥ {BACKLOG_SECONDS:g} s of the consume rate and ≥ {BACKLOG_MIN:.0f} messages) and "
        f"fell faster than max({DEPTH_GROWTH_MIN:g} msg/s, {DEPTH_FALL_SHARE:.0%} of the "
        "consume rate) over "
        "the phase's last 15 s; its latency and throughput are the backlog's, never a "
        "candidate",
        f"overloaded: a memory or disk alarm; or queue depth ends higher than it began and "
        f"grows faster than max({DEPTH_GROWTH_MIN:g} msg/s, {DEPTH_GROWTH_SHARE:.0%} of the "
        f"publish rate); or consumers take less than {CONSUME_KEEPS_UP:.0%} of what the "
        "broker took (the confirm rate with publisher confirms, else the publish rate), or "
        f"leave ≥ {BACKLOG_SECONDS:g} s of their rate of it behind (≥ {BACKLOG_MIN:.0f} "
        "messages: a backlog growing in the queues or before them)",
        f"throttled by credit flow: the run's own publishers in credit flow for ≥ "
        f"{FLOW_SHARE:.0%} of the phase's seconds (messages waited before the queues)",
        f"back-pressured: a connection blocked by flow control; or publishers below "
        f"{TARGET_REACHED:.0%} of their target (or no target at all); or pending confirms "
        f"averaging ≥ {WINDOW_FULL:.0%} of the in-flight window (limit × publishers)",
        f"catching up: publishers above {CATCH_UP_SHARE:.0%} of their target (the rate "
        "schedule making up for a stall)",
        "sustainable: none of the above (consumers keep up, depth flat, target reached)",
        "drain (not a verdict): the seconds after publishing stopped at the run's end",
    )
