"""`flowdeck collect`: what the broker says, without a run.

``--once`` prints one BrokerSample as a table (or ``--json``); without it, one line per
poll until Ctrl-C. The broker is ``--management-url`` / ``--prometheus-url``, else the one
``--uri`` (or ``FLOWDECK_URI``) points at, else the private node ``flowdeck broker start``
left running (or, when there is none, the newest node a cockpit or ``flowdeck run``
started and still runs), else the local default on port 15672. Credentials come from the uri, or
``--management-user`` and ``FLOWDECK_MANAGEMENT_PASSWORD``; they are never printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from flowdeck.cli import COMMANDS
from flowdeck.collectors import BrokerSample
from flowdeck.engine import URI_ENV, FlowdeckError, broker_of, management_password

if TYPE_CHECKING:
    from flowdeck.collectors import Broker

DEFAULT_URI = "amqp://guest:guest@127.0.0.1:5672/%2F"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "collect",
        help=COMMANDS["collect"],
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("--once", action="store_true", help="one sample, then exit")
    parser.add_argument("--json", action="store_true", help="print samples as JSON")
    parser.add_argument("--uri", metavar="AMQP_URI", help="broker (credentials and vhost)")
    parser.add_argument("--management-url", metavar="URL", help="management API base URL")
    parser.add_argument("--management-user", metavar="USER", help="default: the uri's user")
    parser.add_argument(
        "--management-password-file",
        metavar="FILE",
        help="read the management password from the first line of FILE "
        "(else FLOWDECK_MANAGEMENT_PASSWORD, else the uri's password)",
    )
    parser.add_argument("--prometheus-url", metavar="URL", help="use this Prometheus server")
    parser.add_argument(
        "--job", metavar="JOB", help="Prometheus scrape job of the broker (default: found)"
    )
    parser.add_argument(
        "--instance", metavar="HOST:PORT", help="Prometheus scrape target of the broker"
    )
    parser.add_argument("--queues", metavar="A,B", help="only these queues (default: all)")
    parser.add_argument(
        "--statistics-interval",
        metavar="SECONDS",
        type=float,
        help="the broker's collect_statistics_interval, if known (default: assume 5 s)",
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per request")
    parser.set_defaults(handler=_collect)


def _broker(args: argparse.Namespace) -> Broker:
    """The broker to read: ``--uri``/``FLOWDECK_URI``, else the node `flowdeck broker
    start` left running, else one a cockpit or a running `flowdeck run` owns, else the
    shared local broker. SpecError (exit 2, no password) for a bad uri."""
    uri = args.uri or os.environ.get(URI_ENV, "")
    management_url, interval = args.management_url, args.statistics_interval
    if not uri and not args.management_url and not args.prometheus_url:
        from flowdeck.cli.broker import _attached
        from flowdeck.collectors import registered_nodes

        node = _attached()
        owned = registered_nodes()  # a cockpit's or a running `flowdeck run`'s node
        if node is not None and node.running:
            uri, management_url = node.uri, node.management_url
            interval = node.stats_interval_ms / 1000
        elif owned:
            uri, management_url, interval = owned[-1].uri, owned[-1].management_url, 1.0
    return replace(
        broker_of(uri or DEFAULT_URI),
        management_url=management_url or None,
        statistics_interval=interval,
        management_user=args.management_user or None,
        management_password=management_password(
            None, password_file=getattr(args, "management_password_file", None)
        ),
    )


def _source(args: argparse.Namespace) -> Any:
    from flowdeck.collectors import ManagementCollector

    broker = _broker(args)
    user, password = broker.management_login
    vhost = broker.vhost
    queues = [q for q in args.queues.split(",") if q] if args.queues else None
    if args.prometheus_url:
        from flowdeck.collectors import PrometheusCollector

        return PrometheusCollector(
            args.prometheus_url,
            job=args.job,
            instance=args.instance,
            queue_names=queues,
            vhost=vhost,
            timeout=args.timeout,
        )
    return ManagementCollector(
        broker.usual_management_url,
        username=user,
        password=password,
        vhost=vhost,
        queue_names=queues,
        timeout=args.timeout,
        statistics_interval=broker.statistics_interval,
    )


def _collect(args: argparse.Namespace) -> int:
    return asyncio.run(_collect_async(args))


async def _collect_async(args: argparse.Namespace) -> int:
    from flowdeck.collectors import BrokerWatch, SourceError

    source = _source(args)
    try:
        if args.once:
            try:
                described = await source.check()
            except SourceError as exc:
                raise FlowdeckError(exc.message) from None
            if args.prometheus_url:  # which job and nodes were read, and how often scraped
                print(described, file=sys.stderr if args.json else sys.stdout)
            sample = await source.sample()
            if args.json:
                print(json.dumps(sample_to_json(sample), indent=2))
            else:
                print_sample(sample)
            return 1 if sample.stale else 0
        stop = asyncio.Event()
        watch = BrokerWatch(source, lambda s: print(_line(s, args.json), flush=True))
        with contextlib.suppress(asyncio.CancelledError):
            await watch.run(stop)
        return 0
    finally:
        await source.aclose()


def sample_to_json(sample: BrokerSample) -> dict[str, Any]:
    data = dataclasses.asdict(sample)
    for name in ("age", "stale", "memory_alarm", "disk_alarm", "queue_depth"):
        data[name] = getattr(sample, name)
    return data


def _size(value: int | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value = value / 1024  # type: ignore[assignment]
    return str(value)


def _num(value: float | int | None, fmt: str = "{:,.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _line(sample: BrokerSample, as_json: bool) -> str:
    if as_json:
        return json.dumps(sample_to_json(sample))
    clock = time.strftime("%H:%M:%S", time.localtime(sample.taken_at))
    state = f"STALE ({sample.stale_reason})" if sample.stale else f"age {sample.age:.1f} s"
    alarms = (
        ",".join(
            a for a, on in (("memory", sample.memory_alarm), ("disk", sample.disk_alarm)) if on
        )
        or "none"
    )
    mem = sum(n.mem_used or 0 for n in sample.nodes)
    return (
        f"{clock} {sample.source} {state} | alarms {alarms} | mem {_size(mem)} | "
        f"publish {_num(sample.publish_rate)}/s deliver {_num(sample.deliver_rate)}/s | "
        f"unconfirmed {_num(sample.unconfirmed, '{}')} unacked {_num(sample.unacked, '{}')} | "
        f"blocked {_num(sample.connections_blocked, '{}')}/{_num(sample.connections, '{}')} | "
        f"ready {sample.queue_ready} in {len(sample.queues)} queues"
    )


def print_sample(sample: BrokerSample) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(sample.taken_at))
    head = (
        f"[bold]{sample.source}[/] at {when}: RabbitMQ {sample.broker_version or '?'}, "
        f"figures {sample.age:.1f} s old, statistics every {sample.statistics_interval:g} s"
    )
    console.print(head)
    if sample.stale:
        console.print(f"[bold red]STALE[/]: {sample.stale_reason}")
    nodes = Table(title="nodes", title_justify="left")
    for column in (
        "node",
        "memory",
        "limit",
        "mem alarm",
        "disk free",
        "disk limit",
        "disk alarm",
        "fds",
        "figures age",
    ):
        nodes.add_column(column)
    for node in sample.nodes:
        age = "-" if node.figures_at is None else f"{sample.taken_at - node.figures_at:.1f} s"
        nodes.add_row(
            node.name,
            _size(node.mem_used),
            _size(node.mem_limit),
            "[red]ALARM[/]" if node.mem_alarm else "ok",
            _size(node.disk_free),
            _size(node.disk_free_limit),
            "[red]ALARM[/]" if node.disk_alarm else "ok",
            f"{_num(node.fd_used, '{}')}/{_num(node.fd_total, '{}')}",
            age,
        )
    console.print(nodes)
    totals = Table(title="broker-wide", title_justify="left")
    for column in (
        "publish/s",
        "confirm/s",
        "deliver/s",
        "ack/s",
        "redeliver/s",
        "unconfirmed",
        "unacked",
        "connections",
        "blocked",
        "blocking",
    ):
        totals.add_column(column, justify="right")
    totals.add_row(
        _num(sample.publish_rate),
        _num(sample.confirm_rate),
        _num(sample.deliver_rate),
        _num(sample.ack_rate),
        _num(sample.redeliver_rate),
        _num(sample.unconfirmed, "{:,}"),
        _num(sample.unacked, "{:,}"),
        _num(sample.connections, "{}"),
        _num(sample.connections_blocked, "{}"),
        _num(sample.connections_blocking, "{}"),
    )
    console.print(totals)
    queues = Table(title=f"queues ({len(sample.queues)})", title_justify="left")
    for column in ("queue", "type", "ready", "unacked", "consumers", "publish/s", "deliver/s"):
        queues.add_column(column, justify="left" if column in ("queue", "type") else "right")
    for q in sample.queues[:50]:
        queues.add_row(
            q.name,
            q.type,
            f"{q.ready:,}",
            f"{q.unacked:,}",
            str(q.consumers),
            _num(q.publish_rate),
            _num(q.deliver_rate),
        )
    console.print(queues)
