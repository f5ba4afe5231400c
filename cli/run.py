"""`flowdeck run`: a load run without the cockpit.

Prints one line a second (elapsed, target and achieved rates, pending confirms, latency,
blocked connections) and every event as it happens, then a summary with the data-safety
accounting. ``--json`` puts the machine-readable summary alone on stdout (progress goes to
stderr). Ctrl-C stops cleanly (publishing stops, consumers drain, the summary prints) and
the command exits 130, as shells expect of an interrupted command (SIGTERM 143, SIGHUP
129), so ``flowdeck run ... && flowdeck report ...`` does not carry on; a second Ctrl-C
ends everything at once.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shlex
import signal
import ssl
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from flowdeck.cli import COMMANDS
from flowdeck.cli.common import (
    add_broker_arguments,
    add_spec_arguments,
    management_password_from,
    parse_drain,
    parse_duration,
    sessions_dir,
)
from flowdeck.cli.import_perftest import add_perftest_option, spec_from_run_args
from flowdeck.cli.summary import add_threshold_arguments, ms_text
from flowdeck.collectors import printable, redact
from flowdeck.collectors.broker_uri import split_uris
from flowdeck.engine import (
    UNCHECKED_CONNECTIONS_LIMIT,
    EventKind,
    FlowdeckError,
    LatencyKind,
    NullSink,
    Percentiles,
    RunEvent,
    RunSpec,
    RunSummary,
    SendBasis,
    SpecError,
    Tick,
)

# The engine's clients, the controller and the broker's collectors load when a run starts
# (in the functions below), not for `flowdeck run --help` or a bad flag.
if TYPE_CHECKING:
    from flowdeck.collectors import Broker, BrokerSample
    from flowdeck.engine import (
        ControlAddress,
        Controller,
        ControlServer,
        HostRow,
        SparkPlacement,
        TlsOptions,
    )

E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)
_QUIET_EVENTS = {EventKind.PHASE}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help=COMMANDS["run"],
        description=(
            "Run a load spec against RabbitMQ without the cockpit. The spec comes from "
            "--preset, --spec FILE or flags (one per spec field); flags refine a preset or "
            "file. With none of them, runs the default preset scaled to a small machine."
        ),
    )
    add_spec_arguments(parser)
    parser.add_argument(
        "--matrix",
        metavar="BENCH",
        help="run every seed figure of one benchmark (e.g. bench2: mirrored and quorum "
        "queues, no confirms, in-flight sweep, sweep with multiple-flag acks) one after the "
        "other, each recorded as its own session; --scale and flags apply to each; "
        "'protocols': the same load over AMQP 0.9.1 and 1.0 to quorum queues and over AMQP "
        "0.9.1 and the stream protocol to stream queues",
    )
    parser.add_argument(
        "--at-capacity",
        action="store_true",
        help="with --matrix: first find the rate this broker sustains for the benchmark's "
        "most fragile run (mirrored queues without confirms; --autotune rate at --scale), "
        "then run the matrix at the scale just past it (1.25x), where the seed's runs were",
    )
    add_perftest_option(parser)  # --perftest "PerfTest options" (cli/import_perftest.py)
    add_broker_arguments(parser)
    add_secret_arguments(parser)
    add_control_arguments(parser)
    add_spark_arguments(parser)
    add_autotune_arguments(parser)
    parser.add_argument(
        "--skip-capacity-check",
        action="store_true",
        help="start even when the broker's socket limit says the run does not fit, or "
        f"cannot be read for a run of more than {UNCHECKED_CONNECTIONS_LIMIT} connections "
        "(warned about instead)",
    )
    out = parser.add_argument_group("output and recording")
    out.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    add_threshold_arguments(parser)
    out.add_argument("--sessions-dir", metavar="DIR", help="where sessions are recorded")
    out.add_argument("--no-record", action="store_true", help="do not record a session")
    out.add_argument("--cleanup", action="store_true", help="delete the run's queues when it ends")
    out.add_argument(
        "--metrics-port",
        metavar="PORT",
        help="serve client metrics for Prometheus at http://127.0.0.1:PORT/metrics "
        "(PerfTest's names; 0 = any free port)",
    )
    out.add_argument(
        "--start-prometheus",
        action="store_true",
        help="start a throwaway Prometheus server scraping the broker's :15692 (or the "
        "private node's endpoint), watch the run through it and keep its series",
    )
    out.add_argument(
        "--drain",
        metavar="SECONDS",
        default="5",
        help="how long consumers may drain after publishing stops: 5, 30s, 2m "
        "(default 5 s, at most a day)",
    )
    parser.set_defaults(handler=run_command)


def add_secret_arguments(parser: argparse.ArgumentParser) -> None:
    """Password and TLS options: kept off the command line's URI (see engine.credentials
    and engine.tls for the URI parameters they become)."""
    group = parser.add_argument_group(
        "credentials and TLS",
        "The password may also come from FLOWDECK_PASSWORD, the whole URI from FLOWDECK_URI.",
    )
    group.add_argument(
        "--password-file",
        metavar="FILE",
        help="read the broker password from the first line of FILE",
    )
    group.add_argument(
        "--ca-file", metavar="PEM", help="CA certificate(s) to trust for amqps:// and https://"
    )
    group.add_argument("--cert-file", metavar="PEM", help="client certificate for TLS")
    group.add_argument("--key-file", metavar="PEM", help="private key of the client certificate")
    group.add_argument(
        "--insecure",
        action="store_true",
        help="do not verify the broker's TLS certificate (lab brokers only; warned about)",
    )


def add_autotune_arguments(parser: argparse.ArgumentParser) -> None:
    """The autopilot (docs/engine.md): search a setting live, leave the run at the best."""
    group = parser.add_argument_group(
        "autopilot",
        "Step a setting up the seed's percentages of the target rate, each until msg/s is "
        "steady, judge each step by the report's rules, stop when throughput stops rising "
        "or a bound is passed, and leave the run at the report's recommended value.",
    )
    group.add_argument(
        "--autotune",
        metavar="SETTING",
        help="search this setting: inflight, prefetch or ack_every (the best value), or rate "
        "(the highest rate this broker sustains for the spec: its capacity)",
    )
    group.add_argument(
        "--autotune-max-p99",
        metavar="TIME",
        help="stop at a step whose e2e p99 is above this (100ms, 0.1s; a bare number is ms)",
    )
    group.add_argument(
        "--autotune-max-backlog",
        metavar="MESSAGES",
        help="stop at once when more messages than this are ready in the run's queues",
    )
    group.add_argument(
        "--autotune-then",
        choices=("stay", "stop"),
        default="stay",
        help="when the search is done: stay at its choice until the run's end (default), or "
        "stop the run there (a capacity probe)",
    )
    group.add_argument(
        "--autotune-hold",
        metavar="TIME",
        help="hold each step at least this long before judging it (default 6s; at most 3x)",
    )


def autotune_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The autopilot's flags, checked before anything starts (bad ones: exit 2); None
    without --autotune."""
    if not getattr(args, "autotune", None):
        return None
    from flowdeck.engine import Autopilot

    setting = args.autotune.strip().lower().replace("-", "_")
    if setting not in {s.value for s in Autopilot.TUNABLE}:
        names = ", ".join(s.value for s in Autopilot.TUNABLE)
        raise SpecError("autotune", f"--autotune takes {names}, got {args.autotune!r}")
    max_p99, backlog, hold = args.autotune_max_p99, args.autotune_max_backlog, args.autotune_hold
    if max_p99 is not None and max_p99.strip().replace(".", "", 1).isdigit():
        max_p99 += "ms"
    if backlog is not None and not backlog.strip().isdigit():
        wrong = f"--autotune-max-backlog must be a whole number, got {backlog!r}"
        raise SpecError("autotune_max_backlog", wrong)
    options: dict[str, Any] = {
        "max_p99_ms": None if max_p99 is None else 1e3 * parse_duration(max_p99, "max p99"),
        "max_backlog": None if backlog is None else int(backlog),
        "hold_s": None if hold is None else parse_duration(hold, "autotune-hold"),
    }
    for name in ("max_p99_ms", "hold_s"):
        if options[name] == 0:
            flag = "--autotune-max-p99" if name == "max_p99_ms" else "--autotune-hold"
            raise SpecError(name, f"{flag} must be more than 0, got 0")
    return {"setting": setting, **options}


def add_control_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the run's control endpoint listens (see docs/control-api.md)."""
    group = parser.add_argument_group(
        "control endpoint",
        "Every run serves an HTTP API that flowdeck steer, runs and attach use; by default "
        "on 127.0.0.1, a free port, with a random token written where they find it.",
    )
    group.add_argument(
        "--control", metavar="HOST:PORT", help="listen here (default 127.0.0.1, a free port)"
    )
    group.add_argument(
        "--control-allow-remote",
        action="store_true",
        help="allow --control on an address beyond this machine (needs TLS: the cert options)",
    )
    group.add_argument("--control-cert-file", metavar="PEM", help="TLS certificate to serve")
    group.add_argument("--control-key-file", metavar="PEM", help="its private key")


def control_options(args: argparse.Namespace) -> tuple[ControlAddress, ssl.SSLContext | None]:
    """The endpoint's address and TLS from the flags, checked before anything starts."""
    from flowdeck.engine import (
        ControlAddress,
        TlsOptions,
        check_exposure,
        parse_control_address,
        server_tls_context,
    )

    address = (
        parse_control_address(args.control) if getattr(args, "control", None) else None
    ) or ControlAddress()
    tls = TlsOptions(
        cert_file=getattr(args, "control_cert_file", None) or "",
        key_file=getattr(args, "control_key_file", None) or "",
    )
    check_exposure(
        address, allow_remote=bool(getattr(args, "control_allow_remote", False)), tls=tls
    )
    return address, server_tls_context(tls)


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """Workers as Spark tasks on other hosts (docs/spark-workers.md)."""
    group = parser.add_argument_group(
        "workers on a Spark cluster",
        "Start the --workers as tasks of a Spark application; each connects back to this "
        "process over TCP with the run's token and runs the same worker code as a local one.",
    )
    group.add_argument(
        "--spark-master", metavar="MASTER", help="spark://HOST:PORT, or local[N] on this host"
    )
    group.add_argument(
        "--spark-listen",
        metavar="HOST:PORT",
        help="where the workers connect back (default 127.0.0.1, a free port; beyond this "
        "machine it needs --spark-cert-file and --spark-key-file)",
    )
    group.add_argument("--spark-cert-file", metavar="PEM", help="TLS certificate of the link")
    group.add_argument("--spark-key-file", metavar="PEM", help="its private key")


def spark_placement(args: argparse.Namespace, workers: int) -> SparkPlacement | None:
    """The Spark placement the flags ask for (None: local workers), checked before
    anything starts (bad flags: exit 2)."""
    from flowdeck.engine import spark_placement_of

    return spark_placement_of(
        getattr(args, "spark_master", None) or "",
        workers,
        listen=getattr(args, "spark_listen", None) or "",
        cert_file=getattr(args, "spark_cert_file", None) or "",
        key_file=getattr(args, "spark_key_file", None) or "",
    )


def print_hosts(rows: list[HostRow], out: TextIO) -> None:
    """The per-host table under the summary: where each worker ran and what it did."""
    if not rows:
        return
    lines = [
        "",
        f"{'worker':<7}{'host':<24}{'pid':>8}{'pub':>5}{'con':>5}{'published':>12}"
        f"{'msg/s':>10}{'consumed':>12}{'msg/s':>10}{'CPU':>7}",
    ]
    for r in rows:
        cpu = "-" if r.cpu_percent is None else f"{r.cpu_percent:.0f}%"
        lines.append(
            f"{r.worker:<7}{r.host[:23]:<24}{r.pid:>8}{r.publishers:>5}{r.consumers:>5}"
            f"{r.published:>12,}{r.publish_rate:>10,.1f}{r.consumed:>12,}{r.consume_rate:>10,.1f}"
            f"{cpu:>7}{'  LOST' if r.lost else ''}"
        )
    out.write("\n".join(lines) + "\n")
    out.flush()


def tls_flags(args: argparse.Namespace) -> TlsOptions:
    from flowdeck.engine import TlsOptions

    return TlsOptions(
        ca_file=getattr(args, "ca_file", None) or "",
        cert_file=getattr(args, "cert_file", None) or "",
        key_file=getattr(args, "key_file", None) or "",
        insecure=bool(getattr(args, "insecure", False)),
    )


def check_connection_flags(args: argparse.Namespace, uris: tuple[str, ...]) -> None:
    """The password file, the TLS files and the uris they apply to, checked before a
    private node starts or a broker is touched (bad ones: one line, exit 2)."""
    from flowdeck.engine import read_password_file, ssl_context

    if getattr(args, "password_file", None):
        read_password_file(args.password_file)
    options = tls_flags(args)
    if not options.configured:
        return
    ssl_context(options)  # the files now, not when a worker first connects
    for uri in uris:
        _require_tls_uri(uri)


def _require_tls_uri(uri: str) -> None:
    if not uri.startswith("amqps://"):
        raise SpecError(
            "uri",
            f"TLS options need an amqps:// uri, got {redact(uri)!r}; "
            "use amqps:// and the broker's TLS port (usually 5671)",
        )


def connection_broker(broker: Broker, args: argparse.Namespace) -> Broker:
    """``broker`` with the password from --password-file/FLOWDECK_PASSWORD, the TLS
    options of the flags on every node, and the management API's own credentials."""
    from flowdeck.engine import resolve_uri, tls_options, with_tls_options

    uris = resolve_uri(broker.uri_list, password_file=getattr(args, "password_file", None))
    options = tls_flags(args)
    nodes = []
    for uri in broker.with_nodes(uris).uris:
        if options.configured:
            _require_tls_uri(uri)
        uri = with_tls_options(uri, options)
        tls_options(uri)  # a bad verify= parameter is an error now, not in the workers
        nodes.append(uri)
    return replace(
        broker.with_nodes(nodes),
        management_user=getattr(args, "management_user", None) or None,
        management_password=management_password_from(args),
    )


def run_command(args: argparse.Namespace) -> int:
    if getattr(args, "matrix", None):
        return _run_matrix(args)
    return _run_one(args)


def _run_matrix(args: argparse.Namespace) -> int:
    """``--matrix benchN``: the benchmark's figure presets as consecutive recorded runs,
    then their session ids and the one report command over them. A run refused for its
    input (exit 2) stops the matrix; a failed one does not. ``--step`` and ``--duration``
    apply as :func:`matrix_run_args` says."""
    from flowdeck.engine import FIGURES, matrix

    if args.preset or args.spec or getattr(args, "perftest", None):
        raise SpecError("matrix", "--matrix picks the presets itself: drop --preset/--spec")
    names = matrix(args.matrix)
    if getattr(args, "step", None):
        parse_duration(args.step, "step")  # a bad --step: exit 2 before the first run
    if getattr(args, "at_capacity", False):
        scale = _capacity_scale(args, names)
        if scale is None:
            return 1
        args = argparse.Namespace(**{**vars(args), "scale": f"{scale:g}"})
    figure_of = {f.preset: f.number for f in FIGURES.values()}
    codes: list[tuple[str, int]] = []
    sessions: list[str] = []
    for index, name in enumerate(names, 1):
        figure = f" (fig {figure_of[name]} of the seed)" if name in figure_of else ""
        print(f"matrix {args.matrix}: run {index} of {len(names)}: {name}{figure}", flush=True)
        one = matrix_run_args(args, name)
        try:
            code, session_dir = _run_recorded(one)
        except FlowdeckError as exc:  # said now, so the matrix's last line can follow
            print(f"flowdeck: {printable(str(exc))}", file=sys.stderr, flush=True)
            code, session_dir = (2 if isinstance(exc, SpecError) else 1), None
        codes.append((name, code))
        if session_dir:
            sessions.append(Path(session_dir).name)
        if code == 2 or code > 128:  # refused input, or interrupted: no next run
            break
    print(f"matrix {args.matrix}: " + ", ".join(f"{name} exit {code}" for name, code in codes))
    print_matrix_sessions(args, sessions)
    return max(code for _, code in codes)


#: How far past the capacity found a matrix --at-capacity runs: the seed's runs were past
#: their broker's capacity, by more than jitter.
PAST_CAPACITY = 1.25


def fragile_preset(names: list[str]) -> str:
    """The matrix's most fragile run: mirrored queues without confirms (the seed's first to
    fall behind), else a run without confirms, else the first."""
    from flowdeck.engine import PRESETS

    specs = {name: PRESETS[name] for name in names}
    return next(
        (n for n, s in specs.items() if s.mirroring and not s.confirms),
        next((n for n, s in specs.items() if not s.confirms), names[0]),
    )


def scale_past(full: RunSpec, capacity: float) -> float:
    """The scale of ``full`` (a preset at scale 1) whose total target rate is at least
    :data:`PAST_CAPACITY` times ``capacity`` (msg/s). Scaling keeps each publisher's rate
    and scales their number (``RunSpec.scaled``, rounded), so the scale is the fewest whole
    publishers that reach it over the preset's: a scale rounded on its own could round the
    publishers down to the capacity itself (4,000 msg/s held at 2,000 per publisher: 0.12
    is 2 publishers, 4,000 msg/s; 0.15 is 3, 6,000 msg/s)."""
    if full.publishers <= 0 or full.rate <= 0:
        raise SpecError("at_capacity", f"{full.name} has no target rate to scale")
    publishers = max(1, math.ceil(PAST_CAPACITY * capacity / full.rate - 1e-9))
    return min(100.0, float(f"{publishers / full.publishers:.6g}"))


def _capacity_scale(args: argparse.Namespace, names: list[str]) -> float | None:
    """Find the capacity of the matrix's most fragile run at ``--scale`` (``--autotune
    rate``, the run stopped when the search ends) and the scale whose total target rate is
    :data:`PAST_CAPACITY` times it; None when no rate held (said)."""
    from flowdeck.engine import open_session, preset

    name = fragile_preset(names)
    probe_scale = float(args.scale) if getattr(args, "scale", None) else 0.05
    spec = preset(name, probe_scale)
    print(
        f"matrix {args.matrix} --at-capacity: finding what this broker sustains for {name} "
        f"at scale {probe_scale:g} ({spec.publishers} publisher(s), {spec.queues} queue(s))",
        flush=True,
    )
    probe = argparse.Namespace(
        **{
            **vars(args),
            "matrix": None,
            "preset": name,
            "scale": f"{probe_scale:g}",
            "step": None,
            "duration": args.duration or "600s",
            "autotune": "rate",
            "autotune_then": "stop",
        }
    )
    code, session_dir = _run_recorded(probe)
    found = None if session_dir is None else open_session(Path(session_dir)).figures().capacity
    if found is None or found.rate is None:
        why = "no rate held" if found is None else found.reasoning[-1]
        print(
            f"matrix {args.matrix} --at-capacity: no capacity found ({why}; exit {code}); "
            "the matrix is not run",
            file=sys.stderr,
            flush=True,
        )
        return None
    scale = scale_past(preset(name), found.rate)
    chosen = preset(name, scale)
    broke = "" if found.broke_at is None else f" and broke at {found.broke_at:,.0f} msg/s"
    print(
        f"matrix {args.matrix} --at-capacity: {name} held {found.rate:,.0f} msg/s{broke}; "
        f"the matrix runs at scale {scale:g} ({chosen.publishers} publishers x "
        f"{chosen.rate:g} msg/s = {chosen.publishers * chosen.rate:,.0f} msg/s, "
        f"{chosen.publishers * chosen.rate / found.rate:.2g}x the capacity found: the fewest "
        f"publishers at {PAST_CAPACITY:g}x or more), past it as the seed's runs were",
        flush=True,
    )
    return scale


def matrix_run_args(args: argparse.Namespace, name: str) -> argparse.Namespace:
    """The flags of the matrix's run of preset ``name``: the matrix's own, for that preset.
    With ``--step`` a sweep takes it (not ``--duration``), and a run without a schedule
    takes ``--duration`` or, without one, as many steps as its preset holds sweep steps."""
    from flowdeck.engine import SWEEP_PHASE_SECONDS, preset

    one = argparse.Namespace(**{**vars(args), "matrix": None, "preset": name})
    if not getattr(args, "step", None):
        return one
    if preset(name).schedule:
        one.duration = None
    else:
        one.step = None
        if one.duration is None:
            steps = preset(name).duration / SWEEP_PHASE_SECONDS
            one.duration = f"{steps * parse_duration(args.step, 'step'):g}s"
    return one


def print_matrix_sessions(args: argparse.Namespace, sessions: list[str]) -> None:
    """The matrix's session ids, one a line, and the report command over them all."""
    if not sessions:
        return
    print(f"matrix {args.matrix}: {len(sessions)} session(s)")
    for session in sessions:
        print(f"  {session}")
    where = f" --sessions-dir {shlex.quote(args.sessions_dir)}" if args.sessions_dir else ""
    print(
        f"report: flowdeck report {' '.join(sessions)} --out report-{args.matrix}/{where}",
        flush=True,
    )


def _run_one(args: argparse.Namespace) -> int:
    return _run_recorded(args)[0]


def _run_recorded(args: argparse.Namespace) -> tuple[int, str | None]:
    """The run the flags describe: its exit code and its session's directory (None when
    nothing was recorded)."""
    from flowdeck.cli.summary import conclude, with_thresholds
    from flowdeck.collectors import Broker

    # Every input first, cheapest first (one line, exit 2), before the engine loads.
    drain = parse_drain(args.drain)
    started_from = sessions_dir(args.sessions_dir)
    spec = with_thresholds(spec_from_run_args(args), args)
    autotune = autotune_options(args)
    control = control_options(args)
    placement = spark_placement(args, spec.workers)
    check_connection_flags(args, Broker.parse(spec.uri).uris if spec.uri else ())
    from flowdeck.engine import (
        INSECURE_WARNING,
        Autopilot,
        CapacityCheck,
        Controller,
        RunRecording,
        broker_for,
        check_runs_dir,
        prometheus_for,
        spec_naming,
        tls_options,
    )

    check_runs_dir()  # another user's or a symlinked runs directory: refused now
    progress: TextIO = sys.stderr if args.json else sys.stdout
    sessions_root = None if args.no_record else started_from

    def announce(text: str) -> None:
        print(printable(text), file=progress, flush=True)

    with (
        broker_for(spec, announce=announce) as broker,
        prometheus_for(
            broker, getattr(args, "start_prometheus", False), announce
        ) as prometheus_url,
    ):
        connecting = replace(connection_broker(broker, args), prometheus_url=prometheus_url)
        if tls_options(connecting.uri).insecure:
            print(f"warning: {INSECURE_WARNING}", file=sys.stderr, flush=True)
        controller = Controller(
            spec_naming(spec, broker),
            broker=connecting,
            drain_seconds=drain,
            cleanup=args.cleanup,
            workers=placement.workers if placement is not None else None,
            placement=placement,
            recording=RunRecording(sessions_root),
            capacity=CapacityCheck(skip=args.skip_capacity_check),
        )
        if autotune is not None:
            then_stop = getattr(args, "autotune_then", "stay") == "stop"

            def done(pilot: Autopilot) -> None:
                asyncio.get_running_loop().create_task(controller.stop("the autopilot is done"))

            # begins when the run starts
            Autopilot(controller, **autotune, on_done=done if then_stop else None).attach()
        endpoint = None
        if args.metrics_port is not None:
            from flowdeck.engine import MetricsEndpoint

            port = args.metrics_port
            if not port.isdigit() or int(port) > 65_535:
                raise SpecError("metrics_port", f"metrics port must be 0..65535, got {port!r}")
            endpoint = MetricsEndpoint(port=int(port))
            try:
                endpoint.start()
            except OSError as exc:
                raise FlowdeckError(
                    f"cannot serve metrics on port {port}: {exc.strerror}; pick another port"
                ) from None
            controller.add_sink(endpoint)
            announce(f"serving client metrics at {endpoint.url}")
        try:
            summary, interrupted = asyncio.run(_run(controller, progress, control, started_from))
        finally:
            if endpoint is not None:
                endpoint.stop()
        # The summary before a private node is stopped (seconds, said on its own line).
        code = conclude(args, controller.spec, summary, controller.phase_table.figures(), progress)
        if placement is not None:
            print_hosts(placement.rows, progress)
    recorded = summary.session_dir or None
    if recorded is not None and not Path(recorded).is_dir():
        recorded = None
    return (interrupted or code), recorded


async def _run(
    controller: Controller,
    out: TextIO,
    control: tuple[ControlAddress, ssl.SSLContext | None] | None = None,
    sessions_root: Path | None = None,
) -> tuple[RunSummary, int]:
    """The run followed to its end: its summary, and the exit code of the signal that
    stopped it (128 + its number; 0: none did)."""
    from flowdeck.engine import ControlServer  # the HTTP server loads only for a run

    address, tls = control or (None, None)
    server = ControlServer(controller, address=address, tls=tls, sessions_root=sessions_root)
    controller.add_sink(server)
    await server.start()  # a taken --control port stops the run before any load
    try:
        return await _follow(controller, out, server)
    finally:
        await server.close()


def clients_line(spec: RunSpec) -> str:
    """How the run's clients differ from plain ones (work time, rejections, dead-lettering,
    channels per connection, connection tuning), '' when they do not."""
    parts = []
    if spec.work:
        spread = f" ± {spec.work_spread:g} ms" if spec.work_spread else ""
        parts.append(f"work {spec.work:g} ms{spread} ({spec.work_distribution})")
    if spec.reject or spec.poison:
        parts.append(
            f"reject {spec.reject:g} %, poison {spec.poison:g} %, "
            + ("requeued" if spec.requeue else "not requeued")
        )
    if spec.dead_letter_queue:
        parts.append(f"dead-letter queue {printable(spec.dead_letter_queue)}")
    if spec.publisher_channels > 1 or spec.consumer_channels > 1:
        parts.append(
            f"{spec.publisher_channels} publisher(s) and {spec.consumer_channels} consumer(s) "
            "per connection"
        )
    if spec.message_size != 1000:
        parts.append(f"{spec.message_size:,} B messages")
    parts.extend(priority_parts(spec))
    if spec.connection_allocation == "random" and len(split_uris(spec.uri)) > 1:
        parts.append(f"connections to random nodes (allocation_seed {spec.allocation_seed})")
    tuning = [
        f"heartbeat {spec.heartbeat} s" if spec.heartbeat >= 0 else "",
        f"frame-max {spec.frame_max:,}" if spec.frame_max else "",
        f"channel-max {spec.channel_max}" if spec.channel_max else "",
        "" if spec.tcp_nodelay else "Nagle on",
        f"send buffer {spec.tcp_send_buffer:,} B" if spec.tcp_send_buffer else "",
        f"receive buffer {spec.tcp_receive_buffer:,} B" if spec.tcp_receive_buffer else "",
    ]
    parts.extend(t for t in tuning if t)
    return "; ".join(parts)


def priority_parts(spec: RunSpec) -> list[str]:
    """The run's priorities as the header says them: queues', messages', consumers'."""
    parts = []
    if spec.max_priority:
        parts.append(f"queues keep priorities 0..{spec.max_priority}")
    if spec.message_priority:
        priority = spec.message_priority
        parts.append(
            {
                "constant": f"message priority {priority}",
                "uniform": f"message priority 0..{priority} (uniform)",
                "share": f"message priority {priority} for {spec.priority_share:g} %, 0 for "
                "the rest",
            }[spec.priority_distribution]
        )
    if spec.consumer_priority:
        parts.append(f"consumer priority {spec.consumer_priority.replace(' ', '')}")
    return parts


async def _follow(
    controller: Controller, out: TextIO, server: ControlServer
) -> tuple[RunSummary, int]:
    printer = ProgressPrinter(controller, out)
    controller.add_sink(printer)
    spec = controller.spec
    print(
        f"flowdeck run {printable(spec.name)}: {spec.publishers} publishers x "
        f"{spec.rate:g} msg/s, {spec.queues} {spec.queue_type} queue(s), "
        f"{spec.consumers} consumers, {spec.duration:g} s, "
        f"{controller.workers or 'no'} worker process(es), "
        f"broker {controller.broker.redacted}",
        file=out,
        flush=True,
    )
    shape = clients_line(spec)
    if shape:
        print(f"clients: {shape}", file=out, flush=True)
    await _started(controller, out)
    if controller.session_dir:
        print(f"recording to {printable(str(controller.session_dir))}", file=out, flush=True)
    if server.entry is not None:
        print(
            f"control endpoint {server.url} (run {server.entry.run_id}: flowdeck steer, "
            "flowdeck attach)",
            file=out,
            flush=True,
        )
    loop = asyncio.get_running_loop()
    interrupts = 0
    stopping: list[asyncio.Task[RunSummary]] = []
    stopped_by: list[signal.Signals] = []

    reasons = {
        signal.SIGINT: "stopped by operator (Ctrl-C)",
        signal.SIGTERM: "stopped by SIGTERM",
        signal.SIGHUP: "stopped: the terminal was closed (SIGHUP)",
    }

    def interrupted(signum: signal.Signals) -> None:
        nonlocal interrupts
        if signum is signal.SIGHUP:
            # Nobody reads the terminal any more: writing to it could only fail.
            printer.silence()
            if interrupts:
                return
        interrupts += 1
        if interrupts == 1:
            stopped_by.append(signum)
            if not printer.silenced:
                print(
                    "\nstopping: publishing ends, consumers drain (Ctrl-C again to quit at once)",
                    file=out,
                    flush=True,
                )
            stopping.append(loop.create_task(controller.stop(reasons[signum])))
        else:
            controller.kill()
            print("\nquit at once: no summary", file=out, flush=True)
            os._exit(130)

    for signum in reasons:
        loop.add_signal_handler(signum, interrupted, signum)
    try:
        summary = await controller.wait()
    finally:
        for signum in reasons:
            loop.remove_signal_handler(signum)
    return summary, 128 + stopped_by[0] if stopped_by else 0


#: Seconds between the lines that say a run is still starting.
STARTING_EVERY = 5.0


async def _started(controller: Controller, out: TextIO) -> None:
    """``controller.start()``, saying what it waits for: the broker's checks, the queues,
    the worker processes booting and connecting (seconds on a busy machine), with a line
    every :data:`STARTING_EVERY` s while it goes on."""
    spec = controller.spec
    workers = controller.workers
    booting = f"{workers} worker process(es) boot and " if workers else ""
    print(
        f"starting: the broker's limits are checked, {spec.queues} queue(s) declared, "
        f"{booting}{spec.publishers + spec.consumers} client(s) connect ...",
        file=out,
        flush=True,
    )
    began = time.monotonic()
    starting = asyncio.ensure_future(controller.start())
    while True:
        done, _ = await asyncio.wait({starting}, timeout=STARTING_EVERY)
        if done:
            starting.result()
            return
        print(f"still starting after {time.monotonic() - began:.0f} s ...", file=out, flush=True)


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def _ms(p: Percentiles | None, attr: str) -> str:
    return ms_text(None if p is None else getattr(p, attr))


class ProgressPrinter(NullSink):
    """Turns the controller's updates into lines on ``out`` (a sink, or a listener)."""

    def __init__(self, controller: Controller, out: TextIO) -> None:
        self._controller = controller
        self._out = out
        self.silenced = False

    def silence(self) -> None:
        """Print nothing more (the terminal is gone); the run and recording go on."""
        self.silenced = True

    def on_tick(self, tick: Tick) -> None:
        self(tick)

    def on_event(self, event: RunEvent) -> None:
        self(event)

    def __call__(self, update: Tick | BrokerSample | RunEvent | RunSummary) -> None:
        if self.silenced:
            return
        if isinstance(update, Tick):
            if not self._controller.running:
                return  # the closing tick repeats the totals the summary gives
            self._out.write(format_tick(update) + "\n")
        elif isinstance(update, RunEvent) and update.kind not in _QUIET_EVENTS:
            started = self._controller.started_at or update.at  # events before the start: 0 s
            elapsed = max(0.0, update.at - started)
            warning = "warning: " if update.kind is EventKind.RECORDING_STOPPED else ""
            self._out.write(f"[{elapsed:7.1f} s] {warning}{printable(update.message)}\n")
        else:
            return
        self._out.flush()


def format_tick(tick: Tick) -> str:
    e2e = tick.latency.get(E2E)
    target = "max" if tick.target_rate == 0 else _rate(tick.target_rate)
    marks = "  PAUSED" if tick.settings.paused else ""
    if tick.stalled:  # made late, from the workers' snapshots of that second
        marks += f"  controller stalled {tick.stalled:.0f} s"
    totals = tick.totals
    if totals.rejected or totals.dead_lettered:  # consumers that reject: so far, in all
        marks += (
            f"  rejected {totals.rejected:,} (requeued {totals.requeued:,}) redelivered "
            f"{totals.redelivered:,} dead-lettered {totals.dead_lettered:,}"
        )
    return (
        f"[{tick.second or round(tick.elapsed):5d}/{tick.duration:.0f} s] target {target:>7}/s"
        f"  publish {_rate(tick.publish_rate):>7}/s"
        f"  confirm {_rate(tick.confirm_rate):>7}/s"
        f"  consume {_rate(tick.consume_rate):>7}/s"
        f"  pending {tick.pending_confirms:>6,}"
        f"  e2e p50 {_ms(e2e, 'p50'):>6} p99 {_ms(e2e, 'p99'):>6} ms"
        f"  blocked {tick.blocked}{marks}"
    )
