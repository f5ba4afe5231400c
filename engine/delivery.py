"""Where a run's messages went, when its consumers took far fewer than it published.

A run that publishes and consumes nothing must never end as a plain success: a PerfTest
line whose routing key the default exchange routes to no queue once gave ``published 801,
consumed 0`` and exit 0. At the end of a run with consumers whose consumers took less than
half of what it published, the broker is asked what waits in the run's queues, and one line
says where the rest went: came back unroutable (mandatory), routed to no queue (no binding
for the routing key, the default exchange and a key that names no queue), or waiting in the
queues while the consumers took none. A backlog the consumers were working through is not
such a run: what waits plus what was consumed accounts for what was published.

``flowdeck run`` then exits :data:`UNDELIVERED_EXIT`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flowdeck.engine.progress import DataSafety
    from flowdeck.engine.spec import RunSpec

__all__ = ["UNDELIVERED_EXIT", "needs_a_look", "where_messages_went"]

#: `flowdeck run`'s exit code when the run's consumers took far fewer messages than it
#: published and the rest did not wait in its queues (or the consumers took none at all).
UNDELIVERED_EXIT = 98


def needs_a_look(spec: RunSpec, safety: DataSafety) -> bool:
    """Whether the run consumed too little to end without saying where its messages went
    (then the messages left in its queues are worth reading)."""
    # Messages the consumers rejected for good or the broker dead-lettered were delivered.
    delivered = safety.consumed - safety.duplicates + safety.dead_lettered + safety.dropped
    return spec.consumers > 0 and safety.published > 0 and delivered < safety.published / 2


def where_messages_went(spec: RunSpec, safety: DataSafety, left: int | None) -> str:
    """One line saying where the messages went when the run's consumers took far fewer than
    it published ('' when they did not, or what they did not take waits in the run's
    queues as a backlog). ``left``: messages waiting in the run's queues after it (None:
    not known)."""
    if not needs_a_look(spec, safety):
        return ""
    published = safety.published
    delivered = safety.consumed - safety.duplicates
    waiting = left or 0
    short = published - delivered
    took = f"consumers took {delivered:,} of {published:,} published messages"
    if safety.returned and safety.returned >= short / 2:
        return (
            f"{took}: {safety.returned:,} came back unroutable (mandatory flag): "
            f"{_route(spec)} reaches no queue"
        )
    if delivered == 0 and waiting >= published / 2:
        return (
            f"{took}: {waiting:,} wait in the run's queues, so the {spec.consumers} "
            "consumer(s) consumed nothing (see the errors above)"
        )
    if delivered + waiting + safety.nacked >= published / 2:
        return ""  # a backlog (or messages the broker refused, counted as nacked)
    nowhere = published - delivered - waiting - safety.nacked - safety.returned
    where = "" if left is not None else " (the queues could not be read)"
    if not spec.exchange and spec.routing_key and spec.routing_key not in spec.queue_names:
        why = (
            f"the default exchange routes by queue name and no queue of the run is named "
            f"{spec.routing_key!r}: name the exchange to bind it on (--exchange), or drop "
            "the routing key"
        )
    else:
        why = f"{_route(spec)} routes them to none of the run's queues"
    return f"{took}: {nowhere:,} reached no queue of the run{where}: {why}"


def _route(spec: RunSpec) -> str:
    exchange = (
        f"exchange {spec.exchange!r} ({spec.exchange_type})"
        if spec.exchange
        else ("the default exchange")
    )
    key = spec.routing_key or "each queue's name"
    return f"{exchange} with routing key {key!r}" if spec.routing_key else f"{exchange} with {key}"
