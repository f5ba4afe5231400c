"""`flowdeck run`: a load run without the cockpit.

Prints one line a second (elapsed, target and achieved rates, pending confirms, latency,
blocked connections) and every event as it happens, then a summary with the data-safety
accounting. ``--json`` puts the machine-readable summary alone on stdout (progress goes to
stderr). Ctrl-C stops cleanly (publishing stops, consumers drain, the summary prints); a
second Ctrl-C ends everything at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from flowdeck.collectors import BrokerSample, redact
from flowdeck.engine import (
    INSECURE_WARNING,
    UNCHECKED_CONNECTIONS_LIMIT,
    Controller,
    EventKind,
    FlowdeckError,
    LatencyKind,
    NullSink,
    Percentiles,
    RunEvent,
    RunSummary,
    SendBasis,
    SpecError,
    Tick,
    TlsOptions,
    resolve_uri,
    tls_options,
    with_tls_options,
)
from flowdeck.tui.cli.common import (
    add_broker_arguments,
    add_spec_arguments,
    broker_for,
    management_password_from,
    parse_number,
    prometheus_for,
)
from flowdeck.tui.cli.import_perftest import add_perftest_option, spec_from_run_args

E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)
_QUIET_EVENTS = {EventKind.PHASE}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run load headless: progress each second, then a summary",
        description=(
            "Run a load spec against RabbitMQ without the cockpit. The spec comes from "
            "--preset, --spec FILE or flags (one per spec field); flags refine a preset or "
            "file. With none of them, runs the default preset scaled to a small machine."
        ),
    )
    add_spec_arguments(parser)
    add_perftest_option(parser)  # --perftest "PerfTest options" (tui/cli/import_perftest.py)
    add_broker_arguments(parser)
    add_secret_arguments(parser)
    parser.add_argument(
        "--skip-capacity-check",
        action="store_true",
        help="start even when the broker's socket limit says the run does not fit, or "
        f"cannot be read for a run of more than {UNCHECKED_CONNECTIONS_LIMIT} connections "
        "(warned about instead)",
    )
    out = parser.add_argument_group("output and recording")
    out.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
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
        help="how long consumers may drain after publishing stops (default 5)",
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


def connection_uri(uri: str, args: argparse.Namespace) -> str:
    """The broker URI with the password from --password-file/FLOWDECK_PASSWORD and the
    TLS options of the flags."""
    uri = resolve_uri(uri, password_file=getattr(args, "password_file", None))
    options = TlsOptions(
        ca_file=getattr(args, "ca_file", None) or "",
        cert_file=getattr(args, "cert_file", None) or "",
        key_file=getattr(args, "key_file", None) or "",
        insecure=bool(getattr(args, "insecure", False)),
    )
    if options.configured and not uri.startswith("amqps://"):
        raise SpecError(
            "uri",
            f"TLS options need an amqps:// uri, got {redact(uri)!r}; "
            "use amqps:// and the broker's TLS port (usually 5671)",
        )
    uri = with_tls_options(uri, options)
    tls_options(uri)  # a bad verify= parameter is an error now, not in the workers
    return uri


def run_command(args: argparse.Namespace) -> int:
    spec = spec_from_run_args(args)
    drain = float(parse_number("duration", args.drain)) if args.drain else 5.0
    progress: TextIO = sys.stderr if args.json else sys.stdout
    sessions_root = None
    if not args.no_record:
        if args.sessions_dir:
            sessions_root = Path(args.sessions_dir)
        else:
            from flowdeck.engine import default_sessions_root

            sessions_root = default_sessions_root()

    def announce(text: str) -> None:
        print(text, file=progress, flush=True)

    with (
        broker_for(spec, announce=announce) as broker,
        prometheus_for(
            broker, getattr(args, "start_prometheus", False), announce
        ) as prometheus_url,
    ):
        uri = connection_uri(broker.uri, args)
        if tls_options(uri).insecure:
            print(f"warning: {INSECURE_WARNING}", file=sys.stderr, flush=True)
        controller = Controller(
            broker.spec_for(spec),
            uri=uri,
            management_url=broker.management_url,
            management_user=args.management_user,
            management_password=management_password_from(args),
            prometheus_url=prometheus_url,
            sessions_root=sessions_root,
            drain_seconds=drain,
            cleanup=args.cleanup,
            statistics_interval=broker.statistics_interval,
            skip_capacity_check=args.skip_capacity_check,
        )
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
            summary = asyncio.run(_run(controller, progress))
        finally:
            if endpoint is not None:
                endpoint.stop()
    try:
        if args.json:
            print(json.dumps(summary.to_json(), indent=2))
        else:
            print_summary(summary, progress)
    except OSError:
        pass  # the terminal was closed (SIGHUP): the session holds the summary
    return 1 if summary.outcome == "failed" else 0


async def _run(controller: Controller, out: TextIO) -> RunSummary:
    printer = ProgressPrinter(controller, out)
    controller.add_sink(printer)
    spec = controller.spec
    print(
        f"flowdeck run {spec.name}: {spec.publishers} publishers x "
        f"{spec.rate:g} msg/s, {spec.queues} {spec.queue_type} queue(s), "
        f"{spec.consumers} consumers, {spec.duration:g} s, "
        f"{controller.workers or 'no'} worker process(es), "
        f"broker {redact(controller.uri)}",
        file=out,
        flush=True,
    )
    await controller.start()
    if controller.session_dir:
        print(f"recording to {controller.session_dir}", file=out, flush=True)
    loop = asyncio.get_running_loop()
    interrupts = 0
    stopping: list[asyncio.Task[RunSummary]] = []

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
        return await controller.wait()
    finally:
        for signum in reasons:
            loop.remove_signal_handler(signum)


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def _ms(p: Percentiles | None, attr: str) -> str:
    if p is None:
        return "-"
    value: float = getattr(p, attr)
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


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
            self._out.write(f"[{elapsed:7.1f} s] {warning}{update.message}\n")
        else:
            return
        self._out.flush()


def format_tick(tick: Tick) -> str:
    e2e = tick.latency.get(E2E)
    target = "max" if tick.target_rate == 0 else _rate(tick.target_rate)
    paused = "  PAUSED" if tick.settings.paused else ""
    return (
        f"[{tick.elapsed:5.0f}/{tick.duration:.0f} s] target {target:>7}/s"
        f"  publish {_rate(tick.publish_rate):>7}/s"
        f"  confirm {_rate(tick.confirm_rate):>7}/s"
        f"  consume {_rate(tick.consume_rate):>7}/s"
        f"  pending {tick.pending_confirms:>6,}"
        f"  e2e p50 {_ms(e2e, 'p50'):>6} p99 {_ms(e2e, 'p99'):>6} ms"
        f"  blocked {tick.blocked}{paused}"
    )


def print_summary(summary: RunSummary, out: TextIO) -> None:
    s = summary.safety
    rows = [
        ("published", s.published, summary.publish_rate),
        ("confirmed", s.confirmed, summary.confirm_rate),
        ("consumed", s.consumed, summary.consume_rate),
        ("nacked", s.nacked, None),
        ("returned", s.returned, None),
        ("redelivered", s.redelivered, None),
        ("duplicates", s.duplicates, None),
        ("unconfirmed", s.unconfirmed, None),
        ("lost (confirmed, never consumed)", s.lost, None),
    ]
    lines = [
        "",
        f"run {summary.name} {summary.outcome} ({summary.stop_reason}) after "
        f"{summary.duration:.1f} s, {summary.phases} phase(s)",
        f"{'messages':<34}{'count':>12}{'mean rate':>14}",
    ]
    for label, count, rate in rows:
        rate_text = f"{rate:,.1f}/s" if rate is not None else ""
        lines.append(f"{label:<34}{count:>12,}{rate_text:>14}")
    if not summary.safety.confirms:
        lines.append("(confirms off: the broker confirmed nothing, so loss cannot be assessed)")
    if summary.latency:
        lines.append(
            f"{'latency (ms)':<28}{'count':>10}{'p50':>9}{'p75':>9}{'p95':>9}{'p99':>9}{'max':>9}"
        )
        for (kind, basis), p in sorted(summary.latency.items()):
            lines.append(
                f"{kind.value + ' from ' + basis.value + ' send':<28}{p.count:>10,}"
                + "".join(f"{_ms(p, a):>9}" for a in ("p50", "p75", "p95", "p99", "max"))
            )
    if summary.session_dir and Path(summary.session_dir).is_dir():
        lines.append(f"session: {summary.session_dir}")
    if summary.recording_error:
        lines.append(f"recording: {summary.recording_error}")
    for error in summary.errors:
        lines.append(f"error: {error}")
    out.write("\n".join(lines) + "\n")
    out.flush()
