"""`flowdeck broker start|status|uris|stop|restart|kill`: a private RabbitMQ node or cluster for
demos, runs and node-loss drills.

``start`` launches a node of its own (own name, ports, data dir, management and prometheus
plugins, statistics every second), prints where it is and leaves it running, keeping its
state in a small file under the user's state directory so ``status`` and ``stop`` find
it. ``start --foreground`` keeps the node until Ctrl-C and then stops it. ``start --nodes
3`` starts a private cluster instead (``LocalCluster``: the seed's three nodes); its ``uri``
line is the one ``--uri`` value naming every node, which ``uris`` prints alone.

A node ``start`` leaves running belongs to the user until ``stop``: it outlives the
command (``LocalBroker.detach``). ``stop --keep-data`` stops it and keeps its data and
state; ``restart`` brings it back with the same name, ports and data directory, so durable
queues and their messages are still there.

One node of a cluster is lost and brought back with ``kill NODE`` (SIGKILL, as a crash),
``stop NODE`` (a clean shutdown), ``start NODE`` and ``restart NODE``; NODE is its number
(``2``), ``n2`` or its name. Each updates the state file (a restarted node has a new pid).

``start --set KEY=VALUE`` (repeatable) starts the node, or every node of the cluster, with
a broker setting (collectors/broker_settings.py: the credit flow credit, quorum queues'
command soft limit, the statistics interval), written to its ``advanced.config``; a run
changes them live with ``broker.KEY=VALUE``.

``start --nodes 3 --namespaces`` runs each node in a network namespace of its own, on a
bridge (``collectors/node_network.py``; needs root): ``partition NODE`` cuts that node off
the others and the clients while it keeps running, and ``heal NODE`` puts it back.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowdeck.cli import COMMANDS
from flowdeck.engine import FlowdeckError, SpecError, started_state, state_file

if TYPE_CHECKING:
    from flowdeck.collectors import LocalBroker, LocalCluster, RegisteredNode

_NO_CLUSTER = "no private cluster is running (start one: flowdeck broker start --nodes 3)"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "broker",
        help=COMMANDS["broker"],
        description="A private RabbitMQ node (or a cluster of them, --nodes 3) from the "
        "installed rabbitmq-server, on free ports of 127.0.0.1, with the management and "
        "prometheus plugins and statistics every second. It never touches a broker already "
        "running on the machine.",
    )
    actions = parser.add_subparsers(dest="broker_action", metavar="ACTION", required=True)
    start = actions.add_parser(
        "start",
        help="start the node (or a cluster, --nodes N) and print its URLs; or start NODE "
        "of the running cluster again",
    )
    start.add_argument(
        "node",
        nargs="?",
        help="a node of the running cluster to start again (its number, n2, or its name)",
    )
    start.add_argument(
        "--nodes",
        type=int,
        default=1,
        metavar="N",
        help="start a private cluster of N nodes (the seed's set-up is 3; default: 1 node)",
    )
    start.add_argument(
        "--namespaces",
        action="store_true",
        help="with --nodes: run each node in a network namespace of its own (needs root), "
        "so `flowdeck broker partition NODE` can cut it off; partition handling "
        "pause_minority",
    )
    start.add_argument(
        "--foreground", action="store_true", help="keep the node until Ctrl-C, then stop it"
    )
    start.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="settings",
        help="a broker setting for every node, e.g. credit_flow_default_credit={100,50}, "
        "quorum_commands_soft_limit=256, collect_statistics_interval=5000 (repeatable)",
    )
    start.add_argument("--amqp-port", type=int, help="AMQP port (default: a free one)")
    start.add_argument("--management-port", type=int, help="management port (default: free)")
    start.add_argument("--prometheus-port", type=int, help="prometheus port (default: free)")
    start.set_defaults(handler=_start)
    status = actions.add_parser(
        "status",
        help="say whether the node (every node of a cluster) runs, and where, and list the "
        "private nodes other flowdeck processes (cockpit, run) started, with their owner",
    )
    status.set_defaults(handler=_status)
    uris = actions.add_parser(
        "uris",
        help="print the one --uri value naming every node of the running node or cluster",
        description="Print the --uri value of the node or cluster `flowdeck broker start` "
        "left running: every node's AMQP URI, comma-separated, alone on one line, so "
        'flowdeck run --uri "$(flowdeck broker uris)" runs against all of them.',
    )
    uris.set_defaults(handler=_uris)
    stop = actions.add_parser(
        "stop",
        help="stop the node (the whole cluster) and remove its data; or stop NODE of the "
        "cluster cleanly, keeping its data",
    )
    stop.add_argument(
        "node",
        nargs="?",
        help="one node of the running cluster to stop (its number, n2, or its name)",
    )
    stop.add_argument(
        "--keep-data",
        action="store_true",
        help="keep the node's data (durable queues, messages) for `flowdeck broker restart`",
    )
    stop.set_defaults(handler=_stop)
    kill = actions.add_parser(
        "kill",
        help="SIGKILL one node of the running cluster, as a crash would (its data stays)",
        description="Kill one node of the private cluster with SIGKILL: no clean shutdown, "
        "as a crash or a lost machine. Its data stays; `flowdeck broker start NODE` or "
        "`restart NODE` brings it back.",
    )
    kill.add_argument("node", help="the node: its number (2), n2, or its name")
    kill.set_defaults(handler=_kill)
    for word, said in (
        (
            "partition",
            "cut one node of a cluster started with --namespaces off the others and the "
            "clients (it keeps running)",
        ),
        ("heal", "put a node cut off by `partition` back on the cluster's network"),
    ):
        network_fault = actions.add_parser(
            word, help=said, description=said[:1].upper() + said[1:] + "."
        )
        network_fault.add_argument("node", help="the node: its number (2), n2, or its name")
        network_fault.set_defaults(handler=_network_fault, fault=word)
    restart = actions.add_parser(
        "restart",
        help="bring the node (a cluster's NODE, or all of them) back with its data (same "
        "name, ports, data dir)",
        description="Start the private node again after `flowdeck broker stop --keep-data` "
        "(or a crash) with the same node name, ports and data directory, so durable queues "
        "and persistent messages are still there; a running node is stopped first. With a "
        "cluster, NODE restarts that node alone; without it, every node.",
    )
    restart.add_argument(
        "name",
        nargs="?",
        metavar="NODE",
        help="the node's name (a cluster's node: its number, n2, or its name); optional "
        "for a single node, to make sure it is the one meant",
    )
    restart.set_defaults(handler=_restart)
    alarm = actions.add_parser(
        "alarm",
        help="raise a memory or disk alarm on the node, or clear both (for demos)",
        description="Raise a memory alarm (memory high watermark near zero) or a disk alarm "
        "(disk free limit above the free space) on the private node, or put both limits "
        "back to RabbitMQ's defaults (0.4 of RAM, 50MB).",
    )
    alarm.add_argument("kind", choices=("memory", "disk", "clear"))
    alarm.add_argument(
        "node",
        nargs="?",
        help="in a cluster, the node to raise it on (default: the first; clear clears all)",
    )
    alarm.set_defaults(handler=_alarm)


def _print_node(node: Any) -> None:
    print(f"node        {node.nodename}")
    print(f"uri         {node.uri}")
    print(f"management  {node.management_url}  (guest/guest)")
    print(f"prometheus  {node.prometheus_url}/metrics")
    print(f"data        {node.base_dir}")
    _print_settings(node)


def _print_settings(node: Any) -> None:
    """The broker settings the node was started with or given since (none: nothing)."""
    settings = getattr(node, "rabbit_settings", {})
    if settings:
        print(f"settings    {', '.join(f'{k}={v}' for k, v in settings.items())}")


def _settings(args: argparse.Namespace) -> dict[str, str]:
    """``--set KEY=VALUE`` as broker settings (SpecError, exit 2, for a bad one)."""
    from flowdeck.collectors import SourceError
    from flowdeck.collectors.broker_settings import parse_assignment

    settings: dict[str, str] = {}
    for text in args.settings:
        try:
            row, term = parse_assignment(text)
        except SourceError as exc:
            raise SpecError("set", f"--set {text}: {exc}") from None
        settings[row.key] = term
    return settings


def _attached() -> Any | None:
    """The node ``start`` left, to talk to: of a cluster, its first running node."""
    from flowdeck.collectors import LocalCluster

    found = started_state()
    if isinstance(found, LocalCluster):
        return next((n for n in found.nodes if n.running), found.nodes[0])
    return found


def _cluster_node(
    node_ref: str, cluster: LocalCluster | None = None
) -> tuple[LocalCluster, LocalBroker]:
    """The cluster ``start --nodes`` left (or ``cluster``, read already) and its node
    ``node_ref``; SpecError (exit 2) when there is no cluster or no such node."""
    from flowdeck.collectors import LocalCluster

    found = started_state() if cluster is None else cluster
    if not isinstance(found, LocalCluster):
        raise SpecError("node", _NO_CLUSTER)
    cluster = found
    node = cluster.find_node(node_ref)
    if node is None:
        names = ", ".join(f"{n} ({each.nodename})" for n, each in enumerate(cluster.nodes, 1))
        raise SpecError("node", f"no node {node_ref!r} in cluster {cluster.name}; it has {names}")
    return cluster, node


def _start(args: argparse.Namespace) -> int:
    from flowdeck.collectors import LocalBroker, LocalCluster, SourceError, save_state

    if args.node is not None:
        if args.settings:
            raise SpecError(
                "set",
                "--set starts a new node or cluster with a setting; a node started again "
                "keeps the settings it has (change them live with broker.KEY=VALUE)",
            )
        return _start_one(args)
    settings = _settings(args)
    if not 1 <= args.nodes <= 9:
        raise SpecError("nodes", f"--nodes must be 1..9, got {args.nodes}; 3 is the seed's set-up")
    ports = (args.amqp_port, args.management_port, args.prometheus_port)
    if args.namespaces and args.nodes < 2:
        raise SpecError(
            "namespaces", "--namespaces is for a cluster: give --nodes 3 (or 2..9) with it"
        )
    if args.nodes > 1 and any(port is not None for port in ports):
        raise SpecError(
            "nodes",
            "--amqp-port, --management-port and --prometheus-port name one node's ports; a "
            "cluster's nodes get free ones (leave them out)",
        )
    running = started_state()
    if running is not None and running.running:
        print(f"a private {_kind(running)} is already running:")
        _print_any(running)
        return 0
    if running is not None and _data_kept(running):
        raise FlowdeckError(
            f"the stopped private {_kind(running)} {_name(running)} keeps its data in "
            f"{running.base_dir}: bring it back with `flowdeck broker restart`, or delete it "
            "with `flowdeck broker stop`"
        )
    # beside its state file: two nodes with two state files never share (or delete) each
    # other's data
    base_dir = state_file().with_suffix(".data")
    started: LocalBroker | LocalCluster
    try:
        if args.nodes > 1:
            started = LocalCluster(
                args.nodes,
                name="flowdeck",
                base_dir=base_dir,
                isolated=args.namespaces,
                rabbit_settings=settings,
            )
            where = (
                f", each in a network namespace on {started.network.gateway}/24"
                if started.network is not None
                else ""
            )
            print(
                f"starting a private RabbitMQ cluster of {args.nodes} nodes (all at once, "
                f"joining the first{where}) ...",
                flush=True,
            )
        else:
            started = LocalBroker(
                name="flowdeck",
                base_dir=base_dir,
                amqp_port=args.amqp_port,
                management_port=args.management_port,
                prometheus_port=args.prometheus_port,
                rabbit_settings=settings,
            )
            print("starting a private RabbitMQ node ...", flush=True)
        started.start()
    except SourceError as exc:
        started.stop(cleanup=True)
        raise FlowdeckError(str(exc)) from None
    print(f"started in {started.started_in:.1f} s")
    _print_any(started)
    if not args.foreground:
        save_state(state_file(), started.detach())
        print("stop it with: flowdeck broker stop")
        return 0
    print("Ctrl-C stops it", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        while started.running:
            time.sleep(0.5)
        print("the node stopped by itself; its logs are in", started.base_dir)
        return 1
    except KeyboardInterrupt:
        print(f"\nstopping the {_kind(started)} ...", flush=True)
        return 0
    finally:
        started.stop(cleanup=True)


def _start_one(args: argparse.Namespace) -> int:
    """``start NODE``: one node of the running cluster, back on its ports and data."""
    from flowdeck.collectors import SourceError, save_state

    cluster, node = _cluster_node(args.node)
    if node.running:
        print(f"{node.nodename} is already running")
        return 0
    print(f"starting {node.nodename} again on its ports and data ...", flush=True)
    try:
        node.start()
    except SourceError as exc:
        node.kill()  # whatever booted; the data stays for another try
        raise FlowdeckError(str(exc)) from None
    node.detach()
    save_state(state_file(), cluster.to_state())
    print(f"started in {node.started_in:.1f} s; it rejoined {cluster.name}")
    _print_cluster(cluster)
    return 0


def _kind(found: LocalBroker | LocalCluster) -> str:
    return "cluster" if hasattr(found, "nodes") else "node"


def _name(found: LocalBroker | LocalCluster) -> str:
    from flowdeck.collectors import LocalCluster

    return found.name if isinstance(found, LocalCluster) else found.nodename


def _print_any(found: LocalBroker | LocalCluster) -> None:
    from flowdeck.collectors import LocalCluster

    if isinstance(found, LocalCluster):
        _print_cluster(found)
    else:
        _print_node(found)


def _print_cluster(cluster: LocalCluster, owner: str = "") -> None:
    """One line per node (number, up or down, name, ports), then where to connect."""
    up = sum(node.running for node in cluster.nodes)
    print(
        f"cluster     {cluster.name}: {len(cluster.nodes)} nodes, {up} up, "
        f"{len(cluster.nodes) - up} down{owner}"
    )
    cut = set(cluster.cut_off()) if cluster.network is not None and cluster.running else set()
    for number, node in enumerate(cluster.nodes, 1):
        state = ("CUT " if node.nodename in cut else "up  ") if node.running else "DOWN"
        where = f"  namespace {node.netns}" if node.netns else ""
        print(
            f"  {number}  {state}  {node.nodename}  amqp {node.amqp_port}  management "
            f"{node.management_port}  prometheus {node.prometheus_port}  dist {node.dist_port}"
            f"{where}"
        )
    first = next((node for node in cluster.nodes if node.running), cluster.nodes[0])
    others = "address and port" if cluster.network is not None else "port"
    print(f"uri         {uri_value(cluster)}")
    print("            (every node, as --uri takes it; alone: flowdeck broker uris)")
    print(f"management  {first.management_url}  (guest/guest; any node's {others})")
    if cluster.network is not None:
        print(
            f"network     bridge {cluster.network.bridge} {cluster.network.gateway}/24; "
            f"partition handling {cluster.partition_handling or 'ignore'}"
        )
    print(f"data        {cluster.base_dir}")
    _print_settings(first)


def uri_value(found: LocalBroker | LocalCluster) -> str:
    """The ``--uri`` value that names every node of ``found``, comma-separated, in node
    order: a run given it spreads its clients over the nodes."""
    from flowdeck.collectors import Broker, LocalCluster

    uris = found.uris if isinstance(found, LocalCluster) else [found.uri]
    return Broker.parse(uris).uri_list


def _uris(args: argparse.Namespace) -> int:
    """``uris``: the one ``--uri`` value of the node or cluster ``start`` left, alone on
    stdout (``flowdeck run --uri "$(flowdeck broker uris)"``); exit 1 when none runs."""
    del args
    found = started_state()
    if found is None or not found.running:
        print("no private node is running (start one: flowdeck broker start)", file=sys.stderr)
        return 1
    print(uri_value(found))
    return 0


def _number_of(cluster: LocalCluster, node: LocalBroker) -> int:
    return cluster.nodes.index(node) + 1


def _data_kept(found: Any) -> bool:
    """A node (or cluster) that does not run but whose data directory is still there."""
    return not found.running and Path(found.base_dir).is_dir()


def _status(args: argparse.Namespace) -> int:
    """The node or cluster ``start`` left running, then every node another flowdeck process
    (a cockpit, a ``flowdeck run``) started and still owns; exit 0 when one of them runs."""
    del args
    from flowdeck.collectors import LocalCluster, registered_nodes

    found = started_state()
    owned = registered_nodes()
    code = 0
    said = found is not None and (found.running or _data_kept(found))
    if found is not None and _data_kept(found):
        print(
            f"{_name(found)} is stopped; its data is kept in {found.base_dir} "
            "(bring it back: flowdeck broker restart)"
        )
        code = 1
    elif isinstance(found, LocalCluster) and found.running:
        _print_cluster(found, ", owned by you until: flowdeck broker stop")
    elif found is not None and found.running:
        print("running")
        _print_node(found)
    elif not owned:
        print("no private node is running (start one: flowdeck broker start)")
        return 1
    for cluster_name, entries in _by_cluster(owned):
        if said:
            print()
        said = True
        command = entries[0].owner_command or "?"
        print(f"running, owned by pid {entries[0].owner_pid}: {command}")
        if cluster_name:
            print(f"cluster     {cluster_name}: {len(entries)} nodes up")
        for entry in entries:
            print(f"node        {entry.nodename}")
            print(f"uri         {entry.uri}")
            print(f"management  {entry.management_url}  (guest/guest)")
            print(f"prometheus  {entry.prometheus_url}/metrics")
            print(f"data        {entry.base_dir}")
    return code


def _by_cluster(owned: list[RegisteredNode]) -> list[tuple[str, list[RegisteredNode]]]:
    """Registered nodes, a cluster's together (in the order its first node was found)."""
    groups: dict[tuple[int, str], list[RegisteredNode]] = {}
    for entry in owned:
        key = (entry.owner_pid, entry.cluster or entry.nodename)
        groups.setdefault(key, []).append(entry)
    return [(key[1] if entries[0].cluster else "", entries) for key, entries in groups.items()]


def _stop(args: argparse.Namespace) -> int:
    from flowdeck.collectors import save_state

    if args.node is not None:
        return _stop_one(args)
    found = started_state()
    path = state_file()
    if found is None:
        print("no private node is running")
        return 0
    was_running = found.running
    kind = _kind(found)
    if args.keep_data:
        found.stop(cleanup=False)
        save_state(path, found.to_state())  # no pid: `restart` starts it again
        said = f"stopped {_name(found)}" if was_running else f"the {kind} had already stopped"
        print(
            f"{said}; its data stays in {found.base_dir} (bring it back: flowdeck broker restart)"
        )
        return 0
    kept = _data_kept(found)
    found.stop(cleanup=True)
    path.unlink(missing_ok=True)
    if was_running:
        print(f"stopped {_name(found)}")
    elif kept:
        print(f"the {kind} had already stopped; removed its data from {found.base_dir}")
    else:
        print(f"the {kind} had already stopped")
    return 0


def _stop_one(args: argparse.Namespace) -> int:
    """``stop NODE``: a clean shutdown of one node of the cluster; its data stays."""
    from flowdeck.collectors import save_state

    cluster, node = _cluster_node(args.node)
    if not node.running:
        print(f"{node.nodename} is not running")
        return 0
    began = time.monotonic()
    node.stop(cleanup=False)
    save_state(state_file(), cluster.to_state())
    print(
        f"stopped {node.nodename} in {time.monotonic() - began:.1f} s; its data stays "
        f"(bring it back: flowdeck broker start {_number_of(cluster, node)})"
    )
    _print_cluster(cluster)
    return 0


def _kill(args: argparse.Namespace) -> int:
    """``kill NODE``: SIGKILL one node of the cluster, as a crash; its data stays."""
    from flowdeck.collectors import save_state

    cluster, node = _cluster_node(args.node)
    if not node.running:
        print(f"{node.nodename} is not running")
        return 0
    beam = node.beam_pid()
    node.kill()
    save_state(state_file(), cluster.to_state())
    print(
        f"killed {node.nodename} (SIGKILL to its Erlang VM, pid {beam}); its data stays "
        f"(bring it back: flowdeck broker start {_number_of(cluster, node)})"
    )
    _print_cluster(cluster)
    return 0


def _network_fault(args: argparse.Namespace) -> int:
    """``partition NODE`` / ``heal NODE``: cut a node of a cluster in namespaces off its
    network, or put it back; the node keeps running either way."""
    from flowdeck.collectors import LocalNodes, SourceError, save_state

    cluster, node = _cluster_node(args.node)
    nodes = LocalNodes(
        cluster, detached=True, on_change=lambda: save_state(state_file(), cluster.to_state())
    )
    try:
        done = nodes.apply(args.fault, args.node)
    except SourceError as exc:
        raise SpecError("node", str(exc)) from None
    print(done.message)
    if args.fault == "partition" and done.changed:
        handling = cluster.partition_handling or "ignore"
        print(
            f"partition handling {handling}: the node pauses once it sees itself in the "
            f"minority (within net_ticktime); bring it back: flowdeck broker heal "
            f"{_number_of(cluster, node)}"
        )
    return 0


def _restart(args: argparse.Namespace) -> int:
    from flowdeck.collectors import LocalCluster, SourceError, save_state

    found = started_state()
    path = state_file()
    if found is None and args.name is not None:
        raise SpecError("node", _NO_CLUSTER)
    if found is None:
        raise FlowdeckError(
            f"no private node to restart: the state file {path} does not exist; start one "
            "with: flowdeck broker start"
        )
    if isinstance(found, LocalCluster):
        return _restart_cluster(found, args.name)
    node = found
    if args.name is not None and args.name not in (node.nodename, node.nodename.split("@")[0]):
        raise SpecError(
            "name", f"no private node named {args.name!r}: {path} names {node.nodename}"
        )
    if node.running:
        print(f"stopping {node.nodename} (its data stays) ...", flush=True)
        node.stop(cleanup=False)
    elif not Path(node.base_dir).is_dir():
        raise FlowdeckError(
            f"the data of {node.nodename} is gone ({node.base_dir} does not exist); "
            "start a new node: flowdeck broker stop, then flowdeck broker start"
        )
    print(f"starting {node.nodename} again on its ports and data ...", flush=True)
    try:
        node.start()
    except SourceError as exc:
        node.kill()  # whatever booted; the data directory stays for another try
        raise FlowdeckError(str(exc)) from None
    print(f"started in {node.started_in:.1f} s")
    _print_node(node)
    save_state(path, node.detach())
    print("stop it with: flowdeck broker stop [--keep-data]")
    return 0


def _restart_cluster(cluster: LocalCluster, node_ref: str | None) -> int:
    """``restart NODE``: that node, stopped cleanly if it runs, then started on its data;
    ``restart``: every node so (they start at once, each waiting for the others' data)."""
    from flowdeck.collectors import SourceError, save_state

    nodes = list(cluster.nodes) if node_ref is None else [_cluster_node(node_ref, cluster)[1]]
    if not Path(cluster.base_dir).is_dir():
        raise FlowdeckError(
            f"the data of {cluster.name} is gone ({cluster.base_dir} does not exist); "
            "start a new cluster: flowdeck broker stop, then flowdeck broker start --nodes 3"
        )
    running = [node for node in nodes if node.running]
    if running:
        names = ", ".join(node.nodename for node in running)
        print(f"stopping {names} (the data stays) ...", flush=True)
        for node in running:
            node.stop(cleanup=False)
    names = ", ".join(node.nodename for node in nodes)
    whose = "its" if len(nodes) == 1 else "their"
    print(f"starting {names} again on {whose} ports and data ...", flush=True)
    try:
        if node_ref is None:
            cluster.start()
            took = cluster.started_in or 0.0
        else:
            nodes[0].start()
            took = nodes[0].started_in or 0.0
    except SourceError as exc:
        for node in nodes:
            node.kill()  # whatever booted; the data stays for another try
        raise FlowdeckError(str(exc)) from None
    for node in nodes:
        node.detach()
    save_state(state_file(), cluster.to_state())
    print(f"started in {took:.1f} s")
    _print_cluster(cluster)
    return 0


#: Limits that raise an alarm at once on any machine, and RabbitMQ's defaults that clear it.
_ALARM_LIMITS = {"memory": ("0.0001", None), "disk": (None, "1000000GB"), "clear": ("0.4", "50MB")}


def _alarm(args: argparse.Namespace) -> int:
    from flowdeck.collectors import LocalCluster

    found = started_state()
    if found is None or not found.running:
        print("no private node is running (start one: flowdeck broker start)")
        return 1
    if isinstance(found, LocalCluster):
        if args.node is not None:
            nodes = [_cluster_node(args.node, found)[1]]
        elif args.kind == "clear":
            nodes = [node for node in found.nodes if node.running]
        else:
            nodes = [next(node for node in found.nodes if node.running)]
    elif args.node is not None:
        raise SpecError("node", f"{found.nodename} is a single node; name no node")
    else:
        nodes = [found]
    watermark, disk_limit = _ALARM_LIMITS[args.kind]
    for node in nodes:
        if watermark is not None:
            node.set_memory_watermark(float(watermark))
        if disk_limit is not None:
            node.set_disk_free_limit(disk_limit)
        if args.kind == "clear":
            print(f"{node.nodename}: memory watermark 0.4, disk free limit 50MB (alarms clear)")
        else:
            print(
                f"{node.nodename}: {args.kind} alarm raised; clear it: flowdeck broker alarm clear"
            )
    return 0
