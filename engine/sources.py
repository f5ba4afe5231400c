"""The broker's side of a run: the management API and Prometheus, watched while it goes.

:class:`BrokerSources` owns the broker collectors and their watches. Before the run it
checks, on its own management client, that the management API answers for the run's
broker and that the broker has a socket for every connection (the pre-flight). While the
run goes it hands every broker sample on and turns the samples into events: a source gone
stale or answering again, an alarm raised or cleared, the management API of a dead node
left for another node's (said once per move). At the end it keeps the Prometheus
series of the run window. The controller only wires it: it gives the three callbacks that
take samples, events and the kept series, and publishes them like its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from flowdeck.collectors import (
    Broker,
    BrokerWatch,
    ManagementAnswerError,
    ManagementCollector,
    PrometheusCollector,
    SourceError,
)
from flowdeck.collectors.broker_uri import mask_text
from flowdeck.collectors.management import DEFAULT_STATISTICS_INTERVAL
from flowdeck.collectors.model import BrokerSample
from flowdeck.engine import topology
from flowdeck.engine.errors import FlowdeckError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.sinks import PrometheusRow
from flowdeck.engine.spec import RunSpec
from flowdeck.engine.tls import http_context

#: The stream plugin's default port, used when the management API cannot say.
STREAM_PORT = 5552

__all__ = ["BrokerSources"]


class BrokerSources:
    """The run's broker collectors, their watches and the events they give; see the module
    docstring.

    ``on_sample`` takes every broker sample, before the events it causes; ``on_event`` every
    event (stale, recovered, alarm edges, pre-flight warnings, the kept series);
    ``on_range`` the Prometheus rows kept at the end. ``management`` is a collector to use
    instead of making one (tests that need an odd server); it is closed with the sources.
    ``run_tag`` is the tag in the run's connection names: the management collector tells
    the run's clients by it (BrokerSample's ``run_*`` figures).
    """

    def __init__(
        self,
        spec: RunSpec,
        *,
        broker: Broker,
        on_sample: Callable[[BrokerSample], None],
        on_event: Callable[[RunEvent], None],
        on_range: Callable[[Sequence[PrometheusRow]], None],
        management: ManagementCollector | None = None,
        run_tag: str = "",
    ) -> None:
        self.spec = spec
        self._run_tag = run_tag
        self.broker = broker
        self._uri = broker.uri
        self._vhost = broker.vhost
        self.management_url = broker.usual_management_url
        self._management_user, self._management_password = broker.management_login
        self.prometheus_url = broker.prometheus_url
        self._statistics_interval = broker.statistics_interval
        self._on_sample = on_sample
        self._on_event = on_event
        self._on_range = on_range
        self._management = management
        self._prometheus: PrometheusCollector | None = None
        self._management_mismatch = ""
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._alarms: dict[tuple[str, str], bool] = {}  # (source, alarm): both sources say
        self._stale: dict[str, str] = {}
        self._management_sample: BrokerSample | None = None  # last fresh one
        self._policy = ""  # the mirroring policy applied for the run, removed at its end
        self._failovers_said = 0

    @property
    def management_sample(self) -> BrokerSample | None:
        """The management API's last fresh sample (None before the first)."""
        return self._management_sample

    # -- before the run --------------------------------------------------------------------

    async def _management_client(self) -> ManagementCollector:
        """The one management client of the run: the pre-flight's, then the watch's."""
        if self._management is None:
            # Off the loop: a CA bundle (~75 ms) is read from disk, and a front-end sharing
            # this loop (the cockpit) must keep answering meanwhile.
            verify: ssl.SSLContext | bool = await asyncio.to_thread(http_context, self._uri)
            self._management = ManagementCollector(
                self.management_url,
                username=self._management_user,
                password=self._management_password,
                vhost=self._vhost,
                queue_names=list(self.spec.queue_names),
                verify=verify,
                statistics_interval=self._statistics_interval,
                amqp_nodes=[(node.host, node.effective_port) for node in self.broker.nodes],
                run_tag=self._run_tag,
                # The stream plugin's figures cost three requests a poll: asked for only
                # where the run has streams or speaks their protocol.
                streams=self.spec.queue_type == "stream" or self.spec.protocol == "stream",
            )
        return self._management

    async def _check_management_matches(self, api: ManagementCollector) -> None:
        """Turn the broker panels off, saying why, when the management API answers for a
        broker other than the one the run uses (its AMQP listeners lack the run's port).
        """
        try:
            ports = await api.amqp_listener_ports()
        except ManagementAnswerError:
            return
        port = topology.amqp_port(self._uri)
        if ports and port not in ports:
            self._management_mismatch = (
                f"management API at {self.management_url} belongs to a broker listening for "
                f"AMQP on {', '.join(map(str, sorted(ports)))}, not on {port} as this run's "
                "broker does; broker figures are off for this run: give the right "
                "management URL (--management-url)"
            )

    async def check_capacity(self, *, skip: bool = False) -> None:
        """Refuse a run the broker has no sockets for, on figures fresh enough to trust.

        Figures that say the run does not fit are read again for up to two statistics
        intervals (they may still count the sockets of a run that just ended). When the
        figures cannot be read at all, a run of more than
        ``topology.UNCHECKED_CONNECTIONS_LIMIT`` connections is refused and a smaller one
        goes on with a warning; ``skip`` (``--skip-capacity-check``) turns every refusal
        into a warning.
        """
        api = await self._management_client()
        await self._check_management_matches(api)
        if self._management_mismatch:
            self._capacity_unknown(
                f"the management API at {self.management_url} belongs to another broker", skip
            )
            return
        interval = self._statistics_interval or DEFAULT_STATISTICS_INTERVAL
        needed = topology.connections_needed(self.spec)

        def note_wait(nodes: list[topology.Capacity]) -> None:
            free, total = topology.free_sockets(nodes)
            self._event(
                EventKind.INFO,
                f"the broker shows {free} of {total} sockets free for the run's {needed} "
                f"connections; its figures may be up to {interval:g} s old, so they are read "
                f"again for up to {2 * interval + 1:g} s before the run is refused",
                detail={"sockets_free": free, "sockets_total": total, "needed": needed},
            )

        try:
            if skip:
                nodes = await topology.socket_capacity(api)
            else:
                nodes = await topology.settled_capacity(
                    self.spec, api, settle_seconds=2 * interval + 1, on_wait=note_wait
                )
        except topology.CapacityUnknown as unknown:
            self._capacity_unknown(
                f"management API at {self.management_url}: {unknown.reason}", skip
            )
            return
        if skip and not topology.capacity_fits(self.spec, nodes):
            free, total = topology.free_sockets(nodes)
            self._event(
                EventKind.INFO,
                f"warning: the run opens {needed} connections but the broker has {free} of "
                f"{total} sockets free; going on as asked (--skip-capacity-check): the "
                "connections past the limit will hang until they time out",
                detail={"sockets_free": free, "sockets_total": total, "needed": needed},
            )
            return
        topology.check_capacity(self.spec, nodes)

    def _capacity_unknown(self, reason: str, skip: bool) -> None:
        """The socket limit could not be read: refuse a large run, warn about a small one."""
        needed = topology.connections_needed(self.spec)
        limit = topology.UNCHECKED_CONNECTIONS_LIMIT
        if needed > limit and not skip:
            raise FlowdeckError(
                f"the run opens {needed} connections and the broker's socket limit could not "
                f"be checked ({reason}); give a management API that answers for this broker "
                f"(--management-url, --management-user, --management-password), open at most "
                f"{limit} connections, or go on anyway with --skip-capacity-check"
            )
        self._event(
            EventKind.INFO,
            f"warning: the broker's socket limit was not checked ({reason}): the run opens "
            f"{needed} connections unchecked",
            detail={"needed": needed},
        )

    # -- while the run goes ------------------------------------------------------------------

    async def start(self) -> None:
        """Watch the management API, and Prometheus beside it when one is given."""
        await self._start_management()
        self._start_prometheus()

    async def _start_management(self) -> None:
        if self._management_mismatch:
            self._event(EventKind.SOURCE_STALE, self._management_mismatch)
            await self._close_management()
            return
        try:
            source = await self._management_client()
            watch = BrokerWatch(source, self.on_sample)
        except Exception as exc:
            self._event(EventKind.SOURCE_STALE, f"management API not watched: {exc}")
            await self._close_management()
            return
        self._tasks.append(
            asyncio.create_task(
                self._watch(watch, "management API", self._close_management),
                name="flowdeck-management",
            )
        )

    async def _watch(
        self,
        watch: BrokerWatch,
        label: str,
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        try:
            await watch.run(self._stop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broker-side source never stops the run
            self._event(EventKind.SOURCE_STALE, f"{label} watch ended: {exc}")
        finally:
            if close is not None:
                await close()

    def _start_prometheus(self) -> None:
        if not self.prometheus_url:
            return
        source = PrometheusCollector(
            self.prometheus_url,
            queue_names=list(self.spec.queue_names),
            vhost=self._vhost,
            queue_type=self.spec.queue_type,
        )
        self._prometheus = source
        watch = BrokerWatch(source, self.on_sample)
        self._tasks.append(
            asyncio.create_task(self._watch(watch, "Prometheus"), name="flowdeck-prometheus")
        )

    def on_sample(self, sample: BrokerSample) -> None:
        """Hand ``sample`` on, then the events it causes: the source stale or answering
        again, an alarm raised or cleared (each source's alarms are followed apart)."""
        self._on_sample(sample)
        source = sample.source
        if source == "management":
            self._say_failovers()
        if sample.stale_reason != self._stale.get(source, ""):
            if sample.stale_reason:
                self._event(
                    EventKind.SOURCE_STALE,
                    f"{source}: {sample.stale_reason}",
                    detail={"source": source},
                )
            else:
                self._event(
                    EventKind.SOURCE_RECOVERED, f"{source} answers again", detail={"source": source}
                )
            self._stale[source] = sample.stale_reason
        if sample.stale:
            return
        if source == "management":
            self._management_sample = sample
        for alarm, active in (("memory", sample.memory_alarm), ("disk", sample.disk_alarm)):
            if active != self._alarms.get((source, alarm), False):
                self._alarms[(source, alarm)] = active
                kind = EventKind.ALARM_RAISED if active else EventKind.ALARM_CLEARED
                state = "raised" if active else "cleared"
                self._event(
                    kind,
                    f"{alarm} alarm {state} (from {source})",
                    detail={"alarm": alarm, "source": source},
                )

    def _say_failovers(self) -> None:
        """One event per move of the management collector to another node's API."""
        moves = self._management.failovers if self._management is not None else []
        for move in moves[self._failovers_said :]:
            self._event(
                EventKind.INFO,
                move.describe(),
                detail={
                    "failover": "management",
                    "from_node": move.from_node,
                    "to_node": move.to_node,
                    "to_url": move.to_url,
                    "reason": move.reason,
                },
            )
        self._failovers_said = len(moves)

    # -- the end -------------------------------------------------------------------------------

    async def prepare_queues(self) -> None:
        """Check the spec's replication against the broker's running nodes and apply its
        mirroring policy (removed again by :meth:`stop`). SpecError (exit 2) for a set-up
        the nodes cannot give; FlowdeckError when the management API cannot say or set it.
        """
        spec = self.spec
        if not (spec.mirroring or spec.quorum_size):
            return
        api = await self._management_client()
        try:
            figures = await api.socket_figures()
        except ManagementAnswerError as exc:
            raise FlowdeckError(
                f"replicated queues need the broker's node count from the management API: {exc}"
            ) from None
        topology.check_queue_setup(spec, figures.running)
        policy = topology.mirroring_policy(spec)
        if policy is None:
            return
        name, body = policy
        try:
            await api.set_policy(name, body)
        except ManagementAnswerError as exc:
            raise FlowdeckError(f"cannot apply the mirroring policy {name!r}: {exc}") from None
        self._policy = name
        self._event(
            EventKind.INFO,
            f"mirroring policy {name!r} applied: ha-mode exactly, {spec.mirroring} copies, "
            "automatic sync",
            detail={"policy": name, "definition": body["definition"]},
        )

    async def stream_port(self) -> int:
        """The port of the broker's stream protocol listener (the management API's
        listeners; 5552, the plugin's default, when they cannot be read). FlowdeckError
        when the broker lists listeners and none speaks the stream protocol."""
        api = await self._management_client()
        try:
            ports = await api.listener_ports("stream")
        except (ManagementAnswerError, SourceError):
            return STREAM_PORT
        if not ports:
            raise FlowdeckError(
                "protocol = stream needs the broker's rabbitmq_stream plugin, and the management "
                "API lists no stream listener: `rabbitmq-plugins enable rabbitmq_stream` (the "
                "private nodes flowdeck starts have it)"
            )
        return min(ports)

    async def stream_figures(self) -> dict[str, int] | None:
        """The stream plugin's figures of the run's streams (management API); None when they
        cannot be read."""
        api = await self._management_client()
        try:
            return await api.stream_figures(self.spec.queue_names)
        except (ManagementAnswerError, SourceError, TypeError, AttributeError):
            return None

    async def queue_leaders(self) -> dict[str, tuple[str, int]]:
        """Per queue of the run, its leader's node name and which of the run's node URIs
        reaches it (by position), from the management API, for consumers placed by their
        queue's leader (``consumer_node``). FlowdeckError saying why when a queue's leader
        cannot be told or no URI of the run reaches it."""
        api = await self._management_client()
        sample = await api.sample()
        if sample.stale:
            raise FlowdeckError(
                f"consumer_node = {self.spec.consumer_node} needs each queue's leader from the "
                f"management API: {sample.stale_reason}"
            )
        leaders = {q.name: q.leader for q in sample.queues if q.leader}
        placed: dict[str, tuple[str, int]] = {}
        for name in self.spec.queue_names:
            leader = leaders.get(name, "")
            index = api.uri_index_of(leader) if leader else None
            if index is None:
                raise FlowdeckError(
                    f"consumer_node = {self.spec.consumer_node}: "
                    + (
                        f"no uri of the run reaches {leader}, the leader of queue {name!r}; "
                        "give every node's uri"
                        if leader
                        else f"the management API does not say where queue {name!r} leads"
                    )
                )
            placed[name] = (leader, index)
        return placed

    async def _remove_policy(self) -> None:
        name, self._policy = self._policy, ""
        if not name:
            return
        try:
            # a new client when the watch ended early and closed its own (closed by stop)
            api = await self._management_client()
            await api.delete_policy(name)
        except ManagementAnswerError as exc:
            self._event(
                EventKind.ERROR,
                f"mirroring policy {name!r} not removed: {exc}; remove it with "
                f"`rabbitmqctl clear_policy {name}`",
            )
            return
        self._event(EventKind.INFO, f"mirroring policy {name!r} removed")

    async def stop(self) -> None:
        """End the watches and remove the run's policy; the Prometheus collector stays
        open for :meth:`keep_range`."""
        # Before the watches end: ending the management watch closes its client.
        await self._remove_policy()
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._close_management()

    async def aclose(self) -> None:
        """End the watches and close every collector (a run that could not start)."""
        await self.stop()
        source, self._prometheus = self._prometheus, None
        if source is not None:
            with contextlib.suppress(Exception):
                await source.aclose()

    async def keep_range(self, started: float, ended: float) -> None:
        """Ask Prometheus for the broker's series over the run and hand them on."""
        source, self._prometheus = self._prometheus, None
        if source is None:
            return
        self._event(
            EventKind.INFO,
            f"asking Prometheus for the broker's series over the run's {ended - started:.0f} s "
            "(a range query) ...",
        )
        try:
            rows = await source.range_query(started, ended)
        except SourceError as exc:
            self._event(EventKind.SOURCE_STALE, f"Prometheus series of the run not kept: {exc}")
        else:
            self._on_range(rows)
            self._event(
                EventKind.INFO,
                f"kept {len(rows)} Prometheus samples of the run "
                f"({len({(m, labels) for _, m, labels, _ in rows})} series)",
            )
        finally:
            with contextlib.suppress(Exception):
                await source.aclose()

    async def _close_management(self) -> None:
        source, self._management = self._management, None
        if source is not None:
            with contextlib.suppress(Exception):
                await source.aclose()

    def _event(
        self, kind: EventKind, message: str, *, detail: Mapping[str, Any] | None = None
    ) -> None:
        self._on_event(
            RunEvent(
                at=time.time(), kind=kind, message=mask_text(message), detail=dict(detail or {})
            )
        )
