"""RunSpec: one validated, immutable description of a load run.

A spec comes from a TOML file, a built-in preset or CLI flags; all three use the field
names of ``FIELDS`` below, which is also what drives validation, the CLI flags and the
TUI form. Scale a spec to a small machine with :meth:`RunSpec.scaled`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from flowdeck.collectors import redact
from flowdeck.engine.change import (
    Change,
    NodeFault,
    Setting,
    format_number,
    is_fault,
    parse_change,
    parse_fault,
)
from flowdeck.engine.credentials import broker_of
from flowdeck.engine.errors import SpecError, did_you_mean
from flowdeck.engine.settings import BY_FIELD, BY_SETTING, STEERABLE, Scope
from flowdeck.engine.snapshot import Settings
from flowdeck.engine.thresholds import parse_threshold
from flowdeck.engine.tls import tls_options

QueueType = Literal["classic", "quorum", "stream"]
ExchangeType = Literal["direct", "fanout", "topic", "headers"]
QueueArgValue = int | float | str | bool

QUEUE_TYPES: tuple[QueueType, ...] = ("classic", "quorum", "stream")
LeaderLocator = Literal["", "client-local", "balanced"]
LEADER_LOCATORS: tuple[LeaderLocator, ...] = ("", "client-local", "balanced")
ConsumerNode = Literal["spread", "off-leader", "leader"]
CONSUMER_NODES: tuple[ConsumerNode, ...] = ("spread", "off-leader", "leader")
EXCHANGE_TYPES: tuple[ExchangeType, ...] = ("direct", "fanout", "topic", "headers")
WorkDistribution = Literal["constant", "uniform", "exponential"]
WORK_DISTRIBUTIONS: tuple[WorkDistribution, ...] = ("constant", "uniform", "exponential")
PriorityDistribution = Literal["constant", "uniform", "share"]
PRIORITY_DISTRIBUTIONS: tuple[PriorityDistribution, ...] = ("constant", "uniform", "share")
ConnectionAllocation = Literal["round-robin", "random"]
CONNECTION_ALLOCATIONS: tuple[ConnectionAllocation, ...] = ("round-robin", "random")
#: The bounds of a consumer priority (x-priority, a signed 32-bit AMQP integer).
CONSUMER_PRIORITY_RANGE = (-(2**31), 2**31 - 1)
#: The wire protocols a run's clients speak (engine/protocols.py makes their clients).
Protocol = Literal["amqp0.9.1", "stream", "amqp1.0"]
PROTOCOLS: tuple[Protocol, ...] = ("amqp0.9.1", "stream", "amqp1.0")
#: Where a stream consumer starts reading (besides ``offset:N`` and ``timestamp:T``).
STREAM_OFFSETS: tuple[str, ...] = ("start", "first", "last", "next")
COMPRESSIONS: tuple[str, ...] = ("none", "gzip")
SETTLE_MODES: tuple[str, ...] = ("unsettled", "settled")
OUTCOMES: tuple[str, ...] = ("accept", "release", "reject")
_MAX_AGE = re.compile(r"[1-9][0-9]*[YMDhms]")

#: Bytes a message body needs for publisher id, sequence and the two send times.
BODY_HEADER_SIZE = 28
#: The shared broker most machines have; a spec with no uri runs on a private local node.
LOCAL_URI = "amqp://guest:guest@localhost:5672/%2F"
#: RabbitMQ's limit on queue and exchange names and routing keys (AMQP short strings).
MAX_NAME_BYTES = 255
#: Connections a run may open when the broker's socket limit cannot be read (management API
#: wrong, unauthorised or unreachable). RabbitMQ takes about 90% of its file descriptor
#: limit less 100 for sockets: 832 with the common default of 1024 descriptors, so up to
#: 800 a run fits such a broker with room for other clients; a larger one is refused unless
#: the operator says to go on (``--skip-capacity-check``).
UNCHECKED_CONNECTIONS_LIMIT = 800
#: Exchanges every vhost has; the broker refuses to declare any other ``amq.`` name, so
#: these are only checked for (declared passively), and their type is fixed.
PREDECLARED_EXCHANGES: dict[str, ExchangeType] = {
    "amq.direct": "direct",
    "amq.fanout": "fanout",
    "amq.topic": "topic",
    "amq.headers": "headers",
    "amq.match": "headers",
}


@dataclass(frozen=True, slots=True)
class ScheduleStep:
    """A change the run makes by itself ``at`` seconds after it started, or a node fault
    (``fault``, with ``change`` the phase mark it opens)."""

    at: float
    change: Change
    fault: NodeFault | None = None

    def describe(self) -> str:
        """What the step does, as written after ``AT:`` (``inflight=200``, ``fault kill 2``)."""
        return self.fault.describe() if self.fault is not None else self.change.describe()


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """How one RunSpec field is typed, bounded and explained."""

    kind: type
    help: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    unit: str = ""

    @property
    def named_choices(self) -> str:
        """The choices as a message or a help page names them (``""`` as the default)."""
        return ", ".join(choice or "empty (the default)" for choice in self.choices)


def _steerable_field(name: str) -> FieldInfo:
    """A steerable setting's field, as the settings registry describes it."""
    row = BY_FIELD[name]
    return FieldInfo(row.kind, row.help, row.low, row.high, unit=row.unit)


FIELDS: dict[str, FieldInfo] = {
    "name": FieldInfo(str, "name of the run, shown in sessions and reports"),
    "description": FieldInfo(str, "what the run reproduces or tries out"),
    "uri": FieldInfo(
        str,
        "AMQP URI of the broker (amqp:// or amqps://, vhost in the path); "
        "empty = a private local RabbitMQ node flowdeck starts and stops",
    ),
    "management_url": FieldInfo(str, "management API base URL; empty = derived from uri"),
    "prometheus_url": FieldInfo(str, "Prometheus server URL; empty = no Prometheus"),
    "queues": FieldInfo(int, "number of queues", 1, 10_000),
    "queue_type": FieldInfo(str, "queue type", choices=QUEUE_TYPES),
    "lazy": FieldInfo(bool, "classic queues in lazy mode"),
    "mirroring": FieldInfo(
        int,
        "classic mirrored queues: copies of each queue on a cluster (ha-mode exactly, "
        "automatic sync; the seed's factor 2 is one master + one mirror); 0 = not mirrored",
        0,
        99,
    ),
    "quorum_size": FieldInfo(
        int,
        "quorum queues: initial group size, members per queue (x-quorum-initial-group-size);"
        " 0 = the broker's default (every node)",
        0,
        99,
    ),
    "leader_locator": FieldInfo(
        str,
        "where a new queue's leader goes: client-local (the declaring node) or balanced "
        "(the node with fewest leaders); empty = the broker's default",
        choices=LEADER_LOCATORS,
    ),
    "consumer_node": FieldInfo(
        str,
        "which node each consumer connects to on a cluster: spread (round-robin over the "
        "uris, as publishers), off-leader (a node other than its queue's leader) or leader",
        choices=CONSUMER_NODES,
    ),
    "protocol": FieldInfo(
        str,
        "the clients' wire protocol: amqp0.9.1, stream (RabbitMQ's stream protocol, to stream "
        "queues) or amqp1.0 (RabbitMQ 3.x: a plugin translating to 0.9.1 inside the broker; "
        "4.x: native, so figures do not carry over between them)",
        choices=PROTOCOLS,
    ),
    "stream_offset": FieldInfo(
        str,
        "stream queues: where consumers start reading: start (the run's start), first, last, "
        "next, offset:N or timestamp:UNIX_SECONDS; re-read messages count as replayed",
    ),
    "stream_max_bytes": FieldInfo(
        int,
        "stream queues: retention by size (x-max-length-bytes); 0 = none",
        0,
        2**62,
        unit="bytes",
    ),
    "stream_max_age": FieldInfo(
        str, "stream queues: retention by age (x-max-age, e.g. 1h, 7D); empty = none"
    ),
    "stream_segment_bytes": FieldInfo(
        int,
        "stream queues: segment file size (x-stream-max-segment-size-bytes); 0 = the broker's",
        0,
        2**31,
        unit="bytes",
    ),
    "sub_entry_size": FieldInfo(
        int, "stream protocol: messages per sub-entry batch (1 = no batching)", 1, 10_000
    ),
    "compression": FieldInfo(
        str, "stream protocol: sub-entry batch compression", choices=COMPRESSIONS
    ),
    "dedup": FieldInfo(
        bool,
        "stream protocol: named producers, so the broker drops a re-sent message (deduplication)",
    ),
    "settle_mode": FieldInfo(
        str,
        "AMQP 1.0 senders: unsettled (the broker settles each: in-flight is the unsettled "
        "window) or settled (sent pre-settled, at most once: nothing is confirmed)",
        choices=SETTLE_MODES,
    ),
    "outcome": FieldInfo(
        str,
        "AMQP 1.0 receivers: the outcome each delivery gets: accept, release (back to the "
        "queue: delivered again) or reject",
        choices=OUTCOMES,
    ),
    "queue_args": FieldInfo(dict, "queue arguments, e.g. x-max-length = 10000"),
    "queue_pattern": FieldInfo(str, "queue name pattern; %d is replaced by the queue number"),
    "queue_pattern_from": FieldInfo(int, "first queue number for the pattern", 0, 1_000_000),
    "durable": FieldInfo(bool, "durable queues (and exchange)"),
    "exchange": FieldInfo(str, "exchange to publish to; empty = the default exchange"),
    "exchange_type": FieldInfo(str, "exchange type", choices=EXCHANGE_TYPES),
    "routing_key": FieldInfo(str, "routing key; empty = each publisher's queue name"),
    "publishers": _steerable_field("publishers"),
    "rate": _steerable_field("rate"),
    "message_size": _steerable_field("message_size"),
    "confirms": FieldInfo(bool, "use publisher confirms"),
    "catch_up": FieldInfo(
        bool,
        "after a stall, send what the rate owes at once (false: skip it, as PerfTest does; "
        "the next message still carries the stall in its intended-send latency)",
    ),
    "inflight": _steerable_field("inflight"),
    "persistent": FieldInfo(bool, "publish persistent messages (delivery mode 2)"),
    "mandatory": FieldInfo(bool, "publish with the mandatory flag (unroutable messages return)"),
    "consumers": _steerable_field("consumers"),
    "prefetch": _steerable_field("prefetch"),
    "ack_every": _steerable_field("ack_every"),
    "auto_ack": FieldInfo(bool, "consume with automatic acknowledgement"),
    "work": _steerable_field("work"),
    "work_distribution": FieldInfo(
        str,
        "how each message's work time is drawn around work: constant (every message work), "
        "uniform (evenly within work ± work_spread) or exponential (mean work)",
        choices=WORK_DISTRIBUTIONS,
    ),
    "work_spread": FieldInfo(
        float,
        "uniform work time: how far either side of work a message's may fall",
        0,
        60_000,
        unit="ms",
    ),
    "reject": _steerable_field("reject"),
    "poison": _steerable_field("poison"),
    "requeue": FieldInfo(
        bool,
        "rejected deliveries go back to the queue (basic.nack requeue); false: the broker "
        "dead-letters them (x-dead-letter-exchange) or drops them",
    ),
    "dead_letter_queue": FieldInfo(
        str,
        "a dead-letter queue flowdeck declares, with a fanout exchange of the same name that "
        "every queue of the run dead-letters to (x-dead-letter-exchange); flowdeck consumes "
        "it and counts each message dead-lettered; empty = none",
    ),
    "max_priority": FieldInfo(
        int,
        "classic queues: the highest message priority each queue keeps apart "
        "(x-max-priority; RabbitMQ advises 10 or less); 0 = no priorities",
        0,
        255,
    ),
    "message_priority": FieldInfo(
        int,
        "AMQP 0.9.1 messages' priority property: every message's (constant), the highest "
        "drawn (uniform: evenly 0..message_priority) or the high one (share: priority_share % "
        "of messages at message_priority, the rest at 0); 0 = no priority property",
        0,
        255,
    ),
    "priority_distribution": FieldInfo(
        str,
        "how each message's priority is drawn from message_priority: constant, uniform or share",
        choices=PRIORITY_DISTRIBUTIONS,
    ),
    "priority_share": FieldInfo(
        float,
        "share distribution: the percentage of messages published at message_priority",
        0,
        100,
        unit="%",
    ),
    "consumer_priority": FieldInfo(
        str,
        "consumers' priority (the x-priority consumer argument: the broker delivers to the "
        "highest that has prefetch room): a whole number, or several comma-separated that "
        "consumers take round-robin by number (e.g. 10,0); empty = none",
    ),
    "connection_allocation": FieldInfo(
        str,
        "how clients pick a node among several uris: round-robin by client number, or random "
        "(drawn from a seed the run header shows, so a rerun places them alike; PerfTest's "
        "--connection-allocation)",
        choices=CONNECTION_ALLOCATIONS,
    ),
    "allocation_seed": FieldInfo(
        int,
        "random connection allocation: the seed each client's node is drawn from; 0 = one "
        "drawn when the run starts and recorded with its spec, so a rerun places clients alike",
        0,
        2**31 - 1,
    ),
    "publisher_channels": FieldInfo(
        int,
        "publishers per connection: each publisher is a channel, this many share one "
        "connection (PerfTest's -X)",
        1,
        2047,
    ),
    "consumer_channels": FieldInfo(
        int,
        "consumers per connection: each consumer is a channel, this many share one "
        "connection (PerfTest's -Y)",
        1,
        2047,
    ),
    "heartbeat": FieldInfo(
        int,
        "AMQP heartbeat asked of the broker, seconds; 0 = none, -1 = the uri's heartbeat "
        "query or flowdeck's 60",
        -1,
        65_535,
        unit="s",
    ),
    "frame_max": FieldInfo(
        int,
        "largest AMQP frame asked of the broker (a bigger message goes in several); 0 = the "
        "uri's frame_max query or flowdeck's 131,072",
        0,
        2**31 - 1,
        unit="bytes",
    ),
    "channel_max": FieldInfo(
        int, "most channels per connection asked of the broker; 0 = flowdeck's 2047", 0, 65_535
    ),
    "tcp_nodelay": FieldInfo(bool, "TCP_NODELAY on every connection (Nagle's algorithm off)"),
    "tcp_send_buffer": FieldInfo(
        int,
        "each connection's socket send buffer (SO_SNDBUF); 0 = the system's",
        0,
        2**31 - 1,
        unit="bytes",
    ),
    "tcp_receive_buffer": FieldInfo(
        int,
        "each connection's socket receive buffer (SO_RCVBUF); 0 = the system's",
        0,
        2**31 - 1,
        unit="bytes",
    ),
    "duration": FieldInfo(float, "how long the run lasts", 1, 7 * 24 * 3600, unit="s"),
    "interval": FieldInfo(
        int,
        "length of the report's latency intervals (PerfTest's --interval): per phase, the "
        "most any interval's p75, p95 and p99 reached",
        1,
        3600,
        unit="s",
    ),
    "workers": FieldInfo(int, "worker processes; 0 = in-process, -1 = one per spare core", -1, 64),
    "schedule": FieldInfo(list, 'timed changes: [{at = 60, change = "inflight=200"}, ...]'),
    "thresholds": FieldInfo(
        list,
        'pass/fail criteria checked when the run ends: ["e2e_p99 < 50ms", "lost == 0"]; '
        "flowdeck run exits 99 when one fails (docs/engine.md, Thresholds)",
    ),
}

#: The registry's rows with no RunSpec field of their own (settings added from outside the
#: engine): a spec carries their values in ``added_settings``, by field.
ADDED: tuple[str, ...] = tuple(row.field for row in STEERABLE if row.field not in FIELDS)
FIELDS.update({name: _steerable_field(name) for name in ADDED})

#: Fields a spec file may set that are not run settings but instructions to the loader.
LOADER_KEYS = frozenset({"preset", "scale"})


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything a run needs, validated on construction (see ``FIELDS``)."""

    name: str = "custom"
    description: str = ""
    uri: str = ""
    management_url: str = ""
    prometheus_url: str = ""
    queues: int = 1
    queue_type: QueueType = "classic"
    lazy: bool = False
    mirroring: int = 0
    quorum_size: int = 0
    leader_locator: LeaderLocator = ""
    consumer_node: ConsumerNode = "spread"
    protocol: Protocol = "amqp0.9.1"
    stream_offset: str = "start"
    stream_max_bytes: int = 0
    stream_max_age: str = ""
    stream_segment_bytes: int = 0
    sub_entry_size: int = 1
    compression: str = "none"
    dedup: bool = False
    settle_mode: str = "unsettled"
    outcome: str = "accept"
    queue_args: Mapping[str, QueueArgValue] = field(default_factory=dict)
    queue_pattern: str = "flowdeck-%d"
    queue_pattern_from: int = 1
    durable: bool = True
    exchange: str = ""
    exchange_type: ExchangeType = "direct"
    routing_key: str = ""
    publishers: int = 1
    rate: float = 0.0
    message_size: int = 1000
    confirms: bool = True
    catch_up: bool = True
    inflight: int = 1000
    persistent: bool = True
    mandatory: bool = False
    consumers: int = 1
    prefetch: int = 1000
    ack_every: int = 1
    auto_ack: bool = False
    work: float = 0.0
    work_distribution: WorkDistribution = "constant"
    work_spread: float = 0.0
    reject: float = 0.0
    poison: float = 0.0
    requeue: bool = True
    dead_letter_queue: str = ""
    max_priority: int = 0
    message_priority: int = 0
    priority_distribution: PriorityDistribution = "constant"
    priority_share: float = 0.0
    consumer_priority: str = ""
    connection_allocation: ConnectionAllocation = "round-robin"
    allocation_seed: int = 0
    publisher_channels: int = 1
    consumer_channels: int = 1
    heartbeat: int = -1
    frame_max: int = 0
    channel_max: int = 0
    tcp_nodelay: bool = True
    tcp_send_buffer: int = 0
    tcp_receive_buffer: int = 0
    duration: float = 60.0
    interval: int = 1
    workers: int = -1
    schedule: tuple[ScheduleStep, ...] = ()
    thresholds: tuple[str, ...] = ()
    #: The values of the settings in ``ADDED``, by field (each one's default when not given);
    #: a spec file and the flags give them as top-level fields like any other.
    added_settings: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, info in FIELDS.items():
            if name in ("queue_args", "schedule", "thresholds") or name in ADDED:
                continue
            _check_field(name, info, getattr(self, name))
        object.__setattr__(self, "added_settings", _check_added(self.added_settings))
        _check_uri(self.uri)
        if not self.queue_pattern.strip():
            raise SpecError(
                "queue_pattern",
                f"queue_pattern must name the queues, got {self.queue_pattern!r} (an empty "
                "name makes the broker invent one, left behind after the run); e.g. 'flowdeck-%d'",
            )
        if "%d" not in self.queue_pattern and self.queues > 1:
            raise SpecError(
                "queue_pattern",
                f"queue_pattern must contain %d when queues > 1, got {self.queue_pattern!r}",
            )
        self._check_names()
        object.__setattr__(self, "queue_args", _check_queue_args(self.queue_args))
        object.__setattr__(self, "thresholds", _check_thresholds(self.thresholds))
        for index, step in enumerate(self.schedule):
            if not 0 <= step.at < self.duration:
                raise SpecError(
                    f"schedule[{index}].at",
                    f"schedule[{index}].at must be 0..{format_number(self.duration)} s "
                    f"(within duration), got {format_number(step.at)}",
                )
        if list(self.schedule) != sorted(self.schedule, key=lambda s: s.at):
            raise SpecError("schedule", "schedule steps must be in time order")
        self._check_combinations()

    def _check_names(self) -> None:
        """Names the broker would refuse, refused here (the client library would fail with
        a bare ValueError, the broker with a channel error mid-setup)."""
        # The highest queue number gives the longest name.
        longest = self.queue_name(self.queues - 1)
        for name, value, what in (
            ("queue_pattern", longest, f"queue name {_shorten(longest)!r}"),
            ("exchange", self.exchange, f"exchange {_shorten(self.exchange)!r}"),
            ("routing_key", self.routing_key, f"routing key {_shorten(self.routing_key)!r}"),
        ):
            size = len(value.encode("utf-8", errors="surrogatepass"))
            if size > MAX_NAME_BYTES:
                raise SpecError(
                    name,
                    f"{what} is {size} bytes of UTF-8, over RabbitMQ's limit of "
                    f"{MAX_NAME_BYTES}; shorten {name}",
                )
        if longest.startswith("amq."):
            raise SpecError(
                "queue_pattern",
                f"queue names starting with 'amq.' are reserved by RabbitMQ, got "
                f"{_shorten(self.queue_pattern)!r}; use another queue_pattern",
            )
        if self.exchange.startswith("amq."):
            fixed_type = PREDECLARED_EXCHANGES.get(self.exchange)
            if fixed_type is None:
                raise SpecError(
                    "exchange",
                    f"exchange names starting with 'amq.' are reserved by RabbitMQ, got "
                    f"{_shorten(self.exchange)!r}; use another name, or one of the predeclared "
                    f"{', '.join(PREDECLARED_EXCHANGES)}",
                )
            if self.exchange_type != fixed_type:
                raise SpecError(
                    "exchange_type",
                    f"{self.exchange} is a {fixed_type} exchange, got exchange_type "
                    f"{self.exchange_type!r}; set exchange_type = {fixed_type}",
                )

    def _check_protocol(self) -> None:
        stream_offset(self.stream_offset)  # SpecError when unreadable
        if self.stream_max_age and not _MAX_AGE.fullmatch(self.stream_max_age):
            raise SpecError(
                "stream_max_age",
                "stream_max_age must be a number and a unit of Y, M, D, h, m or s (e.g. 1h, 7D),"
                f" got {self.stream_max_age!r}",
            )
        stream_only = ("stream_max_bytes", "stream_max_age", "stream_segment_bytes")
        for name in stream_only:
            if getattr(self, name) and self.queue_type != "stream":
                raise SpecError(name, f"{name} applies to stream queues, not {self.queue_type}")
        if self.protocol == "stream":
            if self.queue_type != "stream":
                raise SpecError(
                    "protocol",
                    "the stream protocol publishes to and reads from stream queues; set "
                    f"queue_type = stream (got {self.queue_type})",
                )
            if self.exchange:
                raise SpecError(
                    "exchange", "the stream protocol publishes to the stream itself: no exchange"
                )
        elif self.sub_entry_size > 1 or self.compression != "none" or self.dedup:
            name = (
                "sub_entry_size"
                if self.sub_entry_size > 1
                else ("compression" if self.compression != "none" else "dedup")
            )
            raise SpecError(name, f"{name} applies to the stream protocol (protocol = stream)")
        if self.compression != "none" and self.sub_entry_size < 2:
            raise SpecError(
                "compression", "compression applies to sub-entry batches: set sub_entry_size > 1"
            )
        if self.protocol == "amqp1.0" and self.queue_type == "stream":
            raise SpecError(
                "protocol",
                "AMQP 1.0 runs here on classic and quorum queues (3.x's plugin has no stream "
                "offsets); use protocol = stream or amqp0.9.1 for stream queues",
            )
        if self.settle_mode == "settled" and self.confirms:
            raise SpecError(
                "settle_mode",
                "pre-settled messages are never confirmed: set confirms = false with "
                "settle_mode = settled",
            )
        if self.protocol != "amqp1.0" and (
            self.settle_mode != "unsettled" or self.outcome != "accept"
        ):
            name = "settle_mode" if self.settle_mode != "unsettled" else "outcome"
            raise SpecError(name, f"{name} applies to AMQP 1.0 (protocol = amqp1.0)")

    def _check_combinations(self) -> None:
        self._check_protocol()
        if self.queue_type == "stream" and self.auto_ack:
            raise SpecError(
                "auto_ack",
                "stream queues need manual acks and a prefetch; set auto_ack = false",
            )
        if self.queue_type == "stream" and self.consumers and self.prefetch == 0:
            raise SpecError(
                "prefetch", "stream queues need a prefetch > 0 for their consumers, got 0"
            )
        if self.queue_type != "classic" and not self.durable:
            raise SpecError(
                "durable",
                f"{self.queue_type} queues must be durable (RabbitMQ refuses transient ones); "
                "set durable = true or use classic queues",
            )
        if self.lazy and self.queue_type != "classic":
            raise SpecError("lazy", f"lazy mode applies to classic queues, not {self.queue_type}")
        if self.mirroring and self.queue_type != "classic":
            raise SpecError(
                "mirroring",
                f"mirroring applies to classic queues, not {self.queue_type} ones (a quorum "
                "queue replicates itself: set quorum_size)",
            )
        if self.mirroring == 1:
            raise SpecError(
                "mirroring",
                "mirroring = 1 is one copy, the queue alone: give 2 or more copies, or 0",
            )
        if self.consumer_node != "spread" and self.queue_type == "stream":
            raise SpecError(
                "consumer_node",
                "consumer_node applies to classic and quorum queues: a stream's consumers "
                "read from any member; set consumer_node = spread",
            )
        if self.quorum_size and self.queue_type != "quorum":
            raise SpecError(
                "quorum_size", f"quorum_size applies to quorum queues, not {self.queue_type} ones"
            )
        self._check_consumer_behaviour()
        self._check_priorities()
        if self.allocation_seed and self.connection_allocation != "random":
            raise SpecError(
                "allocation_seed",
                "allocation_seed seeds the random connection allocation; set "
                "connection_allocation = random, or drop allocation_seed",
            )
        if 0 < self.frame_max < 4096:
            raise SpecError(
                "frame_max",
                f"frame_max must be at least 4096 bytes (AMQP's smallest), or 0, got "
                f"{self.frame_max}",
            )
        if not self.auto_ack and 0 < self.prefetch < self.ack_every:
            raise SpecError(
                "ack_every",
                f"ack_every ({self.ack_every}) must not exceed prefetch ({self.prefetch}): "
                "consumers would stall waiting for deliveries the broker will not send; "
                "lower ack_every or raise prefetch",
            )

    def _check_priorities(self) -> None:
        """Message and consumer priorities: what the queue type and protocol support."""
        consumer_priorities(self.consumer_priority)  # SpecError when unreadable
        if self.max_priority and "x-max-priority" in self.queue_args:
            raise SpecError(
                "max_priority",
                "max_priority sets each queue's x-max-priority; drop x-max-priority from "
                "queue_args, or max_priority",
            )
        distribution = self.priority_distribution
        message = self.message_priority or distribution != "constant" or self.priority_share
        kept = self.max_priority or "x-max-priority" in self.queue_args
        if (message or kept) and self.queue_type != "classic":
            name = "message_priority" if message else "max_priority"
            raise SpecError(
                name,
                f"message priorities apply to classic queues (x-max-priority): {self.queue_type} "
                "queues on RabbitMQ 3.10 deliver in order whatever the priority; set "
                f"queue_type = classic or drop {name}",
            )
        if self.consumer_priority and self.queue_type == "stream":
            raise SpecError(
                "consumer_priority",
                "consumer priorities apply to classic and quorum queues: every stream consumer "
                "reads every message; drop consumer_priority",
            )
        if (message or self.consumer_priority) and self.protocol != "amqp0.9.1":
            name = "message_priority" if message else "consumer_priority"
            raise SpecError(
                name,
                f"{name} is set by AMQP 0.9.1 clients (protocol = amqp0.9.1), not {self.protocol}",
            )
        if distribution != "constant" and not self.message_priority:
            raise SpecError(
                "message_priority",
                f"priority_distribution = {distribution} draws priorities up to message_priority;"
                " set message_priority above 0",
            )
        if self.priority_share and distribution != "share":
            raise SpecError(
                "priority_share",
                f"priority_share applies to the share distribution, not {distribution}; set "
                "priority_distribution = share",
            )
        highest = self.max_priority or self.queue_args.get("x-max-priority", 0)
        if isinstance(highest, int) and 0 < highest < self.message_priority:
            raise SpecError(
                "message_priority",
                f"message_priority ({self.message_priority}) is over the queues' max priority "
                f"({highest}): the broker would take it as {highest}; lower message_priority "
                "or raise max_priority",
            )

    def _check_consumer_behaviour(self) -> None:
        """Work time, rejections and dead-lettering: what the queue type and acks allow."""
        if self.work_distribution == "uniform" and self.work_spread > self.work:
            raise SpecError(
                "work_spread",
                f"work_spread ({format_number(self.work_spread)} ms) must not exceed work "
                f"({format_number(self.work)} ms): a work time cannot be negative",
            )
        if self.work_spread and self.work_distribution != "uniform":
            raise SpecError(
                "work_spread",
                f"work_spread applies to uniform work times, not {self.work_distribution} "
                "ones; set work_distribution = uniform",
            )
        if self.auto_ack and (self.work or self.reject or self.poison):
            raise SpecError(
                "auto_ack",
                "work time and rejections need acks (with auto_ack the broker pushes without "
                "waiting for the work, and nothing can be rejected); set auto_ack = false",
            )
        if self.queue_type == "stream" and (self.reject or self.poison or self.dead_letter_queue):
            raise SpecError(
                "reject",
                "stream queues keep every message: a consumer cannot reject one back and "
                "nothing is dead-lettered; use classic or quorum queues",
            )
        if self.dead_letter_queue:
            if "x-dead-letter-exchange" in self.queue_args:
                raise SpecError(
                    "dead_letter_queue",
                    "dead_letter_queue sets each queue's x-dead-letter-exchange; drop "
                    "x-dead-letter-exchange from queue_args, or dead_letter_queue",
                )
            if self.dead_letter_queue in self.queue_names:
                raise SpecError(
                    "dead_letter_queue",
                    f"dead_letter_queue {self.dead_letter_queue!r} is a queue of the run; "
                    "name another queue",
                )
            if (
                self.dead_letter_queue.startswith("amq.")
                or len(self.dead_letter_queue.encode("utf-8", errors="surrogatepass"))
                > MAX_NAME_BYTES
            ):
                raise SpecError(
                    "dead_letter_queue",
                    f"dead_letter_queue {_shorten(self.dead_letter_queue)!r} is a name RabbitMQ "
                    f"refuses (starts with 'amq.' or over {MAX_NAME_BYTES} bytes)",
                )

    # -- derived values -----------------------------------------------------------------

    @property
    def target_rate(self) -> float:
        """Total target publish rate in msg/s; 0 means as fast as possible."""
        return self.rate * self.publishers

    def queue_name(self, index: int) -> str:
        """Name of queue ``index`` (0-based) from the pattern."""
        number = self.queue_pattern_from + index
        return self.queue_pattern.replace("%d", str(number))

    @property
    def queue_names(self) -> tuple[str, ...]:
        return tuple(self.queue_name(i) for i in range(self.queues))

    def setting(self, setting: Setting) -> float:
        """Current value of a steerable setting as the spec starts it."""
        return spec_value(self, setting)

    def with_change(self, change: Change) -> RunSpec:
        """The spec with an absolute numeric change applied (used to track settings)."""
        row = BY_SETTING.get(change.setting)
        if row is None or change.value is None:
            return self
        if row.field in ADDED:
            added = {**self.added_settings, row.field: row.convert(change.value)}
            return replace(self, added_settings=added)
        value: dict[str, Any] = {row.field: row.convert(change.value)}
        return replace(self, **value)

    def scaled(self, factor: float) -> RunSpec:
        """Counts and rates shrunk (or grown) proportionally so a preset fits a machine.

        Publishers, consumers and queues scale by ``factor`` (at least 1 each where the spec
        had any); the per-publisher rate stays, so the total target rate scales too. Limits
        per client (in-flight, prefetch, ack interval) stay as they are: they are what the
        experiment varies.
        """
        if not 0 < factor <= 100:
            raise SpecError("scale", f"scale must be in (0, 100], got {format_number(factor)}")
        if factor == 1:
            return self

        def count(n: int) -> int:
            return 0 if n == 0 else max(1, round(n * factor))

        steps = tuple(replace(s, change=_scale_change(s.change, count)) for s in self.schedule)
        return replace(
            self,
            publishers=count(self.publishers),
            consumers=count(self.consumers),
            queues=count(self.queues),
            schedule=steps,
            description=f"{self.description} (scale {format_number(factor)})".strip(),
        )

    def with_duration(self, duration: float) -> RunSpec:
        """The spec lasting ``duration`` seconds, its schedule stretched or squeezed to keep
        each step at the same fraction of the run (a 6-phase sweep stays 6 phases).
        """
        factor = duration / self.duration
        steps = tuple(replace(s, at=round(s.at * factor, 3)) for s in self.schedule)
        return replace(self, duration=duration, schedule=steps)

    def with_step(self, step: float) -> RunSpec:
        """The spec with every phase of its schedule ``step`` seconds long, and the run as
        long as its phases: the schedule's k-th distinct time becomes k × ``step`` (steps
        at one time stay together); when the first step is not at 0 the time before it is
        a phase too. A 6-step sweep with ``step`` 60 lasts 360 s.

        Where :meth:`with_duration` divides a run's length among its phases, this sets
        the phase length and lets the length follow; SpecError for a spec without a
        schedule (it has no phases to size)."""
        if not step > 0:
            raise SpecError("step", f"step must be more than 0 s, got {format_number(step)}")
        if not self.schedule:
            raise SpecError(
                "step",
                f"step sets how long each phase of a schedule lasts; {self.name} has no "
                "schedule: give its length with duration instead",
            )
        times = sorted({s.at for s in self.schedule})
        first = 0 if times[0] == 0 else 1  # a phase before the first step
        phase_of = {at: index + first for index, at in enumerate(times)}
        steps = tuple(replace(s, at=round(phase_of[s.at] * step, 3)) for s in self.schedule)
        duration = (len(times) + first) * step
        high = FIELDS["duration"].high or math.inf
        if duration > high:
            raise SpecError(
                "step",
                f"{len(times) + first} phases of {format_number(step)} s last "
                f"{format_number(duration)} s, over the longest run of {format_number(high)} s; "
                "give a shorter step",
            )
        return replace(self, duration=duration, schedule=steps)

    def to_mapping(self) -> dict[str, Any]:
        """Plain values with the spec's field names, as a TOML spec file holds them."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "schedule":
                value = [{"at": s.at, "change": s.describe()} for s in value]
            elif f.name == "queue_args":
                value = dict(value)
            elif f.name == "thresholds":
                value = list(value)
            elif f.name == "added_settings":
                out.update(value)
                continue
            out[f.name] = value
        return out

    def redacted(self) -> dict[str, Any]:
        """``to_mapping`` with every password masked: safe to record and show."""
        out = self.to_mapping()
        for key in ("uri", "management_url", "prometheus_url"):
            out[key] = redact(out[key])
        return out


def _scale_change(change: Change, count: Any) -> Change:
    row = BY_SETTING.get(change.setting)
    if row is not None and row.applies_to is Scope.TOPOLOGY and change.value is not None:
        if change.relative:
            scaled = math.copysign(count(abs(int(change.value))), change.value)
            return Change(change.setting, scaled, relative=True)
        return Change(change.setting, count(int(change.value)))
    return change


def _shorten(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters for a one-line message."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _check_field(name: str, info: FieldInfo, value: Any) -> None:
    if info.kind is bool:
        if not isinstance(value, bool):
            raise SpecError(name, f"{name} must be true or false, got {value!r}")
        return
    if info.kind is str:
        if not isinstance(value, str):
            raise SpecError(name, f"{name} must be text, got {value!r}")
        if info.choices and value not in info.choices:
            close = did_you_mean(value, info.choices)
            raise SpecError(
                name, f"{name} must be one of {info.named_choices}, got {value!r}{close}"
            )
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(name, f"{name} must be a number, got {value!r}")
    if info.kind is int and not float(value).is_integer():
        raise SpecError(name, f"{name} must be a whole number, got {value!r}")
    if not math.isfinite(value):
        raise SpecError(name, f"{name} must be a finite number, got {value!r}")
    low = info.low if info.low is not None else -math.inf
    high = info.high if info.high is not None else math.inf
    if not low <= value <= high:
        unit = f" {info.unit}" if info.unit else ""
        raise SpecError(
            name,
            f"{name} must be {format_number(low)}..{format_number(high)}{unit}, "
            f"got {format_number(value)}",
        )


def _check_added(values: Any) -> dict[str, float]:
    """The added settings' values, each checked against its row; defaults filled in."""
    if not isinstance(values, Mapping):
        raise SpecError("added_settings", f"added_settings must be a table, got {values!r}")
    unknown = sorted(set(values) - set(ADDED))
    if unknown:
        raise SpecError(unknown[0], f"unknown field {unknown[0]!r}")
    checked: dict[str, float] = {}
    for name in ADDED:
        row = BY_FIELD[name]
        value = values.get(name, row.default)
        _check_field(name, FIELDS[name], value)
        checked[name] = row.convert(value)
    return checked


def _check_uri(uri: str) -> None:
    """One AMQP URI, or a cluster's nodes comma-separated (clients spread over them)."""
    if uri:
        for node in broker_of(uri).uris:  # SpecError, one line without the password
            tls_options(node)  # TlsError (a SpecError) for a verify= value the engine refuses


def _check_thresholds(raw: Any) -> tuple[str, ...]:
    """The thresholds as written, each read once now so a bad one is refused before the
    run starts (SpecError naming the problem)."""
    if isinstance(raw, str) or not isinstance(raw, list | tuple):
        raise SpecError(
            "thresholds", f'thresholds must be a list of text, e.g. ["lost == 0"], got {raw!r}'
        )
    return tuple(parse_threshold(text).text for text in raw)


def _check_queue_args(args: Any) -> Mapping[str, QueueArgValue]:
    if not isinstance(args, Mapping):
        raise SpecError("queue_args", f"queue_args must be a table of name = value, got {args!r}")
    checked: dict[str, QueueArgValue] = {}
    for key, value in args.items():
        if not isinstance(key, str) or not key:
            raise SpecError("queue_args", f"queue_args names must be text, got {key!r}")
        if not isinstance(value, int | float | str | bool):
            raise SpecError(
                f"queue_args.{key}",
                f"queue_args.{key} must be a number, text or true/false, got {value!r}",
            )
        checked[key] = value
    return _FrozenArgs(checked)


class _FrozenArgs(dict[str, QueueArgValue]):
    """A dict that refuses changes, so a frozen RunSpec stays frozen all the way down."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))

    def __reduce__(self) -> tuple[type[_FrozenArgs], tuple[dict[str, QueueArgValue]]]:
        # Pickle (a spec going to a worker process) rebuilds it whole instead of by items.
        return (_FrozenArgs, (dict(self),))

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("RunSpec.queue_args cannot be changed; use dataclasses.replace")

    __setitem__ = _refuse
    __delitem__ = _refuse
    update = _refuse
    pop = _refuse  # type: ignore[assignment]
    clear = _refuse
    setdefault = _refuse  # type: ignore[assignment]


def consumer_priorities(text: str) -> tuple[int, ...]:
    """``consumer_priority`` read: the priorities consumers take round-robin by number
    (empty: none). SpecError when unreadable or out of range."""
    if not text.strip():
        return ()
    low, high = CONSUMER_PRIORITY_RANGE
    out = []
    for part in text.split(","):
        word = part.strip()
        try:
            value = int(word)
        except ValueError:
            raise SpecError(
                "consumer_priority",
                "consumer_priority must be a whole number or several comma-separated (e.g. "
                f"10,0), got {text!r}",
            ) from None
        if not low <= value <= high:
            raise SpecError(
                "consumer_priority",
                f"consumer_priority must be {low}..{high} (a signed 32-bit x-priority), "
                f"got {value}",
            )
        out.append(value)
    return tuple(out)


def stream_offset(text: str) -> tuple[str, int]:
    """``stream_offset`` read: (kind, value) with kind one of start, first, last, next,
    offset, timestamp (value 0 but for the last two). SpecError when unreadable."""
    if text in STREAM_OFFSETS:
        return text, 0
    kind, _, value = text.partition(":")
    if kind in ("offset", "timestamp") and value.isdigit():
        return kind, int(value)
    raise SpecError(
        "stream_offset",
        "stream_offset must be start, first, last, next, offset:N or timestamp:UNIX_SECONDS, "
        f"got {text!r}",
    )


def spec_from_mapping(values: Mapping[str, Any], base: RunSpec | None = None) -> RunSpec:
    """Build a spec from field names and plain values (a TOML table, parsed CLI flags).

    Unknown fields are errors; values are checked by :class:`RunSpec`. ``base`` supplies
    the fields not given (a preset the file or flags refine).
    """
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise SpecError(
            unknown[0],
            f"unknown field {unknown[0]!r}; known fields: {', '.join(FIELDS)}",
        )
    kwargs: dict[str, Any] = {}
    added = {k: v for k, v in values.items() if k in ADDED}
    if added:
        base_added = base.added_settings if base is not None else {}
        kwargs["added_settings"] = {**base_added, **added}
    for key, value in values.items():
        if key in ADDED:
            continue
        if key == "schedule":
            kwargs[key] = parse_schedule(value)
        elif FIELDS[key].kind is float and isinstance(value, int) and not isinstance(value, bool):
            kwargs[key] = float(value)
        else:
            kwargs[key] = value
    try:
        return replace(base, **kwargs) if base is not None else RunSpec(**kwargs)
    except TypeError as exc:  # a value of a type dataclasses cannot even take
        raise SpecError("spec", f"invalid spec: {exc}") from None


def parse_schedule(raw: Any) -> tuple[ScheduleStep, ...]:
    """Schedule steps from ``[{at = 60, change = "inflight=200"}, ...]``."""
    if not isinstance(raw, list | tuple):
        raise SpecError("schedule", f"schedule must be a list of steps, got {raw!r}")
    steps = []
    for index, item in enumerate(raw):
        where = f"schedule[{index}]"
        if isinstance(item, ScheduleStep):
            steps.append(item)
            continue
        if not isinstance(item, Mapping) or set(item) != {"at", "change"}:
            raise SpecError(
                where, f'{where} must be {{at = SECONDS, change = "setting=value"}}, got {item!r}'
            )
        at = item["at"]
        if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
            raise SpecError(f"{where}.at", f"{where}.at must be seconds, got {at!r}")
        if not isinstance(item["change"], str):
            raise SpecError(
                f"{where}.change", f"{where}.change must be text, got {item['change']!r}"
            )
        try:
            steps.append(schedule_step(float(at), item["change"]))
        except SpecError as exc:
            raise SpecError(f"{where}.change", f"{where}.change: {exc.message}") from None
    return tuple(steps)


def schedule_step(at: float, text: str) -> ScheduleStep:
    """The step at ``at`` s of what is written after ``AT:``: a change (``inflight=200``,
    ``mark "warm"``) or a node fault (``fault kill 2``). SpecError when it is neither."""
    if is_fault(text):
        fault = parse_fault(text)
        return ScheduleStep(at, fault.mark(), fault)
    return ScheduleStep(at, parse_change(text))


def spec_value(spec: RunSpec, setting: Setting) -> float:
    """The value a spec gives a numeric setting."""
    field_name = BY_SETTING[setting].field
    if field_name in ADDED:
        return float(spec.added_settings[field_name])
    return float(getattr(spec, field_name))


def settings_of(spec: RunSpec) -> Settings:
    """The settings a run starts with, as its spec gives them (one per registry row)."""
    return Settings({row.field: spec_value(spec, row.setting) for row in STEERABLE})
