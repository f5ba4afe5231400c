"""The broker a run goes to, parsed once: its nodes, vhost, TLS, management and Prometheus.

:class:`Broker` is the one value every part passes around for "which broker": the run
command and the cockpit resolve it (from ``--uri``, ``FLOWDECK_URI`` or a private node),
the controller, its broker sources and its workers take it, and text only ever shows its
:attr:`Broker.redacted` form. A cluster is one broker with several node URIs: clients are
spread over them round-robin (as PerfTest does with several ``-H`` URIs) and a client
that loses its node reconnects to the next one.

Several URIs are written comma-separated (``amqp://h1:5672,amqp://h2:5672``) or given as a
sequence; they must share the vhost, the user and TLS, since they are one broker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from flowdeck.collectors.broker_uri import (
    URI_SEPARATOR,
    BrokerUri,
    BrokerUriError,
    parse_broker_uri,
    split_uris,
)

if TYPE_CHECKING:
    from flowdeck.collectors.node_faults import LocalNodes


@dataclass(frozen=True, slots=True)
class Broker:
    """One broker: one node, or the nodes of a cluster, and where its figures are read."""

    nodes: tuple[BrokerUri, ...]
    #: The management API base URL (no credentials in it); None: the usual one of node 1.
    management_url: str | None = None
    #: A Prometheus server's URL to query, when the run keeps one.
    prometheus_url: str | None = None
    #: ``host:port`` of node 1's rabbitmq_prometheus endpoint (what a Prometheus scrapes).
    prometheus_target: str = ""
    #: The broker's collect_statistics_interval in seconds, when flowdeck knows it.
    statistics_interval: float | None = None
    #: True for a node flowdeck started itself (a private node's runs record no uri).
    private: bool = False
    #: Management API credentials when they differ from the AMQP ones (never shown).
    management_user: str | None = None
    management_password: str | None = field(default=None, repr=False)
    #: The node or cluster behind these URIs when flowdeck runs it (a private one, or the
    #: one ``flowdeck broker start`` left): what node faults act on. None for any other
    #: broker, on which faults are refused. A handle on processes, not part of the value.
    local: LocalNodes | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise BrokerUriError("no broker to run against: give an AMQP uri")
        first = self.nodes[0]
        for node in self.nodes[1:]:
            if (node.vhost, node.login, node.tls) != (first.vhost, first.login, first.tls):
                raise BrokerUriError(
                    f"the uris of one broker must share vhost, user and TLS: "
                    f"{first.redacted!r} and {node.redacted!r} differ"
                )

    @classmethod
    def parse(
        cls,
        uris: str | Sequence[str],
        *,
        management_url: str | None = None,
        prometheus_url: str | None = None,
        prometheus_target: str = "",
        statistics_interval: float | None = None,
        private: bool = False,
        management_user: str | None = None,
        management_password: str | None = None,
        local: LocalNodes | None = None,
    ) -> Broker:
        """The broker of one URI, a comma-separated list or a sequence of URIs.
        BrokerUriError (one line, no password) when one is wrong."""
        texts = (
            split_uris(uris) if isinstance(uris, str) else [t for u in uris for t in split_uris(u)]
        )
        if not texts:
            raise BrokerUriError("no broker to run against: give an AMQP uri")
        return cls(
            tuple(parse_broker_uri(text) for text in texts),
            management_url=management_url or None,
            prometheus_url=prometheus_url or None,
            prometheus_target=prometheus_target,
            statistics_interval=statistics_interval,
            private=private,
            management_user=management_user or None,
            management_password=management_password or None,
            local=local,
        )

    # -- what connects -----------------------------------------------------------------

    @property
    def uri(self) -> str:
        """Node 1's connect form (with the password): for the run's own declarations."""
        return str(self.nodes[0])

    @property
    def uris(self) -> tuple[str, ...]:
        """Every node's connect form, in order."""
        return tuple(str(node) for node in self.nodes)

    @property
    def uri_list(self) -> str:
        """Every node's connect form, comma-separated (what ``--uri`` takes back)."""
        return URI_SEPARATOR.join(self.uris)

    def uri_for(self, client: int) -> str:
        """The node client number ``client`` connects to first: round-robin over nodes."""
        return str(self.nodes[client % len(self.nodes)])

    @property
    def vhost(self) -> str:
        return self.nodes[0].vhost

    @property
    def login(self) -> str:
        return self.nodes[0].login

    @property
    def secret(self) -> str:
        return self.nodes[0].secret

    @property
    def tls(self) -> bool:
        return self.nodes[0].tls

    @property
    def management_login(self) -> tuple[str, str]:
        """(user, password) for the management API: its own, else the AMQP ones."""
        return (
            self.management_user or self.login,
            self.management_password or self.secret,
        )

    @property
    def prometheus_targets(self) -> tuple[str, ...]:
        """``host:port`` of the rabbitmq_prometheus endpoints for a Prometheus server to
        scrape: every running node's when flowdeck runs the broker (a server scraping node
        1 only would lose every figure with it), else the one endpoint given or guessed."""
        if self.local is not None:
            running = [f"{n.host}:{n.prometheus_port}" for n in self.local.nodes if n.running]
            if running:
                return tuple(running)
        return (self.prometheus_target,) if self.prometheus_target else ()

    @property
    def usual_management_url(self) -> str:
        """The management URL given, else the one that usually goes with node 1."""
        if self.management_url:
            return self.management_url
        first = self.nodes[0]
        if first.tls:
            return f"https://{first.host_text}:15671"
        return f"http://{first.host_text}:15672"

    # -- what is shown -------------------------------------------------------------------

    @property
    def redacted(self) -> str:
        """Every node's URI with its password masked, comma-separated: the only form of
        the broker that reaches text."""
        return URI_SEPARATOR.join(node.redacted for node in self.nodes)

    @property
    def address(self) -> str:
        """``host:port vhost '/'`` of node 1, plus how many more nodes, for messages."""
        more = len(self.nodes) - 1
        return self.nodes[0].address + (f" (+{more} more node{'s' * (more > 1)})" if more else "")

    def __str__(self) -> str:
        return self.redacted

    def with_nodes(self, uris: str | Sequence[str]) -> Broker:
        """This broker reached through other node URIs (same management, Prometheus)."""
        return replace(self, nodes=Broker.parse(uris).nodes)
