"""The run's exchange, queues and bindings: declared before workers start, deleted on request.

This is the slow path (a handful of declarations per run), so it uses aio-pika. It also
answers "can this broker take this spec?" before any load starts: the broker must be
reachable with the given credentials and vhost, queues that already exist must have the
same type and arguments, and the broker must have sockets for every client connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractConnection, ExchangeType
from tenacity import AsyncRetrying, retry_if_result, stop_after_delay, wait_fixed

from flowdeck.collectors import ManagementAnswerError, ManagementCollector, NodeCapacity
from flowdeck.collectors.broker_uri import parse_broker_uri
from flowdeck.engine.amqp.connection import tls_advice, tls_hint
from flowdeck.engine.errors import BrokerUnavailable, FlowdeckError, SpecError
from flowdeck.engine.spec import PREDECLARED_EXCHANGES, RunSpec
from flowdeck.engine.spec import UNCHECKED_CONNECTIONS_LIMIT as UNCHECKED_CONNECTIONS_LIMIT
from flowdeck.engine.tls import context_for_uri

CONNECT_TIMEOUT = 10.0

# aiormq logs a failed connect at ERROR before raising it; flowdeck reports the exception
# itself as one line, so without a handler of the application's the log must not reach
# stderr through logging's last-resort handler (a library's NullHandler, as logging advises).
for _library in ("aiormq", "aio_pika"):
    logging.getLogger(_library).addHandler(logging.NullHandler())


def queue_arguments(spec: RunSpec) -> dict[str, Any]:
    """The x-arguments a queue of this spec is declared with."""
    args: dict[str, Any] = dict(spec.queue_args)
    if spec.queue_type != "classic":
        args["x-queue-type"] = spec.queue_type
    if spec.lazy:
        args["x-queue-mode"] = "lazy"
    if spec.stream_max_bytes:
        args["x-max-length-bytes"] = spec.stream_max_bytes
    if spec.stream_max_age:
        args["x-max-age"] = spec.stream_max_age
    if spec.stream_segment_bytes:
        args["x-stream-max-segment-size-bytes"] = spec.stream_segment_bytes
    if spec.quorum_size:
        args["x-quorum-initial-group-size"] = spec.quorum_size
    if spec.max_priority:
        args["x-max-priority"] = spec.max_priority
    if spec.dead_letter_queue:  # the fanout exchange of its name (see declare)
        args["x-dead-letter-exchange"] = spec.dead_letter_queue
    if spec.leader_locator:
        if spec.queue_type == "classic":  # RabbitMQ 3.10 places classic masters by this one
            args["x-queue-master-locator"] = _MASTER_LOCATORS[spec.leader_locator]
        else:
            args["x-queue-leader-locator"] = spec.leader_locator
    return args


#: Classic queues' names for the leader locators (RabbitMQ 3.10's x-queue-master-locator).
_MASTER_LOCATORS = {"client-local": "client-local", "balanced": "min-masters"}


def mirroring_policy(spec: RunSpec) -> tuple[str, dict[str, Any]] | None:
    """The policy that mirrors the run's classic queues (name, body for the management
    API), or None when the spec mirrors nothing: ha-mode exactly with ``mirroring`` copies
    and automatic sync, as the seed's mirrored set-up (replication factor 2)."""
    if not spec.mirroring:
        return None
    names = "|".join(re.escape(name) for name in spec.queue_names)
    body = {
        "pattern": f"^(?:{names})$",
        "apply-to": "queues",
        "priority": 100,
        "definition": {
            "ha-mode": "exactly",
            "ha-params": spec.mirroring,
            "ha-sync-mode": "automatic",
        },
    }
    return f"flowdeck-{spec.name}-mirroring", body


def check_queue_setup(spec: RunSpec, nodes: int) -> None:
    """Refuse replication the broker's ``nodes`` running nodes cannot give (SpecError, one
    line, exit 2): mirroring on one node, more copies or quorum members than nodes."""
    if spec.mirroring and nodes < 2:
        raise SpecError(
            "mirroring",
            f"mirroring needs a cluster, and the broker runs {nodes} node: start one with "
            "`flowdeck broker start --nodes 3` or set mirroring = 0",
        )
    if spec.mirroring > nodes:
        raise SpecError(
            "mirroring",
            f"mirroring = {spec.mirroring} copies needs as many nodes, the broker runs {nodes}; "
            f"set mirroring to 2..{nodes}",
        )
    if spec.quorum_size > nodes:
        raise SpecError(
            "quorum_size",
            f"quorum_size = {spec.quorum_size} members needs as many nodes, the broker runs "
            f"{nodes}; set quorum_size to at most {nodes}, or 0 for every node",
        )


def broker_address(uri: str) -> str:
    """``host:port/vhost`` of an AMQP URI, for messages (never the password)."""
    return parse_broker_uri(uri).address


#: How long an AMQP connect may take before flowdeck looks whether the port speaks HTTP.
HTTP_PROBE_AFTER = 1.0
#: RabbitMQ's HTTP ports, named when the uri points at one.
HTTP_PORTS = {15672: "management API (HTTP)", 15671: "management API (HTTPS)", 15692: "Prometheus"}


async def speaks_http(host: str, port: int, timeout: float = 3.0) -> bool:
    """Whether ``host:port`` answers an HTTP request as an HTTP server does. An AMQP port
    sent to by mistake (a management or Prometheus port) waits seconds for a whole AMQP
    greeting before it gives up; this tells at once."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(b"HEAD / HTTP/1.0\r\nHost: flowdeck\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(5), timeout)
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return answer == b"HTTP/"


def _http_port(where: str, port: int) -> BrokerUnavailable:
    known = HTTP_PORTS.get(port)
    what = f"RabbitMQ's {known} port" if known else "an HTTP server's port"
    return BrokerUnavailable(
        f"{where} answers HTTP, not AMQP: {port} is {what}; give the AMQP port in the uri, "
        "usually 5672 (5671 for amqps)"
    )


async def connect(uri: str, *, timeout: float = CONNECT_TIMEOUT) -> AbstractConnection:
    """An aio-pika connection, or BrokerUnavailable saying what to check. A connect still
    going after :data:`HTTP_PROBE_AFTER` s is raced against :func:`speaks_http`, so a uri
    with the management port fails in about a second, naming it."""
    parsed = parse_broker_uri(uri)
    where = parsed.address
    try:
        context = context_for_uri(uri)  # TlsError (a FlowdeckError) for bad TLS files
        connecting = asyncio.ensure_future(
            asyncio.wait_for(
                aio_pika.connect(str(parsed), timeout=timeout, ssl_context=context), timeout + 1
            )
        )
        done, _ = await asyncio.wait({connecting}, timeout=HTTP_PROBE_AFTER)
        if not done and await speaks_http(parsed.host, parsed.effective_port):
            connecting.cancel()
            with contextlib.suppress(BaseException):
                await connecting
            raise _http_port(where, parsed.effective_port)
        return await connecting
    except ssl.SSLError as exc:
        raise BrokerUnavailable(f"TLS handshake with {where} failed: {tls_advice(exc)}") from None
    except TimeoutError:
        raise BrokerUnavailable(
            f"broker at {where} did not answer within {timeout:g} s; is it running and reachable?"
        ) from None
    except aiormq.exceptions.ProbableAuthenticationError:
        raise BrokerUnavailable(
            f"broker at {where} refused the login of user "
            f"{parsed.login!r}; check the user and password "
            "in the uri"
        ) from None
    except aiormq.exceptions.InvalidFrameError:
        raise BrokerUnavailable(
            f"broker at {where} refused the connection: the vhost does not exist or the user "
            "may not use it; check the vhost in the uri (%2F is the default vhost '/')"
        ) from None
    except (aiormq.exceptions.AMQPConnectionError, ConnectionError, OSError) as exc:
        hint = tls_hint(str(exc))
        if hint is not None:
            raise BrokerUnavailable(f"TLS handshake with {where} failed: {hint}") from None
        advice = "is RabbitMQ running there?"
        if isinstance(exc, ConnectionRefusedError) or "connect call failed" in str(exc).lower():
            advice = (
                "nothing listens there (connection refused): is RabbitMQ running, and is "
                "that its AMQP port (usually 5672, 5671 for amqps)?"
            )
        if not parsed.tls and "reset" in str(exc).lower():
            # A TLS listener drops a plain AMQP greeting at once.
            advice = "if that port speaks TLS, use amqps:// (usually port 5671)"
        raise BrokerUnavailable(
            f"cannot connect to the broker at {where}: {exc}; {advice}"
        ) from None
    except aiormq.exceptions.AMQPError as exc:
        raise BrokerUnavailable(f"broker at {where} failed the handshake: {exc}") from None


#: What a node can still take, from the management API's /api/nodes.
Capacity = NodeCapacity

_Answer = TypeVar("_Answer")

#: How often figures that are not yet good enough are read again.
READ_AGAIN_EVERY = 0.5


class CapacityUnknown(Exception):
    """The management API did not give the nodes' socket figures; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _unknown(error: ManagementAnswerError) -> CapacityUnknown:
    if error.status is not None:
        return CapacityUnknown(f"it answered HTTP {error.status}")
    message = str(error).removeprefix("management API: ")
    return CapacityUnknown(tls_hint(message) or message)


async def _read_until(
    read: Callable[[], Awaitable[_Answer]],
    good: Callable[[_Answer], bool],
    *,
    seconds: float,
) -> _Answer:
    """``read()`` again every :data:`READ_AGAIN_EVERY` seconds while ``good`` says no, for
    up to ``seconds`` from the first read; the last answer, good or not. An exception from
    ``read`` ends it at once.
    """
    retrying = AsyncRetrying(
        retry=retry_if_result(lambda answer: not good(answer)),
        wait=wait_fixed(READ_AGAIN_EVERY),
        stop=stop_after_delay(seconds),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    answer: _Answer = await retrying(read)
    return answer


async def node_capacity(
    management_url: str,
    username: str,
    password: str,
    *,
    timeout: float = 5.0,
    verify: ssl.SSLContext | bool = True,
    first_figures_wait: float = 8.0,
) -> list[Capacity]:
    """Each running node's socket use from the management API.

    Raises :class:`CapacityUnknown` with the reason when the API does not answer well (the
    check is a courtesy: the run does not depend on the API). A node that has just started
    lists no socket figures until its first statistics arrive (about 5 s here), so an answer
    without them is asked again for up to ``first_figures_wait`` seconds.
    """
    async with ManagementCollector(
        management_url, username=username, password=password, timeout=timeout, verify=verify
    ) as api:
        return await socket_capacity(api, first_figures_wait=first_figures_wait)


async def socket_capacity(
    api: ManagementCollector, *, first_figures_wait: float = 8.0
) -> list[Capacity]:
    """:func:`node_capacity` through a management client the caller already has."""
    try:
        figures = await _read_until(
            api.socket_figures, lambda f: f.complete, seconds=first_figures_wait
        )
    except ManagementAnswerError as error:
        raise _unknown(error) from None
    if not figures.nodes:
        raise CapacityUnknown("its nodes list no socket figures yet")
    return list(figures.nodes)


def amqp_port(uri: str) -> int:
    return parse_broker_uri(uri).effective_port


def connections_needed(spec: RunSpec) -> int:
    """One connection per publisher and per consumer, as PerfTest does, or per group of
    ``publisher_channels`` / ``consumer_channels`` of them (a worker's last group may be
    short: counted whole), and one per worker on the dead-letter queue."""
    publishers = -(-spec.publishers // spec.publisher_channels)
    consumers = -(-spec.consumers // spec.consumer_channels)
    return publishers + consumers + (max(1, spec.workers) if spec.dead_letter_queue else 0)


def free_sockets(nodes: Iterable[Capacity]) -> tuple[int, int]:
    """Free and total sockets over ``nodes``."""
    nodes = list(nodes)
    free = sum(max(0, n.sockets_total - n.sockets_used) for n in nodes)
    return free, sum(n.sockets_total for n in nodes)


def capacity_fits(spec: RunSpec, nodes: Iterable[Capacity]) -> bool:
    """Whether the broker has a socket for every connection of the spec (no figures: yes)."""
    nodes = list(nodes)
    return not nodes or connections_needed(spec) <= free_sockets(nodes)[0]


def check_capacity(spec: RunSpec, nodes: Iterable[Capacity]) -> None:
    """Refuse a spec that needs more connections than the broker has sockets for."""
    nodes = list(nodes)
    if capacity_fits(spec, nodes):
        return
    free, total = free_sockets(nodes)
    needed = connections_needed(spec)
    raise FlowdeckError(
        f"the run needs {needed} connections ({spec.publishers} publishers + "
        f"{spec.consumers} consumers) but the broker has {free} of {total} sockets free; "
        "lower publishers/consumers (e.g. --scale 0.1) or raise the broker's file "
        "descriptor limit"
    )


async def settled_capacity(
    spec: RunSpec,
    api: ManagementCollector,
    *,
    settle_seconds: float,
    on_wait: Callable[[list[Capacity]], None] | None = None,
) -> list[Capacity]:
    """The nodes' socket figures, read again while they say the spec does not fit.

    The management API refreshes a node's figures every ``collect_statistics_interval``, so
    right after a socket-heavy run it still counts the sockets that run has closed. A
    refusal is only worth giving on figures that have had time to catch up: while the spec
    does not fit, the figures are read again every half second for up to ``settle_seconds``
    (``on_wait`` is told once, with the first figures, that this is happening). The last
    figures are returned, fitting or not. Raises :class:`CapacityUnknown` like
    :func:`node_capacity`. ``api`` is the caller's management client, asked every time.
    """

    async def read() -> list[Capacity]:
        return await socket_capacity(api)

    nodes = await read()
    if capacity_fits(spec, nodes):
        return nodes
    if on_wait is not None:
        on_wait(nodes)
    # The window opens at the first answer, which may itself have waited for a new node.
    await asyncio.sleep(READ_AGAIN_EVERY)
    return await _read_until(
        read,
        lambda again: capacity_fits(spec, again),
        seconds=max(0.0, settle_seconds - READ_AGAIN_EVERY),
    )


def _exchange_type(spec: RunSpec) -> ExchangeType:
    return ExchangeType(spec.exchange_type)


def binding_keys(spec: RunSpec, queue_index: int) -> list[str]:
    """Routing keys a queue is bound with on a named exchange.

    Publishers route by ``routing_key`` when the spec sets one, else by their queue's name;
    binding with both reaches the queue either way (fanout and headers ignore the key).
    """
    keys = [spec.queue_name(queue_index)]
    if spec.routing_key and spec.routing_key not in keys:
        keys.append(spec.routing_key)
    return keys


async def broker_version(uri: str) -> str:
    """The broker's version as its AMQP server properties say it (``""`` when they do not),
    or BrokerUnavailable saying what to check."""
    connection = await connect(uri)
    try:
        underlay = connection.transport
        properties = underlay.connection.server_properties if underlay is not None else {}
        version = properties.get("version", "")
    finally:
        await connection.close()
    return version.decode() if isinstance(version, bytes) else str(version)


@dataclass(frozen=True, slots=True)
class Declared:
    """What :func:`declare` made that was not on the broker before: what a run that fails
    to start deletes again (queues someone else had are left alone)."""

    queues: tuple[str, ...] = ()
    exchange: str = ""
    #: The run's dead-letter exchange, when this run made it.
    dead_letter_exchange: str = ""


async def _exists(connection: AbstractConnection, name: str, *, exchange: bool = False) -> bool:
    """Whether queue (or exchange) ``name`` is on the broker: a passive declare, on a
    channel of its own since a missing one closes the channel it was asked on."""
    channel = await connection.channel()
    try:
        if exchange:
            await channel.declare_exchange(name, passive=True)
        else:
            await channel.declare_queue(name, passive=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        return False
    with contextlib.suppress(aiormq.exceptions.AMQPError):
        await channel.close()
    return True


async def declare(spec: RunSpec, uri: str) -> Declared:
    """Declare the spec's exchange (if named), queues and bindings; what was made new.

    When a declaration is refused (a queue with other arguments, consumers of another run
    on the queues) what this call made is deleted again before the error is raised: a run
    that does not start leaves nothing on the broker.
    """
    connection = await connect(uri)
    created: list[str] = []
    new_exchange = ""
    try:
        channel = await connection.channel()
        exchange = None
        if spec.exchange:
            predeclared = spec.exchange in PREDECLARED_EXCHANGES
            if not predeclared and not await _exists(connection, spec.exchange, exchange=True):
                new_exchange = spec.exchange
            try:
                exchange = await channel.declare_exchange(
                    spec.exchange,
                    _exchange_type(spec),
                    durable=spec.durable,
                    # amq.* exist already; declaring one for real is refused (ACCESS_REFUSED)
                    passive=predeclared,
                )
            except aiormq.exceptions.ChannelPreconditionFailed as exc:
                new_exchange = ""
                reason = exc.args[0] if exc.args else str(exc)
                # An exchange of the same type made durable elsewhere (PerfTest makes its
                # own, "direct", durable) routes the run's messages just the same: use it.
                channel = await connection.channel()
                try:
                    exchange = await channel.declare_exchange(
                        spec.exchange, _exchange_type(spec), durable=not spec.durable
                    )
                except aiormq.exceptions.ChannelPreconditionFailed:
                    raise FlowdeckError(
                        f"exchange {spec.exchange!r} exists with other settings than the spec "
                        f"({spec.exchange_type}, durable={spec.durable}): {reason}; "
                        "delete it or name another exchange"
                    ) from None
        dead_letter_exchange = ""
        if spec.dead_letter_queue:
            dead_letter_exchange = await _declare_dead_letters(connection, spec, created)
        arguments = queue_arguments(spec)
        busy: dict[str, int] = {}
        for index, name in enumerate(spec.queue_names):
            existed = await _exists(connection, name)
            try:
                queue = await channel.declare_queue(name, durable=spec.durable, arguments=arguments)
            except aiormq.exceptions.ChannelPreconditionFailed as exc:
                reason = exc.args[0] if exc.args else str(exc)
                raise FlowdeckError(
                    f"queue {name!r} exists with other settings than the spec ({reason}); "
                    "delete it (flowdeck run --cleanup deletes a run's queues at the end) or "
                    "use another queue_pattern"
                ) from None
            except aiormq.exceptions.AMQPError as exc:
                raise FlowdeckError(
                    f"the broker refused to declare queue {name!r}: {exc}"
                ) from None
            if not existed:
                created.append(name)
            consumers = queue.declaration_result.consumer_count
            if consumers:
                busy[name] = consumers
            if exchange is not None:
                for key in binding_keys(spec, index):
                    await queue.bind(exchange, routing_key=key)
        refuse_busy_queues(spec, busy)
        return Declared(tuple(created), new_exchange, dead_letter_exchange)
    except BaseException:
        with contextlib.suppress(Exception):
            await _undo(connection, Declared(tuple(created), new_exchange, dead_letter_exchange))
        raise
    finally:
        with contextlib.suppress(Exception):
            await connection.close()


async def _declare_dead_letters(
    connection: AbstractConnection, spec: RunSpec, created: list[str]
) -> str:
    """The run's dead-letter queue and a fanout exchange of the same name bound to it (every
    queue of the run dead-letters there, whatever its routing key); the exchange's name
    when this call made it, else ''. A queue it made is added to ``created``."""
    name = spec.dead_letter_queue
    new_exchange = "" if await _exists(connection, name, exchange=True) else name
    existed = await _exists(connection, name)
    channel = await connection.channel()
    try:
        exchange = await channel.declare_exchange(name, "fanout", durable=spec.durable)
        queue = await channel.declare_queue(name, durable=spec.durable)
    except aiormq.exceptions.AMQPError as exc:
        raise FlowdeckError(
            f"the broker refused the dead-letter queue or exchange {name!r} ({exc}); delete "
            "them or name another dead_letter_queue"
        ) from None
    if not existed:
        created.append(name)
    await queue.bind(exchange, routing_key="")
    return new_exchange


async def _undo(connection: AbstractConnection, declared: Declared) -> None:
    channel = await connection.channel()
    for name in declared.queues:
        try:
            await channel.queue_delete(name)
        except aiormq.exceptions.AMQPError:
            channel = await connection.channel()
    for exchange in (declared.exchange, declared.dead_letter_exchange):
        if exchange:
            await channel.exchange_delete(exchange)


async def undeclare(uris: Sequence[str], declared: Declared) -> None:
    """Delete what :func:`declare` made, through the first of ``uris`` that answers."""
    if not (declared.queues or declared.exchange or declared.dead_letter_exchange):
        return
    connection = await connect_any(uris)
    try:
        await _undo(connection, declared)
    finally:
        await connection.close()


def refuse_busy_queues(spec: RunSpec, busy: Mapping[str, int]) -> None:
    """Refuse a run whose consumers would share a queue with consumers already on it
    (SpecError on ``queue_pattern``, exit 2): another run on the default queue names, say.
    They would take a share of the run's messages, which the run then counts as lost, and
    hand it messages it never published. A run with no consumers of its own only publishes
    into the queue, as a load for someone else's consumers may well be meant to."""
    if not busy or spec.consumers == 0:
        return
    first, count = next(iter(busy.items()))
    others = f" (and {len(busy) - 1} more of the run's queues)" if len(busy) > 1 else ""
    raise SpecError(
        "queue_pattern",
        f"queue {first!r} already has {count} consumer{'s' if count != 1 else ''}{others}, "
        "not of this run (another run on the same queues?): they would take a share of "
        "this run's messages, counted as lost; stop them, or give this run its own queues "
        "(e.g. --queue-pattern 'mytest-%d')",
    )


async def connect_any(uris: Sequence[str]) -> AbstractConnection:
    """A connection to the first of ``uris`` that answers (a cluster's nodes in order), or
    the last node's BrokerUnavailable: a run that lost node 1 still cleans up on node 2."""
    refused: BrokerUnavailable | None = None
    for uri in uris:
        try:
            return await connect(uri)
        except BrokerUnavailable as exc:
            refused = exc
    raise refused or BrokerUnavailable("no broker uri to connect to")


async def delete_queues(uri: str | Sequence[str], names: Sequence[str]) -> int:
    """Delete the named queues (missing ones are fine) through the first node of ``uri``
    (one URI or a cluster's) that answers; how many were deleted."""
    connection = await connect_any((uri,) if isinstance(uri, str) else uri)
    deleted = 0
    try:
        channel = await connection.channel()
        for name in names:
            try:
                await channel.queue_delete(name)
                deleted += 1
            except aiormq.exceptions.AMQPError:
                channel = await connection.channel()
    finally:
        await connection.close()
    return deleted


async def messages_left(uri: str | Sequence[str], names: Sequence[str]) -> int:
    """Messages waiting in the named queues now (a passive declare's count: ready ones,
    which a closed consumer's unacked become), through the first node that answers; a
    missing queue holds none."""
    connection = await connect_any((uri,) if isinstance(uri, str) else uri)
    left = 0
    try:
        channel = await connection.channel()
        for name in names:
            try:
                queue = await channel.declare_queue(name, passive=True)
            except aiormq.exceptions.AMQPError:
                channel = await connection.channel()
                continue
            left += queue.declaration_result.message_count or 0
    finally:
        await connection.close()
    return left
