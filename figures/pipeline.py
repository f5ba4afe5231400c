"""Where a run's messages are now: the pipeline from the clients' sends to the acks.

A message the clients sent is, at any moment, in one of these places::

    sent by the clients
      → waiting before the queues   sent, not yet taken in by the broker: in socket buffers
                                    and in connection and channel processes held by credit
                                    flow (the difference of the clients' count and the
                                    run's channels' publish count)
      → taken in, not yet ready     through the channel, not yet a ready message: on its
                                    way into the queue process (a quorum queue's Raft log
                                    under load); what the channels took in less what they
                                    delivered and what is ready
      → in the queues (ready)       ready, not yet delivered
      → delivered, unacked          at a consumer, not yet acknowledged
      → acked

and, beside it, what is not yet confirmed (the broker's count for the run's channels, the
clients' pending confirms). Each place's messages over the rate they leave it at is the
wait it explains: 8,460 messages before the queues at the broker's 6,300 msg/s are about
1.3 s of every message's latency, with queue depth 0 (the overloaded mirrored run of the
issue on flow control). Pure: a broker poll's row (``engine.recording.rows.broker_row``,
as ``figures.run`` carries it with ``before_queues``) in, figures out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Below this many messages a place is not named as where messages wait.
WAIT_MIN = 100


@dataclass(frozen=True, slots=True)
class Place:
    """One place in the pipeline: its messages now and the rate they leave it at (msg/s;
    None: not known), and the seconds of latency that explains."""

    name: str
    messages: float | None
    leaves_at: float | None

    @property
    def wait_s(self) -> float | None:
        if self.messages is None or not self.leaves_at:
            return None
        return self.messages / self.leaves_at


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The run's messages by place at one broker poll (``at``: unix seconds of its
    figures), and the credit flow that holds them."""

    at: float
    places: tuple[Place, ...]
    #: The broker's count of the run's messages not yet confirmed, and the clients'.
    unconfirmed: int | None
    pending_confirms: int | None
    #: The run's publishers the broker lists, of them in credit flow; the vhost's
    #: connections and channels in flow.
    publishers: int | None
    publishers_in_flow: int | None
    connections_flow: int | None
    channels_flow: int | None

    def place(self, name: str) -> Place:
        return next(p for p in self.places if p.name == name)

    def where(self) -> str:
        """Where most of the latency waits, in one line ("" when nothing waits)."""
        waiting = [p for p in self.places if (p.messages or 0) >= WAIT_MIN]
        if not waiting:
            return "nothing waits: every place holds fewer than 100 messages"
        worst = max(waiting, key=lambda p: (p.wait_s or 0.0, p.messages or 0.0))
        wait = ""
        if worst.wait_s is not None and worst.leaves_at:
            wait = f" ≈ {worst.wait_s:.1f} s at {worst.leaves_at:,.0f} msg/s"
        flow = ""
        if worst.name == BEFORE_QUEUES and self.publishers_in_flow:
            flow = (
                f" ({self.publishers_in_flow} of {self.publishers} publishers in credit flow)"
                if self.publishers
                else f" ({self.publishers_in_flow} publishers in credit flow)"
            )
        return f"most messages wait {worst.name}: {worst.messages:,.0f}{wait}{flow}"


BEFORE_QUEUES = "before the queues"
ENQUEUING = "taken in, not yet ready"
IN_QUEUES = "in the queues (ready)"
AT_CONSUMERS = "at the consumers (unacked)"


def pipeline_of(poll: Mapping[str, Any], pending_confirms: int | None = None) -> Pipeline:
    """The pipeline at a broker poll (its row, with ``before_queues`` as ``figures.run``
    adds it); ``pending_confirms``: the clients' count then, when known."""
    accept = _float(poll.get("run_accept_rate"))
    deliver = _float(poll.get("run_deliver_rate")) or _float(poll.get("deliver_rate"))
    ack = _float(poll.get("run_ack_rate")) or _float(poll.get("ack_rate"))
    unacked = poll.get("run_unacked")
    if unacked is None:
        unacked = poll.get("queue_unacked")
    ready = _float(poll.get("queue_ready"))
    accepted, delivered = poll.get("run_accepted"), poll.get("run_delivered")
    inside = None
    if poll.get("before_queues") is not None and accepted is not None and delivered is not None:
        inside = max(0.0, float(accepted) - float(delivered) - (ready or 0.0))
    places = (
        Place(BEFORE_QUEUES, _float(poll.get("before_queues")), accept),
        Place(ENQUEUING, inside, deliver),
        Place(IN_QUEUES, ready, deliver),
        Place(AT_CONSUMERS, _float(unacked), ack),
    )
    at = float(poll["t_us"]) / 1e6 - float(poll.get("age_s") or 0.0)
    return Pipeline(
        at=at,
        places=places,
        unconfirmed=poll.get("run_unconfirmed"),
        pending_confirms=pending_confirms,
        publishers=poll.get("run_publishers"),
        publishers_in_flow=poll.get("run_publishers_flow"),
        connections_flow=poll.get("connections_flow"),
        channels_flow=poll.get("channels_flow"),
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
