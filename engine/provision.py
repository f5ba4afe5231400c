"""Where a run's broker comes from: one place for the CLI and the cockpit alike.

A run goes to the broker its spec names (``--uri``), else to ``FLOWDECK_URI``, else to a
private RabbitMQ node (or a 3-node cluster, for a spec that replicates its queues) that the
provisioner starts and stops. A uri of the node or cluster ``flowdeck broker start`` left
running gets that node's own management URL and node faults (its state file, see
:func:`state_file`). A Prometheus server for the run and a Spark placement of its workers
are resolved here too, so the launch form and ``flowdeck run`` check them with the same
words.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs

from flowdeck.collectors import printable, redact
from flowdeck.engine.credentials import URI_ENV
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.spec import RunSpec

if TYPE_CHECKING:
    from flowdeck.collectors import Broker, LocalBroker, LocalCluster, LocalNodes, Provisioner
    from flowdeck.engine.spark_workers import SparkPlacement

#: The environment variable naming the state file of ``flowdeck broker start``.
STATE_ENV = "FLOWDECK_BROKER_STATE"


def state_file() -> Path:
    """``$FLOWDECK_BROKER_STATE`` if set, else ``local-broker.json`` in the state dir."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    return Path(platformdirs.user_state_dir("flowdeck")) / "local-broker.json"


def started_state() -> LocalBroker | LocalCluster | None:
    """The node or cluster ``start`` left (its state file), or None."""
    from flowdeck.collectors import UnreadableFile, attach_state, load_state

    path = state_file()
    if not path.exists():
        return None
    try:
        return attach_state(load_state(path))
    except UnreadableFile as exc:
        raise SpecError(
            STATE_ENV,
            f"{exc.message}; ${STATE_ENV} names the file `flowdeck broker start` wrote: "
            "delete it and start again",
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SpecError(
            STATE_ENV,
            f"the broker state file {printable(str(path))} cannot be read ({exc}); "
            "delete it and start again",
        ) from None


def started_node_for(uri: str) -> Any | None:
    """The node ``flowdeck broker start`` left running, when ``uri`` points at its AMQP
    port on this machine: its management URL is not the one guessed from the uri (the
    node's ports are free ones), so a run against it uses the node's own."""
    from flowdeck.collectors import BrokerUriError, parse_broker_uri

    try:
        parsed = parse_broker_uri(uri)
    except BrokerUriError:
        return None
    port = parsed.port
    if port is None:
        return None
    try:
        found = started_state()
    except FlowdeckError:
        return None
    from flowdeck.collectors import LocalCluster

    nodes = found.nodes if isinstance(found, LocalCluster) else [found]
    for node in nodes:
        if node is None or node.amqp_port != port or not node.running:
            continue
        # a node of a cluster in namespaces answers on its own address, not loopback
        loopback = ("127.0.0.1", "localhost", "::1")
        if parsed.host == node.host or (node.host == "127.0.0.1" and parsed.host in loopback):
            return node
    return None


def started_local_nodes() -> LocalNodes | None:
    """The node or cluster ``start`` left running, as what a run's node faults act on: a
    node they start again is left running as ``start NODE`` leaves it, and the state file
    follows every fault (a restarted node has a new pid)."""
    from flowdeck.collectors import LocalNodes, save_state

    try:
        found = started_state()
    except FlowdeckError:
        return None
    if found is None:
        return None
    path = state_file()
    return LocalNodes(found, detached=True, on_change=lambda: save_state(path, found.to_state()))


def spec_naming(spec: RunSpec, broker: Broker) -> RunSpec:
    """``spec`` naming ``broker``, so the session records (redacted) where the run went
    even when the uri came from ``FLOWDECK_URI``; a private node's run keeps no uri."""
    if broker.private or spec.uri == broker.uri_list:
        return spec
    return replace(spec, uri=broker.uri_list)


def resolve_broker(
    spec: RunSpec,
    provisioner: Provisioner,
    environ: Mapping[str, str] | None = None,
    announce: Any = None,
) -> Broker:
    """The broker a run uses: the spec's uri (``--uri``), else ``FLOWDECK_URI``, else the
    private RabbitMQ node of ``provisioner`` (started now when it runs none; the
    provisioner's owner stops it). A uri of the node ``flowdeck broker start`` left running
    gets that node's management URL. The cockpit passes ``environ={}``: its runs go where
    its launch screen says, never to a broker only the environment names.
    """
    env = os.environ if environ is None else environ
    uri = spec.uri or env.get(URI_ENV, "")
    if uri:
        from flowdeck.collectors import Broker, BrokerUriError, prometheus_target_for

        try:
            given = Broker.parse(uri)
        except BrokerUriError as exc:  # a bad FLOWDECK_URI is a SpecError (exit 2) too
            raise SpecError("uri", exc.message) from None
        started = None if spec.management_url else started_node_for(given.uri)
        if started is not None:  # `flowdeck broker start`'s node: its own management URL
            return Broker(
                given.nodes,
                management_url=started.management_url,
                prometheus_url=spec.prometheus_url or None,
                prometheus_target=f"127.0.0.1:{started.prometheus_port}",
                statistics_interval=started.stats_interval_ms / 1000,
                local=started_local_nodes(),
            )
        return Broker(
            given.nodes,
            management_url=spec.management_url or None,
            prometheus_url=spec.prometheus_url or None,
            prometheus_target=prometheus_target_for(given.uri),
        )
    from flowdeck.collectors import Broker, LocalNodes, SourceError

    if spec.mirroring or spec.quorum_size > 1:  # replication needs a cluster of its own
        return _private_cluster(spec, provisioner, announce)
    fresh = provisioner.running_node is None
    if fresh and announce is not None:
        announce(
            "no --uri or FLOWDECK_URI: starting a private RabbitMQ node (the node boots, then "
            "its management and Prometheus plugins start; ~10 s) ..."
        )
    try:
        node = provisioner.node()
    except SourceError as exc:
        raise FlowdeckError(f"cannot start a private RabbitMQ node: {exc}") from None
    if fresh and announce is not None:
        announce(f"private node up in {node.started_in or 0:.1f} s at {redact(node.uri)}")
    return Broker.parse(
        node.uri,
        management_url=node.management_url,
        prometheus_url=spec.prometheus_url or None,
        prometheus_target=f"127.0.0.1:{node.prometheus_port}",
        statistics_interval=node.stats_interval_ms / 1000,
        private=True,
        local=LocalNodes(node),
    )


def _private_cluster(spec: RunSpec, provisioner: Provisioner, announce: Any) -> Broker:
    """The provisioner's private cluster for a spec that replicates its queues: three nodes
    (the seed's set-up), or as many as the spec's copies or quorum members ask."""
    from flowdeck.collectors import Broker, LocalNodes, SourceError

    size = max(3, spec.mirroring, spec.quorum_size)
    if announce is not None:
        announce(
            f"no --uri or FLOWDECK_URI and the spec replicates its queues: starting a private "
            f"{size}-node RabbitMQ cluster ..."
        )
    try:
        cluster = provisioner.cluster(size)
    except SourceError as exc:
        raise FlowdeckError(f"cannot start a private RabbitMQ cluster: {exc}") from None
    first = cluster.nodes[0]
    if announce is not None:
        announce(f"private cluster up: {', '.join(redact(uri) for uri in cluster.uris)}")
    return Broker.parse(
        cluster.uris,
        management_url=first.management_url,
        prometheus_url=spec.prometheus_url or None,
        prometheus_target=f"127.0.0.1:{first.prometheus_port}",
        statistics_interval=first.stats_interval_ms / 1000,
        private=True,
        local=LocalNodes(cluster),
    )


@contextmanager
def broker_for(
    spec: RunSpec, environ: Mapping[str, str] | None = None, announce: Any = None
) -> Iterator[Broker]:
    """``resolve_broker`` for one run: a private node it starts is stopped when the block
    ends (and is registered meanwhile, so ``flowdeck broker status`` elsewhere sees it)."""
    import time

    from flowdeck.collectors import Provisioner

    with Provisioner(name="flowdeck-run") as provisioner:
        broker = resolve_broker(spec, provisioner, environ, announce)
        try:
            yield broker
        finally:
            if broker.private and announce is not None:
                what = "cluster" if len(broker.uris) > 1 else "node"
                announce(f"stopping the private RabbitMQ {what} ...")
                began = time.monotonic()
                provisioner.close()
                announce(f"private {what} stopped in {time.monotonic() - began:.1f} s")


@contextmanager
def prometheus_for(broker: Broker, start: bool, announce: Any = None) -> Iterator[str | None]:
    """The Prometheus URL a run uses: with ``start`` (``--start-prometheus``) a throwaway
    server flowdeck starts now, scraping the broker's endpoint every second, and stops when
    the block ends; else the one given (``--prometheus-url``) or none."""
    if not start:
        yield broker.prometheus_url
        return
    if broker.prometheus_url:
        raise SpecError(
            "prometheus_url",
            "give either --prometheus-url or --start-prometheus, not both",
        )
    from flowdeck.collectors import Provisioner, SourceError

    with Provisioner(name="flowdeck-run") as provisioner:
        try:
            server = provisioner.prometheus(broker.prometheus_targets)
        except SourceError as exc:
            raise FlowdeckError(f"cannot start a Prometheus server for the run: {exc}") from None
        if announce is not None:
            targets = ", ".join(broker.prometheus_targets)
            announce(
                f"Prometheus up at {server.url}, scraping {targets} every "
                f"{server.scrape_interval:g} s"
            )
        yield server.url


#: The fields a Spark placement's problems are filed under (``SpecError.field``): the master
#: and workers, the listen address, and the link's TLS files.
SPARK_FIELDS = ("spark_master", "workers", "spark_listen", "spark_cert_file")


def spark_placement_of(
    master: str, workers: int, *, listen: str = "", cert_file: str = "", key_file: str = ""
) -> SparkPlacement | None:
    """The Spark placement of ``flowdeck run --spark-master MASTER --spark-listen HOST:PORT
    --spark-cert-file PEM --spark-key-file PEM`` (and of the cockpit's launch form, which
    shows these messages in its own words): None without a master (local workers);
    SpecError naming one of ``SPARK_FIELDS`` for anything that cannot work. Nothing
    listens or starts: the placement only checks what it was given until a run launches it.
    """
    if not master.strip():
        if listen.strip() or cert_file or key_file:
            raise SpecError(
                "spark_master", "--spark-listen and --spark-cert-file need --spark-master"
            )
        return None
    from flowdeck.engine.control import ControlAddress, parse_control_address
    from flowdeck.engine.spark_workers import SparkPlacement
    from flowdeck.engine.tls import TlsOptions

    address: ControlAddress | None = None
    if listen.strip():
        try:
            address = parse_control_address(listen)
        except SpecError:
            raise SpecError(
                "spark_listen",
                f"--spark-listen must be HOST:PORT (e.g. 10.0.0.5:0), got {listen!r}",
            ) from None
    if key_file and not cert_file:
        raise SpecError("spark_cert_file", "--spark-key-file needs --spark-cert-file")
    try:
        return SparkPlacement(
            master,
            workers=workers,
            listen=address,
            tls=TlsOptions(cert_file=cert_file, key_file=key_file),
        )
    except SpecError as exc:
        if exc.field in SPARK_FIELDS:
            raise
        # The link's certificate or key (a missing file, a pair that does not load).
        raise SpecError("spark_cert_file", exc.message) from None
