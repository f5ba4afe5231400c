"""Messages between the controller and its workers, and how clients are shared out.

The controller sends :class:`ApplyChange` and :class:`Stop`; a worker sends
:class:`ClientSnapshot` once a second, :class:`ChangeApplied` as soon as a change is in
force in that worker, :class:`WorkerEvent` for what happened (blocked, reconnect, error)
and one :class:`WorkerReport` when it has stopped. All are picklable dataclasses, so the
same objects travel through an in-process queue (zero workers) or a process pipe.

Clients are spread over workers by a fixed rule so no coordination is needed: worker
``w`` of ``n`` runs ``local_share(total, w, n)`` publishers, whose global ids are
``w, w + n, w + 2n, ...``; publisher ``p`` publishes to queue ``p % queues``, consumer
``c`` consumes from queue ``c % queues``. Changes to ``publishers`` or ``consumers``
carry the new *total*; each worker works out its own share.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowdeck.engine.change import Change
from flowdeck.engine.events import RunEvent
from flowdeck.engine.snapshot import ClientSnapshot, WorkerReport
from flowdeck.engine.spec import RunSpec


@dataclass(frozen=True, slots=True)
class WorkerAssignment:
    """What one worker runs: its index among ``workers`` and the run's spec.

    ``start_at`` is the run's common start (unix seconds), the origin of every
    publisher's rate schedule and of ``elapsed`` in snapshots.
    """

    worker: int
    workers: int
    spec: RunSpec
    start_at: float
    #: The broker's node URIs with the password (the spec's may come from elsewhere);
    #: clients spread over them round-robin.
    uris: tuple[str, ...]
    #: Per queue (by index), the position in ``uris`` of the node leading it, when the
    #: spec places consumers by their queue's leader (``consumer_node``); empty otherwise.
    queue_leaders: tuple[int, ...] = ()
    #: The run's tag, in every connection name (collectors/client_names.py), so the broker's
    #: lists tell this run's clients from any other's.
    run_tag: str = ""
    #: The port of the broker's stream protocol listener (protocol = stream), on each node.
    stream_port: int = 5552


@dataclass(frozen=True, slots=True)
class ApplyChange:
    change_id: int
    change: Change  # absolute; publishers/consumers carry the new total


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop publishing, let consumers drain for up to ``drain_seconds``, flush acks, close."""

    drain_seconds: float = 5.0


@dataclass(frozen=True, slots=True)
class ChangeApplied:
    """A change is in force in one worker. ``publishers`` and ``consumers`` are the clients
    this worker has connected once it applied the change: fewer than its share of the asked
    total when the broker would not take them all (out of sockets), so the controller
    records what was really opened, not what was asked."""

    change_id: int
    worker: int
    at: float  # unix seconds when the change was in force in this worker
    publishers: int | None = None
    consumers: int | None = None


@dataclass(frozen=True, slots=True)
class WorkerEvent:
    worker: int
    event: RunEvent


WorkerCommand = ApplyChange | Stop
WorkerMessage = ClientSnapshot | ChangeApplied | WorkerEvent | WorkerReport


def local_share(total: int, worker: int, workers: int) -> int:
    """How many of ``total`` clients worker ``worker`` of ``workers`` runs."""
    base, extra = divmod(total, workers)
    return base + (1 if worker < extra else 0)


def global_id(local_index: int, worker: int, workers: int) -> int:
    """Global id of a worker's ``local_index``-th publisher or consumer."""
    return local_index * workers + worker
