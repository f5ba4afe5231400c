"""What several subcommands share: a RunSpec from flags, and which broker to use.

Every RunSpec field is a flag with the same name (dashes for underscores), built from
``engine.spec.FIELDS`` so a new field is a new flag. Values are taken as text and checked
here or by RunSpec, so a bad one is a SpecError naming the field, the value and the range
(one line, exit 2) instead of argparse's usage dump.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowdeck.collectors import redact
from flowdeck.engine import (
    DEFAULT_PRESET,
    FIELDS,
    URI_ENV,
    FlowdeckError,
    RunSpec,
    ScheduleStep,
    SpecError,
    format_number,
    load_spec_file,
    management_password,
    preset,
    schedule_step,
    spec_from_mapping,
)

if TYPE_CHECKING:
    from flowdeck.collectors import Broker, Provisioner
    from flowdeck.engine import SparkPlacement

#: Scale of the default preset when ``flowdeck run`` gets no spec at all: fits 2 cores.
DEFAULT_SCALE = 0.05

#: Fields that get a special flag instead of the generic one.
_SPECIAL = {"duration", "queue_args", "schedule", "thresholds"}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str, field: str = "duration") -> float:
    """Seconds from ``30``, ``30s``, ``5m``, ``1.5h``."""
    match = _DURATION.match(text)
    if not match:
        raise SpecError(field, f"{field} must be seconds like 30, 30s, 5m or 1h, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_number(field: str, text: str) -> int | float:
    """A flag's number, whole for whole-number fields."""
    kind = FIELDS[field].kind
    try:
        value = float(text)
    except ValueError:
        raise SpecError(field, f"{field} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise SpecError(field, f"{field} must be a finite number, got {text!r}")
    if kind is int:
        if not value.is_integer():
            raise SpecError(field, f"{field} must be a whole number, got {text!r}")
        return int(value)
    return value


def parse_scalar(text: str) -> int | float | bool | str:
    """A queue argument's value: a number, true/false, or text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    return text


def parse_queue_args(items: list[str]) -> dict[str, int | float | bool | str]:
    args: dict[str, int | float | bool | str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SpecError(
                "queue_args",
                f"queue_args must be NAME=VALUE (e.g. x-max-length=10000), got {item!r}",
            )
        args[name.strip()] = parse_scalar(value.strip())
    return args


def parse_step(text: str, field: str = "change") -> ScheduleStep:
    """``AT:CHANGE`` (``30:inflight=200``, ``1m:mark "warm"``, ``20s:fault kill 2``) as a
    schedule step."""
    at_text, sep, change_text = text.partition(":")
    if not sep:
        raise SpecError(field, f"{field} must be AT:CHANGE like 30s:inflight=200, got {text!r}")
    at = parse_duration(at_text, field)
    try:
        return schedule_step(at, change_text)
    except SpecError as exc:
        raise SpecError(field, f"{field} {text!r}: {exc.message}") from None


def parse_schedule_flag(text: str) -> list[ScheduleStep]:
    """``--schedule "0:inflight=10; 60:inflight=20"``: steps separated by ``;``."""
    return [parse_step(part.strip(), "schedule") for part in text.split(";") if part.strip()]


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset``, ``--spec``, ``--scale`` and one flag per RunSpec field."""
    source = parser.add_argument_group("what to run")
    source.add_argument("--preset", metavar="NAME", help="a built-in preset (flowdeck presets)")
    source.add_argument("--spec", metavar="FILE", help="a TOML spec file")
    source.add_argument(
        "--scale", metavar="F", help="shrink counts proportionally (e.g. 0.05) to fit a machine"
    )
    source.add_argument(
        "--duration",
        metavar="TIME",
        help="how long the run lasts: 30, 30s, 5m, 1h; stretches a preset's schedule to fit",
    )
    source.add_argument(
        "--change",
        metavar="AT:CHANGE",
        action="append",
        default=[],
        help="add a timed change, e.g. 30s:inflight=200 or '1m:mark \"warm\"' (repeatable)",
    )
    fields_group = parser.add_argument_group("spec fields (override the preset or file)")
    for name, info in FIELDS.items():
        if name in ("duration", "thresholds"):  # thresholds: flowdeck run --threshold
            continue
        help_text = info.help.replace("%", "%%")  # argparse %-formats help
        if info.low is not None and info.high is not None:
            unit = f" {info.unit}" if info.unit else ""
            help_text += f" ({format_number(info.low)}..{format_number(info.high)}{unit})"
        if info.choices:
            help_text += f" ({', '.join(info.choices)})"
        if name == "queue_args":
            fields_group.add_argument(
                flag(name),
                dest=name,
                metavar="NAME=VALUE",
                action="append",
                default=None,
                help=help_text + " (repeatable)",
            )
        elif name == "schedule":
            fields_group.add_argument(
                flag(name),
                dest=name,
                metavar="STEPS",
                default=None,
                help="timed changes replacing the spec's: '0:inflight=10; 60:inflight=20'",
            )
        elif info.kind is bool:
            fields_group.add_argument(
                flag(name),
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            fields_group.add_argument(
                flag(name), dest=name, metavar="VALUE", default=None, help=help_text
            )


def flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields given as flags, converted (duration and schedule excepted)."""
    values: dict[str, Any] = {}
    for name, info in FIELDS.items():
        if name in _SPECIAL:
            continue
        raw = getattr(args, name, None)
        if raw is None:
            continue
        if info.kind in (int, float):
            values[name] = parse_number(name, raw)
        else:
            values[name] = raw
    if getattr(args, "queue_args", None):
        values["queue_args"] = parse_queue_args(args.queue_args)
    return values


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """The run's spec: preset or file (or the default preset), scaled, then the flags,
    then the duration (stretching the schedule) and the added changes.
    """
    if args.preset and args.spec:
        raise SpecError("preset", "give either --preset or --spec, not both")
    scale = None
    if args.scale is not None:
        try:
            scale = float(args.scale)
        except ValueError:
            raise SpecError("scale", f"scale must be a number, got {args.scale!r}") from None
    values = flag_values(args)
    spec: RunSpec
    if args.spec:
        spec = load_spec_file(Path(args.spec), scale)
    else:
        name = args.preset
        if name is None and not values:
            name = DEFAULT_PRESET
            scale = DEFAULT_SCALE if scale is None else scale
        spec = preset(name) if name else spec_from_mapping({})
        if scale is not None:
            spec = spec.scaled(scale)
    if values:
        spec = spec_from_mapping(values, spec)
    if args.duration is not None:
        spec = spec.with_duration(parse_duration(args.duration))  # RunSpec checks the range
    steps = list(spec.schedule)
    if getattr(args, "schedule", None) is not None:
        steps = parse_schedule_flag(args.schedule)
    steps += [parse_step(text) for text in args.change]
    if steps != list(spec.schedule):
        spec = spec_from_mapping({"schedule": sorted(steps, key=lambda s: s.at)}, spec)
    return spec


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    """``--management-url`` and ``--prometheus-url`` are spec fields; these are not."""
    group = parser.add_argument_group("broker")
    group.add_argument(
        "--management-user", metavar="USER", help="management API user (default: the uri's)"
    )
    group.add_argument(
        "--management-password",
        metavar="PASSWORD",
        help="management API password (shows in ps: prefer the file or "
        "FLOWDECK_MANAGEMENT_PASSWORD; default: the AMQP password)",
    )
    group.add_argument(
        "--management-password-file",
        metavar="FILE",
        help="read the management API password from the first line of FILE",
    )


def management_password_from(args: argparse.Namespace) -> str | None:
    """The management password of ``--management-password-file``,
    ``FLOWDECK_MANAGEMENT_PASSWORD`` or ``--management-password`` (in that order, see
    engine.credentials); None means the AMQP password."""
    return management_password(
        getattr(args, "management_password", None),
        password_file=getattr(args, "management_password_file", None),
    )


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
        from flowdeck.tui.cli.broker import started_local_nodes, started_node_for

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
        announce("no --uri or FLOWDECK_URI: starting a private RabbitMQ node ...")
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
    from flowdeck.collectors import Provisioner

    with Provisioner(name="flowdeck-run") as provisioner:
        yield resolve_broker(spec, provisioner, environ, announce)


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
    from flowdeck.engine import ControlAddress, SparkPlacement, TlsOptions, parse_control_address

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
