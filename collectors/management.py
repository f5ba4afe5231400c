"""The broker's side of a run from the RabbitMQ management HTTP API.

One ``sample()`` makes a handful of cheap requests at once (``columns=`` everywhere, only
the run's queues) and turns them into a BrokerSample. The management API recomputes its
queue, channel and rate figures every ``collect_statistics_interval``, and the node figures
(memory, disk, descriptors) on a 5 s clock of their own. The API does not publish the
interval and its one-second history is kept at 5 s resolution whatever the interval, so
the interval cannot be read back over HTTP: the caller gives it when known (a private node
says 1 s; ``--statistics-interval``), otherwise RabbitMQ's default 5 s is assumed and said
to be assumed. The node figures' time is read from their history (the ``context_switches``
counter changes at every refresh), so node ages are true. Alarms come from
``/api/health/checks/alarms``, which answers at once, unlike ``/api/nodes`` ``mem_alarm``
(5-8 s behind); ``sample_alarms()`` reads only that, cheaply, between full polls.

A broker in trouble never raises out of ``sample()``: the sample is stale, keeps the last
good figures and says why. ``check()`` is the strict one, made before a run.

In a cluster the API polled is one node's: when that node dies, the collector **fails
over** to another node's API within the same poll, so the broker panel keeps live figures
(the dead node listed as down) instead of going stale. Where the other nodes' APIs are is
read from ``/api/overview`` ``listeners`` (every node's ``http``/``https`` listener and its
AMQP ports, which say which of the run's node URIs is that node's host); each failover is
kept in :attr:`ManagementCollector.failovers` for the run to say once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from flowdeck.collectors.client_names import ClientRole, run_client
from flowdeck.collectors.errors import SourceError, short_error
from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample

_T = TypeVar("_T")

#: The RabbitMQ default, assumed unless the caller knows the broker's setting.
DEFAULT_STATISTICS_INTERVAL = 5.0
#: How often RabbitMQ 3.x refreshes node figures, until their history says otherwise.
DEFAULT_NODE_STATS_INTERVAL = 5.0

_NODE_COLUMNS = (
    "name,running,mem_used,mem_limit,mem_alarm,disk_free,disk_free_limit,disk_free_alarm,"
    "fd_used,fd_total,sockets_used,sockets_total,partitions,context_switches_details"
)
_QUEUE_COLUMNS = (
    "name,vhost,type,messages_ready,messages_unacknowledged,consumers,"
    "message_stats.publish,message_stats.deliver_get,"
    "state,node,leader,members,online,slave_nodes,synchronised_slave_nodes"
)
#: Where a queue object keeps every value of a key RabbitMQ sent more than once.
_REPEATED = "\0repeated"
_OVERVIEW_COLUMNS = "rabbitmq_version,erlang_version,message_stats,object_totals,node,listeners"
#: Listener addresses that mean "every interface": the node's host must come from elsewhere.
_ANY_ADDRESS = frozenset({"", "::", "0.0.0.0"})
#: Seconds one other node's API gets to answer before the failover tries the next one.
_FAILOVER_PROBE_S = 2.0
#: HTTP statuses a node that is going down (or a proxy in front of a dead one) answers.
_GATEWAY_TROUBLE = frozenset({502, 503, 504})
#: Queue names are sent to the API as one regex while the URL stays this short.
_MAX_REGEX_URL = 6000
#: What is read of each connection and channel of the vhost: their node and state (credit
#: flow, alarms), and with a run tag to go by, what tells the run's own and their counts.
_CONNECTION_COLUMNS = "node,state"
_RUN_CONNECTION_COLUMNS = "name,node,state,user_provided_name"
_CHANNEL_COLUMNS = "node,state,messages_unconfirmed,messages_unacknowledged"
_RUN_CHANNEL_COLUMNS = (
    "node,state,messages_unconfirmed,messages_unacknowledged,connection_details.name,name,"
    "message_stats.publish,message_stats.deliver_get,message_stats.ack"
)
#: What is read of the stream plugin's consumers and publishers (``/api/stream/*``).
_STREAM_CONSUMER_COLUMNS = "queue.name,queue.vhost,offset_lag"
_STREAM_PUBLISHER_COLUMNS = "queue.name,queue.vhost,published,confirmed,errored"
#: The run's pipeline rates span at least this many statistics intervals.
_RUN_RATE_INTERVALS = 2.0


class ManagementAnswerError(Exception):
    """One request got an answer that cannot be used; the message is the stale reason.

    ``status`` is the HTTP status when the API answered with an error status;
    ``unreachable`` says the node behind the API did not answer at all (refused, timed
    out, dropped, or a gateway's 502-504): another node's API may.
    """

    def __init__(
        self, message: str, *, status: int | None = None, unreachable: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.unreachable = unreachable


@dataclasses.dataclass(frozen=True, slots=True)
class Failover:
    """The collector moved from one node's management API to another's, at ``at``."""

    at: float
    from_node: str
    to_node: str
    from_url: str
    to_url: str
    reason: str

    def describe(self) -> str:
        """One line for the operator, e.g. ``management API of rabbit@b down; polling
        rabbit@a``."""
        gone = self.from_node or self.from_url
        return f"management API of {gone} down; polling {self.to_node or self.to_url}"


@dataclasses.dataclass(frozen=True, slots=True)
class NodeCapacity:
    """What a running node can still take: its sockets in use and its socket limit."""

    node: str
    sockets_used: int
    sockets_total: int


@dataclasses.dataclass(frozen=True, slots=True)
class SocketFigures:
    """The running nodes' socket figures from ``/api/nodes``.

    A node that started moments ago lists none until its first statistics (about 5 s), so
    ``nodes`` may hold fewer nodes than are ``running``.
    """

    nodes: tuple[NodeCapacity, ...]
    running: int

    @property
    def complete(self) -> bool:
        """Every running node (at least one) listed its figures."""
        return bool(self.nodes) and len(self.nodes) == self.running


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url.rstrip("/")
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")).rstrip("/")


def _number(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    return None


def _rate(stats: Any, key: str) -> float | None:
    if not isinstance(stats, Mapping):
        return None
    details = stats.get(f"{key}_details")
    if isinstance(details, Mapping):
        rate = details.get("rate")
        if isinstance(rate, int | float):
            return float(rate)
    return None


def collection_times(samples: Sequence[Mapping[str, Any]]) -> list[float]:
    """Unix seconds at which a counter's value changed, oldest first.

    ``samples`` is a management ``*_details.samples`` list (newest first, one per second):
    a counter that moves at every statistics collection changes value exactly there.
    """
    points = sorted(
        (float(s["timestamp"]) / 1000.0, s["sample"])
        for s in samples
        if isinstance(s, Mapping) and "timestamp" in s and "sample" in s
    )
    return [points[i][0] for i in range(1, len(points)) if points[i][1] != points[i - 1][1]]


def interval_from_collections(times: Sequence[float]) -> float | None:
    """The statistics interval from collection times on a one-second grid.

    The smallest gap between two changes: a collection with no change can only make a gap
    longer, never shorter. ``None`` until there are at least two gaps to go by.
    """
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    if len(gaps) < 2:
        return None
    return max(1.0, min(gaps))


def _busiest_history(stats: Any) -> list[float]:
    """Collection times from the ``*_details.samples`` history that changed most often."""
    best: list[float] = []
    if isinstance(stats, Mapping):
        for key, details in stats.items():
            if key.endswith("_details") and isinstance(details, Mapping):
                samples = details.get("samples")
                if isinstance(samples, list):
                    times = collection_times(samples)
                    if len(times) > len(best):
                        best = times
    return best


def figures_time(last_collection: float, interval: float, now: float) -> float:
    """When the figures read at ``now`` were computed, given one known collection time."""
    if now <= last_collection:
        return last_collection
    return last_collection + ((now - last_collection) // interval) * interval


@dataclasses.dataclass(frozen=True, slots=True)
class StreamFigures:
    """What the stream plugin's management (``rabbitmq_stream_management``) says of a
    vhost's streams: its stream protocol ``connections``; the stream protocol
    ``consumers`` of the streams asked for and their ``offset_lag`` (messages between the
    stream's last committed offset and the consumer's) summed and at its largest
    (``offset_lag_max``, None with no consumer); the ``publishers`` and their
    ``published``, ``confirmed`` and ``errored`` messages summed."""

    connections: int
    consumers: int
    offset_lag: int
    offset_lag_max: int | None
    publishers: int
    published: int
    confirmed: int
    errored: int

    @classmethod
    def of(
        cls,
        connections: Any,
        consumers: Any,
        publishers: Any,
        *,
        vhost: str,
        queues: Sequence[str] | None,
    ) -> StreamFigures:
        """The figures from the three answers (``/api/stream/connections``, ``consumers``,
        ``publishers``); consumers and publishers of other vhosts or streams are left out.
        Raises :class:`ManagementAnswerError` when an answer is not a list."""
        for path, answer in (
            ("connections", connections),
            ("consumers", consumers),
            ("publishers", publishers),
        ):
            if not isinstance(answer, list):
                raise ManagementAnswerError(f"management API: /api/stream/{path} is not a list")
        wanted = None if queues is None else set(queues)

        def ours(item: Any) -> bool:
            queue = item.get("queue") if isinstance(item, Mapping) else None
            return (
                isinstance(queue, Mapping)
                and queue.get("vhost", vhost) == vhost
                and (wanted is None or queue.get("name") in wanted)
            )

        readers = [c for c in consumers if ours(c)]
        writers = [p for p in publishers if ours(p)]
        lags = [lag for c in readers if (lag := _number(c.get("offset_lag"))) is not None]

        def total(items: list[Any], key: str) -> int:
            return sum(_number(item.get(key)) or 0 for item in items)

        return cls(
            connections=len(connections),
            consumers=len(readers),
            offset_lag=sum(lags),
            offset_lag_max=max(lags) if lags else None,
            publishers=len(writers),
            published=total(writers, "published"),
            confirmed=total(writers, "confirmed"),
            errored=total(writers, "errored"),
        )


class ManagementCollector:
    """Polls one broker's management API for BrokerSamples.

    ``queue_names`` limits the queue figures to the run's queues (``None``: every queue of
    the vhost). ``statistics_interval`` may be given when known (a private node's is 1 s);
    otherwise it is read from the node. ``client`` is for tests that need an odd server.
    ``amqp_nodes`` are the run's node URIs as (host, port): they say on which host each
    cluster node's management API answers when its listener binds every interface.
    ``run_tag`` is the tag in the run's connection names (collectors/client_names.py): with
    it, samples say which of the run's publishers are in flow and where the run's messages
    are on the broker's side (BrokerSample's ``run_*`` figures). ``streams`` adds the stream
    plugin's figures to every full poll (BrokerSample's ``stream_*``: three more requests,
    so only for a run to streams or over the stream protocol).
    """

    source = "management"

    def __init__(
        self,
        base_url: str,
        *,
        username: str,
        password: str,
        vhost: str = "/",
        queue_names: Sequence[str] | None = None,
        timeout: float = 5.0,
        verify: bool | str | ssl.SSLContext = True,
        client: httpx.AsyncClient | None = None,
        statistics_interval: float | None = None,
        amqp_nodes: Sequence[tuple[str, int]] = (),
        run_tag: str = "",
        streams: bool = False,
    ) -> None:
        self.base_url = _without_credentials(base_url)
        self.run_tag = run_tag
        self.streams = streams
        #: Why the stream figures are not asked for any more ("" while they are): the
        #: stream plugin's management answered 404, it is off.
        self._streams_absent = ""
        #: The run's channels seen so far (channel name -> its counts at its last poll),
        #: closed ones too, so the run's totals do not drop when a client reconnects.
        self._run_channels: dict[str, _ChannelCounts] = {}
        #: (poll time, accepted, delivered, acked) of recent polls, for the run's rates.
        self._run_history: list[tuple[float, int, int, int]] = []
        self._amqp_nodes = tuple(amqp_nodes)
        #: Node name -> its management API's base URL, from the listeners (see module doc).
        self._endpoints: dict[str, str] = {}
        #: Per node, the AMQP ports it listens on (from the overview's listeners).
        self._amqp_ports: dict[str, set[int]] = {}
        #: The node whose management API answers now ("" until the first answer).
        self.node = ""
        #: Every failover so far, oldest first.
        self.failovers: list[Failover] = []
        self.username = username
        self.vhost = vhost
        self.queue_names: tuple[str, ...] | None = (
            tuple(queue_names) if queue_names is not None else None
        )
        self.timeout = timeout
        self._fixed_interval = statistics_interval
        self._interval = statistics_interval or DEFAULT_STATISTICS_INTERVAL
        self._interval_known = statistics_interval is not None
        self._node_interval = DEFAULT_NODE_STATS_INTERVAL
        # (vhost, queue) -> [(poll time, publish count, deliver_get count)]: per-queue rates
        # are computed from the counters, since the list endpoint reports its rates as 0;
        # the counters move on the 5 s node clock, so the rate spans at least that long.
        self._queue_counts: dict[tuple[str, str], list[tuple[float, int | None, int | None]]] = {}
        self._last_node_collection: float | None = None
        self._last: BrokerSample | None = None
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            auth=(username, password), timeout=timeout, verify=verify
        )
        if client is not None and client.auth is None:
            client.auth = httpx.BasicAuth(username, password)

    @property
    def statistics_interval(self) -> float:
        """Seconds between the broker's statistics collections (5 s until known)."""
        return self._interval

    @property
    def statistics_interval_known(self) -> bool:
        return self._interval_known

    @property
    def last_sample(self) -> BrokerSample | None:
        return self._last

    def set_queue_names(self, queue_names: Sequence[str] | None) -> None:
        """The run's queues changed (declared late, a pattern grew)."""
        self.queue_names = tuple(queue_names) if queue_names is not None else None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> ManagementCollector:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- before a run --------------------------------------------------------------------

    async def check(self) -> str:
        """Make sure the API answers to these credentials and the vhost exists.

        Returns one line for the operator (version, node, statistics interval); raises
        SourceError saying what is wrong and what to do.
        """
        try:
            overview = await self._read_overview()
            if not isinstance(overview, Mapping) or "rabbitmq_version" not in overview:
                raise ManagementAnswerError(
                    f"management API: {self.base_url}/api/overview is not a RabbitMQ "
                    "management answer"
                )
            await self._get_json(f"/api/vhosts/{quote(self.vhost, safe='')}")
            await self._read_nodes()
        except ManagementAnswerError as exc:
            raise SourceError(self._advice(str(exc))) from None
        return (
            f"RabbitMQ {overview.get('rabbitmq_version')} on {overview.get('node')} at "
            f"{self.base_url}, statistics every {self._interval:g} s"
            + ("" if self._interval_known else " (assumed: RabbitMQ's default; give the real one)")
        )

    def _advice(self, reason: str) -> str:
        if " 401 " in reason:
            return (
                f"{reason}: the management API at {self.base_url} refused user "
                f"{self.username!r}; check the user name and password, and that the user "
                "has the monitoring or management tag"
            )
        if "/api/vhosts/" in reason and " 404 " in reason:
            return (
                f"vhost {self.vhost!r} does not exist on {self.base_url}; create it "
                "(rabbitmqctl add_vhost) or give the right vhost in the URI"
            )
        if " 404 " in reason or "not JSON" in reason or "not a RabbitMQ" in reason:
            return (
                f"{reason}: {self.base_url} does not look like a RabbitMQ management API; "
                "give its base URL, such as http://host:15672"
            )
        if "cannot connect" in reason or "no answer" in reason:
            return (
                f"{reason}; check the host and port, and that the rabbitmq_management "
                "plugin is enabled (rabbitmq-plugins enable rabbitmq_management)"
            )
        return reason

    async def socket_figures(self) -> SocketFigures:
        """The running nodes' socket use, for the pre-flight "has the broker a socket for
        every connection?" (one request). Raises :class:`ManagementAnswerError` saying why.
        """
        nodes = await self._get_json(
            "/api/nodes", {"columns": "name,running,sockets_used,sockets_total"}
        )
        if not isinstance(nodes, list) or not all(isinstance(n, Mapping) for n in nodes):
            raise ManagementAnswerError("management API: /api/nodes is not a list of nodes")
        running = [n for n in nodes if n.get("running", True)]
        figures = [
            NodeCapacity(str(n.get("name", "")), used, total)
            for n in running
            if (used := _number(n.get("sockets_used"))) is not None
            and (total := _number(n.get("sockets_total"))) is not None
        ]
        return SocketFigures(tuple(figures), running=len(running))

    async def amqp_listener_ports(self) -> set[int]:
        """The broker's AMQP ports (``amqp`` and ``amqp/ssl`` listeners), so a caller can
        tell a management URL guessed for the wrong broker (two nodes on one host share
        ``host:15672`` as a guess, not as a fact). Raises :class:`ManagementAnswerError`.
        """
        return await self.listener_ports("amqp")

    async def listener_ports(self, protocol: str) -> set[int]:
        """The broker's ports whose listener's protocol starts with ``protocol`` (``amqp``,
        ``stream``: the stream plugin's). Raises :class:`ManagementAnswerError`."""
        overview = await self._get_json("/api/overview", {"columns": "listeners"})
        listeners = overview.get("listeners") if isinstance(overview, Mapping) else None
        if not isinstance(listeners, list):
            raise ManagementAnswerError("management API: /api/overview lists no listeners")
        return {
            port
            for item in listeners
            if isinstance(item, Mapping)
            and str(item.get("protocol", "")).startswith(protocol)
            and (port := _number(item.get("port"))) is not None
        }

    async def stream_figures(self, queues: Sequence[str]) -> dict[str, int]:
        """What the stream plugin's management says of ``queues`` (streams) in this vhost:
        its connections, the consumers and their offset lag summed, the publishers and their
        published, confirmed and errored messages. Raises :class:`ManagementAnswerError`
        (a 404 when ``rabbitmq_stream_management`` is off)."""
        found = await self._read_stream_figures(queues)
        return {
            "stream_connections": found.connections,
            "consumers": found.consumers,
            "offset_lag": found.offset_lag,
            "publishers": found.publishers,
            "published": found.published,
            "confirmed": found.confirmed,
            "errored": found.errored,
        }

    async def _read_stream_figures(self, queues: Sequence[str] | None) -> StreamFigures:
        """The vhost's stream connections and the stream consumers and publishers of
        ``queues`` (None: every stream of the vhost), three small requests at once."""
        vhost = quote(self.vhost, safe="")
        connections, consumers, publishers = await asyncio.gather(
            self._get_json(f"/api/stream/connections/{vhost}", {"columns": "name"}),
            self._get_json(f"/api/stream/consumers/{vhost}", {"columns": _STREAM_CONSUMER_COLUMNS}),
            self._get_json(
                f"/api/stream/publishers/{vhost}", {"columns": _STREAM_PUBLISHER_COLUMNS}
            ),
        )
        return StreamFigures.of(connections, consumers, publishers, vhost=self.vhost, queues=queues)

    async def _poll_stream_figures(self) -> StreamFigures | None:
        """The stream figures for a live sample: None, never an error, when the stream
        plugin's management does not answer (a 404 when it is off: then not asked again)."""
        if not self.streams or self._streams_absent:
            return None
        try:
            return await self._read_stream_figures(self.queue_names)
        except ManagementAnswerError as exc:
            if exc.status == 404:
                self._streams_absent = str(exc)
            return None

    # -- policies ------------------------------------------------------------------------

    async def set_policy(self, name: str, body: Mapping[str, Any]) -> None:
        """Create or replace the policy ``name`` of the collector's vhost (the management
        API's policy body: pattern, apply-to, priority, definition). Raises
        :class:`ManagementAnswerError` saying why the broker refused it."""
        await self._change(
            f"/api/policies/{quote(self.vhost, safe='')}/{quote(name, safe='')}", body
        )

    async def delete_policy(self, name: str) -> None:
        """Remove the policy ``name`` of the collector's vhost; one already gone is fine.

        Asked once more when the answer does not come through (a keep-alive connection the
        node closed while the run went on is dropped, the second ask opens a new one), then
        on another node's API when this node's is down: policies are cluster-wide."""
        path = f"/api/policies/{quote(self.vhost, safe='')}/{quote(name, safe='')}"

        async def delete() -> None:
            response = await self._request(path, method="DELETE")
            if response.status_code >= 400 and response.status_code != 404:
                raise ManagementAnswerError(
                    f"management API: {response.status_code} for DELETE {path}",
                    status=response.status_code,
                )

        async def delete_again_once() -> None:
            try:
                await delete()
            except ManagementAnswerError as exc:
                if not exc.unreachable:
                    raise
                await delete()

        await self._failing_over(delete_again_once)

    async def _change(self, path: str, body: Mapping[str, Any]) -> None:
        response = await self._request(path, method="PUT", body=body)
        if response.status_code >= 400:
            reason = _json_reason(response) or response.reason_phrase.lower() or "error"
            raise ManagementAnswerError(
                f"management API: {response.status_code} for PUT {path}: {reason}",
                status=response.status_code,
            )

    # -- live polls ----------------------------------------------------------------------

    async def sample(self) -> BrokerSample:
        """One full poll. Never raises for broker trouble: a stale sample says why. A node
        whose API does not answer is left for another node's, in the same poll."""
        try:
            sample = await self._failing_over(self._read_sample)
        except ManagementAnswerError as exc:
            return self._stale(str(exc))
        self._last = sample
        return sample

    async def _read_sample(self) -> BrokerSample:
        overview, nodes, queues, channels, connections, alarms, streams = await asyncio.gather(
            self._read_overview(),
            self._read_nodes(),
            self._read_queues(),
            self._get_json(
                f"/api/vhosts/{quote(self.vhost, safe='')}/channels",
                {"columns": _RUN_CHANNEL_COLUMNS if self.run_tag else _CHANNEL_COLUMNS},
            ),
            self._get_json(
                f"/api/vhosts/{quote(self.vhost, safe='')}/connections",
                {"columns": _RUN_CONNECTION_COLUMNS if self.run_tag else _CONNECTION_COLUMNS},
            ),
            self._read_alarms(),
            self._poll_stream_figures(),
        )
        self._learn_endpoints(overview)
        return self._build(overview, nodes, queues, channels, connections, alarms, streams)

    async def sample_alarms(self) -> BrokerSample:
        """The last figures with the alarms as the broker states them now (one request)."""
        try:
            alarms = await self._failing_over(self._read_alarms)
        except ManagementAnswerError as exc:
            return self._stale(str(exc))
        now = time.time()
        if self._last is None:
            nodes = tuple(
                NodeSample(name=node, mem_alarm="memory" in kinds, disk_alarm="disk" in kinds)
                for node, kinds in alarms.items()
            )
            return BrokerSample(
                source="management",
                taken_at=now,
                figures_at=now,
                statistics_interval=self._interval,
                nodes=nodes,
            )
        sample = dataclasses.replace(
            self._last,
            taken_at=now,
            nodes=_with_alarms(self._last.nodes, alarms),
            stale_reason="",
        )
        self._last = sample
        return sample

    # -- failover ------------------------------------------------------------------------

    async def _failing_over(self, read: Callable[[], Awaitable[_T]]) -> _T:
        """``read()``; when this node's API does not answer, ``read()`` again on another
        node's that does (ManagementAnswerError when none does, or for any other trouble)."""
        try:
            return await read()
        except ManagementAnswerError as exc:
            if not exc.unreachable or not await self._fail_over(str(exc)):
                raise
        return await read()

    def _learn_endpoints(self, overview: Any) -> None:
        """Which node answers, and where every node's management API is (module doc)."""
        if not isinstance(overview, Mapping):
            return
        self.node = str(overview.get("node") or self.node)
        listeners = overview.get("listeners")
        if not isinstance(listeners, list):
            return
        scheme = urlsplit(self.base_url).scheme or "http"
        amqp_ports: dict[str, set[int]] = {}
        api: dict[str, tuple[str, int]] = {}
        for item in listeners:
            if not isinstance(item, Mapping) or (port := _number(item.get("port"))) is None:
                continue
            node = str(item.get("node", ""))
            protocol = str(item.get("protocol", ""))
            if protocol.startswith("amqp"):
                amqp_ports.setdefault(node, set()).add(port)
            elif protocol == scheme:
                api[node] = (str(item.get("ip_address", "")), port)
        self._amqp_ports = amqp_ports
        for node, (address, port) in api.items():
            host = address if address not in _ANY_ADDRESS else self._host_of(node, amqp_ports)
            if host:
                shown = f"[{host}]" if ":" in host else host
                self._endpoints[node] = f"{scheme}://{shown}:{port}"

    def uri_index_of(self, node: str) -> int | None:
        """Which of the run's node URIs (``amqp_nodes``, by position) reaches ``node``, from
        the listeners the last sample read; None when none does or it cannot be told."""
        ports = self._amqp_ports.get(node, set())
        host = self._host_of(node, self._amqp_ports)
        for index, (uri_host, port) in enumerate(self._amqp_nodes):
            if port in ports and uri_host == host:
                return index
        return None

    def _host_of(self, node: str, amqp_ports: Mapping[str, set[int]]) -> str:
        """The host of the run's node URI that reaches ``node`` ('' when none says)."""
        ports = amqp_ports.get(node, set())
        hosts = {host for host, port in self._amqp_nodes if port in ports}
        sharing = [other for other, theirs in amqp_ports.items() if theirs & ports]
        if len(hosts) == 1 and len(sharing) == 1:  # the port is this node's alone
            return hosts.pop()
        # nodes on several hosts listen on the same port: the one named like the host
        named = node.partition("@")[2]
        matching = [host for host in hosts if host == named or host.split(".")[0] == named]
        return matching[0] if len(matching) == 1 else ""

    async def _fail_over(self, reason: str) -> bool:
        """Move to the first other node's API that answers (running nodes first, by the
        last sample); False, staying put, when none does."""
        running = {n.name for n in self._last.nodes if n.running} if self._last else set()
        others = sorted(
            (
                (node, url)
                for node, url in self._endpoints.items()
                if node != self.node and url != self.base_url
            ),
            key=lambda item: item[0] not in running,
        )
        for _node, url in others:
            try:
                async with asyncio.timeout(min(self.timeout, _FAILOVER_PROBE_S)):
                    response = await self._client.get(
                        f"{url}/api/overview", params={"columns": "node"}
                    )
                answer = response.json() if response.status_code == 200 else None
            except (TimeoutError, httpx.HTTPError, ValueError):
                continue
            if not isinstance(answer, Mapping) or not answer.get("node"):
                continue
            self.failovers.append(
                Failover(time.time(), self.node, str(answer["node"]), self.base_url, url, reason)
            )
            self.base_url, self.node = url, str(answer["node"])
            return True
        return False

    def _stale(self, reason: str) -> BrokerSample:
        return BrokerSample.stale_since(
            self._last,
            source="management",
            statistics_interval=self._interval,
            reason=reason,
            now=time.time(),
        )

    # -- requests ------------------------------------------------------------------------

    async def _request(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        method: str = "GET",
        body: Any = None,
    ) -> httpx.Response:
        """``method`` ``path``; the whole request (not each read) is bounded by ``timeout``."""
        url = f"{self.base_url}{path}"
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._client.request(method, url, params=params, json=body)
        except (TimeoutError, httpx.TimeoutException):
            raise ManagementAnswerError(
                f"management API: no answer within {self.timeout:g} s from {self.base_url}",
                unreachable=True,
            ) from None
        except httpx.ConnectError as exc:
            raise ManagementAnswerError(
                f"management API: cannot connect to {self.base_url} ({short_error(exc)})",
                unreachable=True,
            ) from None
        except httpx.HTTPError as exc:
            raise ManagementAnswerError(
                f"management API: {type(exc).__name__} from {self.base_url} ({short_error(exc)})",
                unreachable=isinstance(exc, httpx.TransportError),
            ) from None
        if response.status_code == 401:
            raise ManagementAnswerError(
                f"management API: 401 unauthorized for user {self.username}", status=401
            )
        return response

    async def _get_json(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        repeated_keys: bool = False,
    ) -> Any:
        """The JSON answer of ``path``; ``repeated_keys`` keeps every value of a key an
        object holds twice (see ``_merge_repeated_keys``) instead of the last one."""
        response = await self._request(path, params)
        if response.status_code == 404:
            raise ManagementAnswerError(f"management API: 404 not found for {path}", status=404)
        if response.status_code >= 400:
            raise ManagementAnswerError(
                f"management API: {response.status_code} "
                f"{response.reason_phrase.lower() or 'error'} for {path}",
                status=response.status_code,
                unreachable=response.status_code in _GATEWAY_TROUBLE,
            )
        return _json_of(response, path, repeated_keys=repeated_keys)

    def _history_params(self, prefix: str, interval: float) -> dict[str, str]:
        # Enough one-second history to hold three collections, so two gaps can be seen.
        return {f"{prefix}_age": str(int(max(12.0, 3 * interval)) + 1), f"{prefix}_incr": "1"}

    async def _read_overview(self) -> Any:
        return await self._get_json("/api/overview", {"columns": _OVERVIEW_COLUMNS})

    async def _read_nodes(self) -> list[Mapping[str, Any]]:
        nodes = await self._get_json(
            "/api/nodes",
            {"columns": _NODE_COLUMNS} | self._history_params("node_stats", self._node_interval),
        )
        if not isinstance(nodes, list) or not all(isinstance(n, Mapping) for n in nodes):
            raise ManagementAnswerError("management API: /api/nodes is not a list of nodes")
        for node in nodes:
            details = node.get("context_switches_details")
            if node.get("running", True) and isinstance(details, Mapping):
                times = _busiest_history({"context_switches_details": details})
                if times:
                    self._last_node_collection = times[-1]
                    self._node_interval = interval_from_collections(times) or self._node_interval
                break
        return nodes

    async def _read_queues(self) -> list[Mapping[str, Any]]:
        path = f"/api/queues/{quote(self.vhost, safe='')}"
        params = {"columns": _QUEUE_COLUMNS}
        names = self.queue_names
        if names is not None and not names:
            return []
        if names is not None:
            pattern = "^(" + "|".join(re.escape(n) for n in names) + ")$"
            if len(quote(pattern)) < _MAX_REGEX_URL:
                params |= {
                    "name": pattern,
                    "use_regex": "true",
                    "page": "1",
                    "page_size": "500",
                }
        answer = await self._get_json(path, params, repeated_keys=True)
        items = answer.get("items") if isinstance(answer, Mapping) else answer
        if not isinstance(items, list) or not all(isinstance(q, Mapping) for q in items):
            raise ManagementAnswerError(f"management API: {path} is not a list of queues")
        if names is not None:
            wanted = set(names)
            items = [q for q in items if q.get("name") in wanted]
        return items

    async def _read_alarms(self) -> dict[str, set[str]]:
        """Node name -> alarmed resources ("memory", "disk"), from the prompt health check.

        RabbitMQ 3.10 names them ``memory`` and ``disk space``."""
        path = "/api/health/checks/alarms"
        response = await self._request(path)
        # 503 is the answer "there are alarms"; anything else but 200 is trouble.
        if response.status_code not in (200, 503):
            raise ManagementAnswerError(f"management API: {response.status_code} for {path}")
        body = _json_of(response, path)
        if not isinstance(body, Mapping) or "status" not in body:
            raise ManagementAnswerError("management API: /api/health/checks/alarms gave no status")
        alarmed: dict[str, set[str]] = {}
        for alarm in body.get("alarms") or []:
            if isinstance(alarm, Mapping):
                node = str(alarm.get("node", ""))
                resource = (
                    str(alarm.get("resource", "")).split()[0] if alarm.get("resource") else ""
                )
                alarmed.setdefault(node, set()).add(resource)
        return alarmed

    # -- turning answers into a sample ---------------------------------------------------

    def _queue_sample(
        self, queue: Mapping[str, Any], now: float, running: frozenset[str] | None
    ) -> QueueSample:
        name = str(queue.get("name", ""))
        vhost = str(queue.get("vhost", self.vhost))
        stats = queue.get("message_stats")
        stats = stats if isinstance(stats, Mapping) else {}
        published = _number(stats.get("publish"))
        delivered = _number(stats.get("deliver_get"))
        history = self._queue_counts.setdefault((vhost, name), [])
        span = max(DEFAULT_NODE_STATS_INTERVAL, self._interval) + 0.5
        old = [entry for entry in history if now - entry[0] >= span]
        before = old[-1] if old else None
        history[:] = [
            *old[-1:],
            *(e for e in history if now - e[0] < span),
            (now, published, delivered),
        ]
        return QueueSample(
            name=name,
            vhost=vhost,
            type=str(queue.get("type", "classic")),
            ready=_number(queue.get("messages_ready")) or 0,
            unacked=_number(queue.get("messages_unacknowledged")) or 0,
            consumers=_number(queue.get("consumers")) or 0,
            publish_rate=_counter_rate(before, now, published, 1),
            deliver_rate=_counter_rate(before, now, delivered, 2),
            **_placement(queue, running),
        )

    def _build(
        self,
        overview: Any,
        nodes: Sequence[Mapping[str, Any]],
        queues: Sequence[Mapping[str, Any]],
        channels: Any,
        connections: Any,
        alarms: Mapping[str, set[str]],
        streams: StreamFigures | None = None,
    ) -> BrokerSample:
        if not isinstance(overview, Mapping):
            raise ManagementAnswerError("management API: /api/overview is not an object")
        if not isinstance(channels, list) or not isinstance(connections, list):
            raise ManagementAnswerError(
                "management API: channels or connections answer is not a list"
            )
        now = time.time()
        node_figures_at = (
            figures_time(self._last_node_collection, self._node_interval, now)
            if self._last_node_collection is not None
            else None
        )
        node_samples = tuple(
            NodeSample(
                name=str(node.get("name", "")),
                mem_used=_number(node.get("mem_used")),
                mem_limit=_number(node.get("mem_limit")),
                mem_alarm=bool(node.get("mem_alarm", False)),
                disk_free=_number(node.get("disk_free")),
                disk_free_limit=_number(node.get("disk_free_limit")),
                disk_alarm=bool(node.get("disk_free_alarm", False)),
                fd_used=_number(node.get("fd_used")),
                fd_total=_number(node.get("fd_total")),
                sockets_used=_number(node.get("sockets_used")),
                sockets_total=_number(node.get("sockets_total")),
                running=bool(node.get("running", True)),
                figures_at=node_figures_at,
                partitions=_names(node.get("partitions")),
            )
            for node in nodes
        )
        running = frozenset(n.name for n in node_samples if n.running) if node_samples else None
        queue_samples = tuple(self._queue_sample(q, now, running) for q in queues)
        stats = overview.get("message_stats") or {}
        listed_connections = [c for c in connections if isinstance(c, Mapping)]
        listed_channels = [c for c in channels if isinstance(c, Mapping)]
        flow = FlowStates.count(listed_connections, listed_channels)
        node_samples = tuple(flow.on(node) for node in node_samples)
        # Queue and channel figures were computed at some point in the last interval; with
        # no clock to read, say they are half an interval old, the expected age.
        figures_at = now - self._interval / 2
        return BrokerSample(
            source="management",
            taken_at=now,
            figures_at=min(figures_at, now),
            statistics_interval=self._interval,
            nodes=_with_alarms(node_samples, alarms),
            queues=queue_samples,
            publish_rate=_rate(stats, "publish"),
            confirm_rate=_rate(stats, "confirm"),
            deliver_rate=_rate(stats, "deliver_get"),
            ack_rate=_rate(stats, "ack"),
            redeliver_rate=_rate(stats, "redeliver"),
            unconfirmed=sum(_number(c.get("messages_unconfirmed")) or 0 for c in listed_channels),
            unacked=sum(_number(c.get("messages_unacknowledged")) or 0 for c in listed_channels),
            connections=len(listed_connections),
            connections_blocked=flow.total("connections", "blocked"),
            connections_blocking=flow.total("connections", "blocking"),
            connections_flow=flow.total("connections", "flow"),
            channels=len(listed_channels),
            channels_flow=flow.total("channels", "flow"),
            broker_version=str(overview.get("rabbitmq_version", "")),
            erlang_version=str(overview.get("erlang_version", "")),
            **self._run_figures(listed_connections, listed_channels, now),
            **_stream_sample_figures(streams),
        )

    def _run_figures(
        self,
        connections: Sequence[Mapping[str, Any]],
        channels: Sequence[Mapping[str, Any]],
        now: float,
    ) -> dict[str, Any]:
        """The BrokerSample ``run_*`` figures: the run's publishers in flow and its
        messages on the broker's side, from the connections and channels its tag names
        (none without a tag; its messages' counts not before any of its channels is seen)."""
        if not self.run_tag:
            return {}
        clients: dict[str, tuple[ClientRole, int]] = {}
        in_flow: list[int] = []
        publishers = 0
        for connection in connections:
            client = run_client(str(connection.get("user_provided_name") or ""), self.run_tag)
            if client is None:
                continue
            clients[str(connection.get("name", ""))] = client
            role, client_id = client
            if role == "publisher":
                publishers += 1
                if connection.get("state") == "flow":
                    in_flow.append(client_id)
        unconfirmed = unacked = 0
        for channel in channels:
            details = channel.get("connection_details")
            owner = str(details.get("name", "")) if isinstance(details, Mapping) else ""
            client = clients.get(owner)
            if client is None:
                continue
            unconfirmed += _number(channel.get("messages_unconfirmed")) or 0
            unacked += _number(channel.get("messages_unacknowledged")) or 0
            stats = channel.get("message_stats")
            stats = stats if isinstance(stats, Mapping) else {}
            self._run_channels[str(channel.get("name", ""))] = _ChannelCounts(
                _number(stats.get("publish")) or 0,
                _number(stats.get("deliver_get")) or 0,
                _number(stats.get("ack")) or 0,
            )
        flow = {
            "run_publishers": publishers,
            "run_publishers_flow": len(in_flow),
            "publishers_in_flow": tuple(sorted(in_flow)),
        }
        if not self._run_channels:
            # None of the run's AMQP 0.9.1 channels seen yet (its clients still connecting,
            # or speaking the stream protocol, whose connections have no such channels):
            # what the broker took in is not known, rather than nothing.
            return flow
        accepted = sum(c.published for c in self._run_channels.values())
        delivered = sum(c.delivered for c in self._run_channels.values())
        acked = sum(c.acked for c in self._run_channels.values())
        span = _RUN_RATE_INTERVALS * self._interval
        history = self._run_history
        older = [entry for entry in history if now - entry[0] >= span - 0.25]
        before = older[-1] if older else None
        history[:] = [*older[-1:], *(e for e in history if now - e[0] < span - 0.25)]
        history.append((now, accepted, delivered, acked))

        def rate(index: int, count: int) -> float | None:
            if before is None or now <= before[0]:
                return None
            return max(0, count - before[index]) / (now - before[0])

        return {
            **flow,
            "run_accepted": accepted,
            "run_accept_rate": rate(1, accepted),
            "run_unconfirmed": unconfirmed,
            "run_delivered": delivered,
            "run_deliver_rate": rate(2, delivered),
            "run_acked": acked,
            "run_ack_rate": rate(3, acked),
            "run_unacked": unacked,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class _ChannelCounts:
    """One of the run's channels' message counters at its last poll."""

    published: int
    delivered: int
    acked: int


@dataclasses.dataclass(frozen=True, slots=True)
class FlowStates:
    """Connections and channels by node and state, from the listings of one poll."""

    #: (kind, node, state) -> how many; kind is "connections" or "channels".
    counts: Mapping[tuple[str, str, str], int]

    @classmethod
    def count(
        cls, connections: Sequence[Mapping[str, Any]], channels: Sequence[Mapping[str, Any]]
    ) -> FlowStates:
        counts: dict[tuple[str, str, str], int] = {}
        for kind, listed in (("connections", connections), ("channels", channels)):
            for item in listed:
                key = (kind, str(item.get("node", "")), str(item.get("state", "")))
                counts[key] = counts.get(key, 0) + 1
        return cls(counts)

    def total(self, kind: str, state: str) -> int:
        return sum(n for (k, _, s), n in self.counts.items() if (k, s) == (kind, state))

    def on(self, node: NodeSample) -> NodeSample:
        """``node`` with its connections and channels by state (a node that is down: None)."""
        if not node.running:
            return node

        def count(kind: str, state: str) -> int:
            return self.counts.get((kind, node.name, state), 0)

        return dataclasses.replace(
            node,
            connections_running=count("connections", "running"),
            connections_flow=count("connections", "flow"),
            connections_blocking=count("connections", "blocking"),
            connections_blocked=count("connections", "blocked"),
            channels_running=count("channels", "running"),
            channels_flow=count("channels", "flow"),
        )


def _stream_sample_figures(streams: StreamFigures | None) -> dict[str, Any]:
    """BrokerSample's ``stream_*`` figures (none when the stream figures were not read)."""
    if streams is None:
        return {}
    return {
        "stream_connections": streams.connections,
        "stream_consumers": streams.consumers,
        "stream_offset_lag": streams.offset_lag if streams.consumers else None,
        "stream_offset_lag_max": streams.offset_lag_max,
        "stream_publishers": streams.publishers,
        "stream_errored": streams.errored,
    }


def _counter_rate(
    before: tuple[float, int | None, int | None] | None, now: float, count: int | None, index: int
) -> float | None:
    if before is None or count is None or now <= before[0]:
        return None
    previous = before[index]
    if previous is None or count < previous:  # a queue deleted and declared again
        return None
    return (count - previous) / (now - before[0])


def _with_alarms(
    nodes: Sequence[NodeSample], alarms: Mapping[str, set[str]]
) -> tuple[NodeSample, ...]:
    """Nodes with their alarm flags set from the prompt health check.

    The health check is the truth both ways: it raises an alarm seconds before
    ``/api/nodes`` does, and clears it seconds before too.
    """
    return tuple(
        dataclasses.replace(
            node,
            mem_alarm="memory" in alarms.get(node.name, set()),
            disk_alarm="disk" in alarms.get(node.name, set()),
        )
        for node in nodes
    )


def _names(value: Any) -> tuple[str, ...]:
    """Node names from a JSON list of them (anything else: none)."""
    if not isinstance(value, list):
        return ()
    return tuple(str(item) for item in value if isinstance(item, str))


def _merge_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose repeated keys keep every value.

    RabbitMQ 3.10 answers a queue with its live record and its cached statistics in one
    object, and while a member node goes down or comes back the two disagree and a key
    comes twice (``"online": [n1, n2], ..., "online": [n1, n2, n3]``), the stale one first
    or last. Lists of nodes are merged (``_placement`` then keeps the running nodes); every
    value is kept under ``_REPEATED`` for ``_placement`` to choose a leader that runs.
    """
    merged: dict[str, Any] = {}
    repeated: dict[str, list[Any]] = {}
    for key, value in pairs:
        if key not in merged:
            merged[key] = value
            continue
        repeated.setdefault(key, [merged[key]]).append(value)
        if isinstance(merged[key], list) and isinstance(value, list):
            merged[key] = [*merged[key], *(item for item in value if item not in merged[key])]
    if repeated:
        merged[_REPEATED] = repeated
    return merged


def _placement(queue: Mapping[str, Any], running: frozenset[str] | None) -> dict[str, Any]:
    """A queue's leader, members, online members and synchronised mirrors (QueueSample).

    Quorum and stream queues say ``leader``, ``members`` and ``online``; a classic queue
    says its ``node`` (the master) and, mirrored, ``slave_nodes`` and
    ``synchronised_slave_nodes``. ``running`` (the nodes ``/api/nodes`` says run) drops a
    down node the queue's cached statistics still name, so a killed member is never shown
    online, nor a killed master's old mirror as a mirror.
    """

    def up(nodes: tuple[str, ...]) -> tuple[str, ...]:
        return nodes if running is None else tuple(n for n in nodes if n in running)

    repeated = queue.get(_REPEATED)
    repeated = repeated if isinstance(repeated, Mapping) else {}

    def one_node(key: str) -> str:
        candidates = [v for v in repeated.get(key, [queue.get(key)]) if isinstance(v, str)]
        return next(iter(up(tuple(candidates))), candidates[0] if candidates else "")

    if "members" in queue:
        leader = one_node("leader") or one_node("node")
        listed = _names(queue.get("members"))
        members = tuple(dict.fromkeys([leader, *listed] if leader in listed else listed))
        return {
            "leader": leader,
            "members": members,
            "online": up(tuple(n for n in members if n in _names(queue.get("online")))),
            "state": str(queue.get("state") or ""),
        }
    master = one_node("node")
    mirrors = up(_names(queue.get("slave_nodes")))
    return {
        "leader": master,
        "members": tuple(dict.fromkeys(n for n in (master, *mirrors) if n)),
        "online": up(tuple(n for n in (master, *mirrors) if n)),
        "synchronised": tuple(
            n for n in up(_names(queue.get("synchronised_slave_nodes"))) if n in mirrors
        ),
        "state": str(queue.get("state") or ""),
    }


def _json_of(response: httpx.Response, path: str, *, repeated_keys: bool = False) -> Any:
    try:
        if repeated_keys:
            return json.loads(response.text, object_pairs_hook=_merge_repeated_keys)
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ManagementAnswerError(
            f"management API: answer for {path} is not JSON "
            f"({response.headers.get('content-type', 'no content type')})"
        ) from None


def _json_reason(response: httpx.Response) -> str:
    """The ``reason`` of a management API error answer, on one line ('' when none)."""
    try:
        answer = response.json()
    except ValueError:
        return ""
    reason = answer.get("reason", "") if isinstance(answer, Mapping) else ""
    return " ".join(str(reason).split())
