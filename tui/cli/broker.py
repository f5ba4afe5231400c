"""`flowdeck broker start|status|stop|restart`: a private RabbitMQ node for demos and runs.

``start`` launches a node of its own (own name, ports, data dir, management and prometheus
plugins, statistics every second), prints where it is and leaves it running, keeping its
state in a small file under the user's state directory so ``status`` and ``stop`` find
it. ``start --foreground`` keeps the node until Ctrl-C and then stops it.

A node ``start`` leaves running belongs to the user until ``stop``: it outlives the
command (``LocalBroker.detach``). ``stop --keep-data`` stops it and keeps its data and
state; ``restart`` brings it back with the same name, ports and data directory, so durable
queues and their messages are still there.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path
from typing import Any

import platformdirs

from flowdeck.engine import FlowdeckError, SpecError

STATE_ENV = "FLOWDECK_BROKER_STATE"


def state_file() -> Path:
    """``$FLOWDECK_BROKER_STATE`` if set, else ``local-broker.json`` in the state dir."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    return Path(platformdirs.user_state_dir("flowdeck")) / "local-broker.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="start, show or stop a private RabbitMQ node",
        description="A private RabbitMQ node from the installed rabbitmq-server, on free "
        "ports of 127.0.0.1, with the management and prometheus plugins and statistics "
        "every second. It never touches a broker already running on the machine.",
    )
    actions = parser.add_subparsers(dest="broker_action", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="start the node and print its URLs")
    start.add_argument(
        "--foreground", action="store_true", help="keep the node until Ctrl-C, then stop it"
    )
    start.add_argument("--amqp-port", type=int, help="AMQP port (default: a free one)")
    start.add_argument("--management-port", type=int, help="management port (default: free)")
    start.add_argument("--prometheus-port", type=int, help="prometheus port (default: free)")
    start.set_defaults(handler=_start)
    status = actions.add_parser(
        "status",
        help="say whether the node runs, and where, and list the private nodes other "
        "flowdeck processes (cockpit, run) started, with their owner",
    )
    status.set_defaults(handler=_status)
    stop = actions.add_parser("stop", help="stop the node and remove its data")
    stop.add_argument(
        "--keep-data",
        action="store_true",
        help="keep the node's data (durable queues, messages) for `flowdeck broker restart`",
    )
    stop.set_defaults(handler=_stop)
    restart = actions.add_parser(
        "restart",
        help="bring the node back with its data (same name, ports, data dir)",
        description="Start the private node again after `flowdeck broker stop --keep-data` "
        "(or a crash) with the same node name, ports and data directory, so durable queues "
        "and persistent messages are still there; a running node is stopped first.",
    )
    restart.add_argument(
        "name", nargs="?", help="the node's name, to make sure it is the one meant (optional)"
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
    alarm.set_defaults(handler=_alarm)


def _print_node(node: Any) -> None:
    print(f"node        {node.nodename}")
    print(f"uri         {node.uri}")
    print(f"management  {node.management_url}  (guest/guest)")
    print(f"prometheus  {node.prometheus_url}/metrics")
    print(f"data        {node.base_dir}")


def _attached() -> Any | None:
    from flowdeck.collectors import LocalBroker, load_state

    path = state_file()
    if not path.exists():
        return None
    try:
        return LocalBroker.attach(load_state(path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SpecError(
            STATE_ENV,
            f"the broker state file {path} cannot be read ({exc}); delete it and start again",
        ) from None


def _data_kept(node: Any) -> bool:
    """A node that does not run but whose data directory is still there."""
    return not node.running and Path(node.base_dir).is_dir()


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
    if parsed.host not in ("127.0.0.1", "localhost", "::1") or port is None:
        return None
    try:
        node = _attached()
    except FlowdeckError:
        return None
    if node is None or node.amqp_port != port or not node.running:
        return None
    return node


def _start(args: argparse.Namespace) -> int:
    from flowdeck.collectors import LocalBroker, SourceError, save_state

    running = _attached()
    if running is not None and running.running:
        print("a private node is already running:")
        _print_node(running)
        return 0
    if running is not None and _data_kept(running):
        raise FlowdeckError(
            f"the stopped private node {running.nodename} keeps its data in "
            f"{running.base_dir}: bring it back with `flowdeck broker restart`, or delete it "
            "with `flowdeck broker stop`"
        )
    node = LocalBroker(
        name="flowdeck",
        # beside its state file: two nodes with two state files never share (or delete)
        # each other's data
        base_dir=state_file().with_suffix(".data"),
        amqp_port=args.amqp_port,
        management_port=args.management_port,
        prometheus_port=args.prometheus_port,
    )
    print("starting a private RabbitMQ node ...", flush=True)
    try:
        node.start()
    except SourceError as exc:
        node.stop(cleanup=True)
        raise FlowdeckError(str(exc)) from None
    print(f"started in {node.started_in:.1f} s")
    _print_node(node)
    if not args.foreground:
        save_state(state_file(), node.detach())
        print("stop it with: flowdeck broker stop")
        return 0
    print("Ctrl-C stops it", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        while node.running:
            time.sleep(0.5)
        print("the node stopped by itself; its logs are in", node.log_dir)
        return 1
    except KeyboardInterrupt:
        print("\nstopping the node ...", flush=True)
        return 0
    finally:
        node.stop(cleanup=True)


def _status(args: argparse.Namespace) -> int:
    """The node ``start`` left running, then every node another flowdeck process (a
    cockpit, a ``flowdeck run``) started and still owns; exit 0 when one of them runs."""
    del args
    from flowdeck.collectors import registered_nodes

    node = _attached()
    owned = registered_nodes()
    code = 0
    said = node is not None and (node.running or _data_kept(node))
    if node is not None and _data_kept(node):
        print(
            f"{node.nodename} is stopped; its data is kept in {node.base_dir} "
            "(bring it back: flowdeck broker restart)"
        )
        code = 1
    elif node is not None and node.running:
        print("running")
        _print_node(node)
    elif not owned:
        print("no private node is running (start one: flowdeck broker start)")
        return 1
    for entry in owned:
        if said:
            print()
        said = True
        command = entry.owner_command or "?"
        print(f"running, owned by pid {entry.owner_pid}: {command}")
        print(f"node        {entry.nodename}")
        print(f"uri         {entry.uri}")
        print(f"management  {entry.management_url}  (guest/guest)")
        print(f"prometheus  {entry.prometheus_url}/metrics")
        print(f"data        {entry.base_dir}")
    return code


def _stop(args: argparse.Namespace) -> int:
    from flowdeck.collectors import save_state

    node = _attached()
    path = state_file()
    if node is None:
        print("no private node is running")
        return 0
    was_running = node.running
    if args.keep_data:
        node.stop(cleanup=False)
        save_state(path, node.to_state())  # no pid: `restart` starts it again
        said = f"stopped {node.nodename}" if was_running else "the node had already stopped"
        print(f"{said}; its data stays in {node.base_dir} (bring it back: flowdeck broker restart)")
        return 0
    kept = _data_kept(node)
    node.stop(cleanup=True)
    path.unlink(missing_ok=True)
    if was_running:
        print(f"stopped {node.nodename}")
    elif kept:
        print(f"the node had already stopped; removed its data from {node.base_dir}")
    else:
        print("the node had already stopped")
    return 0


def _restart(args: argparse.Namespace) -> int:
    from flowdeck.collectors import SourceError, save_state

    node = _attached()
    path = state_file()
    if node is None:
        raise FlowdeckError(
            f"no private node to restart: the state file {path} does not exist; start one "
            "with: flowdeck broker start"
        )
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


#: Limits that raise an alarm at once on any machine, and RabbitMQ's defaults that clear it.
_ALARM_LIMITS = {"memory": ("0.0001", None), "disk": (None, "1000000GB"), "clear": ("0.4", "50MB")}


def _alarm(args: argparse.Namespace) -> int:
    node = _attached()
    if node is None or not node.running:
        print("no private node is running (start one: flowdeck broker start)")
        return 1
    watermark, disk_limit = _ALARM_LIMITS[args.kind]
    if watermark is not None:
        node.set_memory_watermark(float(watermark))
    if disk_limit is not None:
        node.set_disk_free_limit(disk_limit)
    if args.kind == "clear":
        print(f"{node.nodename}: memory watermark 0.4, disk free limit 50MB (alarms clear)")
    else:
        print(f"{node.nodename}: {args.kind} alarm raised; clear it: flowdeck broker alarm clear")
    return 0
