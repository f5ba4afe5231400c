"""BrokerSample: what the broker says about itself, from either source.

The management API and Prometheus collectors both produce this model, so the screen, the
recorder and the reports never care which one answered. Every sample says how old its
figures are (the management API refreshes them every ``collect_statistics_interval``) and,
when the source did not answer well, that it is stale and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

SourceName = Literal["management", "prometheus"]


@dataclass(frozen=True, slots=True)
class NodeSample:
    """One broker node. Sizes in bytes; ``None`` where the source does not say.

    ``figures_at`` is when the node's own figures (memory, disk, descriptors) were computed
    when the source says so: RabbitMQ refreshes them on a clock of their own (every 5 s in
    3.10, whatever ``collect_statistics_interval`` is), so they can be older than the
    sample's queue and channel figures. Alarm flags are always as fresh as the sample.

    In a cluster every node is listed, a node that is down too (``running`` false, its
    figures ``None``); ``partitions`` names the nodes this one cannot see although they
    are up (a network partition), as RabbitMQ reports them.

    Quorum queues' Raft figures come from Prometheus only: ``raft_term_total`` sums the
    terms of the node's quorum queue members (it grows by one per leader election of any
    of them) and ``raft_commit_latency`` is their mean time to commit a log entry, seconds.

    Flow control on the node: its connections of the run's vhost by state (``running``;
    ``flow``, held by credit flow now or in the last 5 s; ``blocking`` and ``blocked``, held
    by a memory or disk alarm) and its channels (``running``, ``flow``: a channel has no
    blocking state). From the management API only, as of the last statistics the
    connections and channels emitted; ``None`` where the source does not say (Prometheus
    has no state metric, see docs/collectors.md).
    """

    name: str
    mem_used: int | None = None
    mem_limit: int | None = None
    mem_alarm: bool = False
    disk_free: int | None = None
    disk_free_limit: int | None = None
    disk_alarm: bool = False
    fd_used: int | None = None
    fd_total: int | None = None
    sockets_used: int | None = None
    sockets_total: int | None = None
    running: bool = True
    figures_at: float | None = None
    partitions: tuple[str, ...] = ()
    raft_term_total: int | None = None
    raft_commit_latency: float | None = None
    connections_running: int | None = None
    connections_flow: int | None = None
    connections_blocking: int | None = None
    connections_blocked: int | None = None
    channels_running: int | None = None
    channels_flow: int | None = None


@dataclass(frozen=True, slots=True)
class QueueSample:
    """One queue as the broker counts it; rates in msg/s.

    Where the queue lives in a cluster: ``leader`` is the node of a quorum or stream
    queue's leader, or of a classic queue's master (its only node when not mirrored);
    ``members`` every node holding a replica, the leader first (quorum members; a classic
    queue's master and mirrors); ``online`` the members that run now (quorum and stream
    queues say; for a classic queue the master and its mirrors that run); ``synchronised``
    the classic mirrors in sync with their master (messages survive the master's loss on
    those only). ``state`` is RabbitMQ's (``running``, ``down``, ``minority``, ...). Empty
    where the source does not say (Prometheus).
    """

    name: str
    vhost: str
    type: str
    ready: int
    unacked: int
    consumers: int
    publish_rate: float | None = None
    deliver_rate: float | None = None
    leader: str = ""
    members: tuple[str, ...] = ()
    online: tuple[str, ...] = ()
    synchronised: tuple[str, ...] = ()
    state: str = ""

    @property
    def depth(self) -> int:
        return self.ready + self.unacked

    @property
    def mirrors(self) -> tuple[str, ...]:
        """The members other than the leader (classic mirrors, quorum followers)."""
        return tuple(member for member in self.members if member != self.leader)


@dataclass(frozen=True, slots=True)
class BrokerSample:
    """One poll of one source.

    ``taken_at`` is when the poll finished (unix seconds); ``figures_at`` is when the broker
    computed the figures, so ``age`` tells the operator how old they are. A stale sample
    (``stale_reason`` set) keeps the last figures the source gave, so a panel can show them
    greyed out with the reason instead of as live numbers. Rates are msg/s, broker-wide.

    Flow control, summed over the nodes (each node's own in :class:`NodeSample`):
    ``connections_flow``, ``connections_blocked``, ``connections_blocking`` and
    ``channels_flow`` of ``channels``.

    The run's own clients, told by their connection names (collectors/client_names.py),
    from the management API: ``run_publishers`` of the run's publisher connections the
    broker lists, ``run_publishers_flow`` of them in credit-flow state ``flow``, and
    ``publishers_in_flow`` their publisher ids. And where the run's messages are on the
    broker's side, from the run's channels: ``run_accepted`` messages the broker took in
    from the run's publishers (``message_stats.publish``, summed over every publishing
    channel the collector has seen, closed ones at their last count), ``run_unconfirmed``
    of them not yet confirmed, ``run_delivered`` and ``run_acked`` to and by the run's
    consumers (``deliver_get``, ``ack``), ``run_unacked`` delivered and not yet acked; the
    ``*_rate`` figures are those counts' msg/s over the last two statistics intervals or
    more. None where the source does not say, or the collector was not told the run's tag.

    Stream figures, from the stream plugin's management (``/api/stream/*`` of the vhost;
    polled only for a run to stream queues or over the stream protocol, None otherwise and
    where the plugin does not answer): ``stream_connections`` the vhost's stream protocol
    connections; ``stream_consumers`` the stream protocol subscriptions to the run's
    streams and their ``stream_offset_lag`` (summed) and ``stream_offset_lag_max`` (the
    most held back one), in messages: the stream's last committed offset less the
    consumer's; ``stream_publishers`` the stream protocol publishers to the run's streams
    and ``stream_errored`` the messages the broker refused them (publish errors). RabbitMQ
    3.10 gives no segment count over HTTP or Prometheus (docs/collectors.md).
    """

    source: SourceName
    taken_at: float
    figures_at: float
    statistics_interval: float
    nodes: tuple[NodeSample, ...] = ()
    queues: tuple[QueueSample, ...] = ()
    publish_rate: float | None = None
    confirm_rate: float | None = None
    deliver_rate: float | None = None
    ack_rate: float | None = None
    redeliver_rate: float | None = None
    unconfirmed: int | None = None
    unacked: int | None = None
    connections: int | None = None
    connections_blocked: int | None = None
    connections_blocking: int | None = None
    connections_flow: int | None = None
    channels: int | None = None
    channels_flow: int | None = None
    run_publishers: int | None = None
    run_publishers_flow: int | None = None
    publishers_in_flow: tuple[int, ...] = ()
    run_accepted: int | None = None
    run_accept_rate: float | None = None
    run_unconfirmed: int | None = None
    run_delivered: int | None = None
    run_deliver_rate: float | None = None
    run_acked: int | None = None
    run_ack_rate: float | None = None
    run_unacked: int | None = None
    stream_connections: int | None = None
    stream_consumers: int | None = None
    stream_offset_lag: int | None = None
    stream_offset_lag_max: int | None = None
    stream_publishers: int | None = None
    stream_errored: int | None = None
    stale_reason: str = ""
    broker_version: str = ""
    erlang_version: str = ""

    @staticmethod
    def stale_since(
        last: BrokerSample | None,
        *,
        source: SourceName,
        statistics_interval: float,
        reason: str,
        now: float,
    ) -> BrokerSample:
        """What a poll that failed returns: the last figures (if any) marked stale, so a
        panel greys them out with ``reason`` instead of showing them as live."""
        if last is None:
            return BrokerSample(
                source=source,
                taken_at=now,
                figures_at=now,
                statistics_interval=statistics_interval,
                stale_reason=reason,
            )
        return replace(last, taken_at=now, stale_reason=reason)

    @property
    def stale(self) -> bool:
        return bool(self.stale_reason)

    @property
    def age(self) -> float:
        """Seconds between when the broker computed the figures and the poll."""
        return max(0.0, self.taken_at - self.figures_at)

    @property
    def nodes_down(self) -> tuple[str, ...]:
        """Names of the cluster's nodes the source lists as not running."""
        return tuple(node.name for node in self.nodes if not node.running)

    @property
    def partitioned(self) -> bool:
        """A node reports a network partition."""
        return any(node.partitions for node in self.nodes)

    @property
    def memory_alarm(self) -> bool:
        return any(n.mem_alarm for n in self.nodes)

    @property
    def disk_alarm(self) -> bool:
        return any(n.disk_alarm for n in self.nodes)

    @property
    def queue_ready(self) -> int:
        return sum(q.ready for q in self.queues)

    @property
    def queue_unacked(self) -> int:
        return sum(q.unacked for q in self.queues)

    @property
    def queue_depth(self) -> int:
        return sum(q.depth for q in self.queues)
