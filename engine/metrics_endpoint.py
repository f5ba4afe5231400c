"""Client-side metrics of a run at ``/metrics``, for Prometheus and Grafana.

Add :meth:`MetricsEndpoint.observe` as a Controller listener and Prometheus can scrape
what flowdeck measures while the run goes. Where PerfTest has a metric for the same
figure, flowdeck serves it under PerfTest's name and meaning, so RabbitMQ's PerfTest
Grafana dashboard (grafana.com dashboard 6566) shows a flowdeck run unchanged:

* ``perftest_published``, ``perftest_confirmed``, ``perftest_nacked``,
  ``perftest_returned``, ``perftest_consumed``: gauges of the rate over the last
  second in msg/s (PerfTest's are rates too, not counters);
* ``perftest_latency_seconds`` and ``perftest_confirm_latency_seconds``: summaries with
  quantiles 0.5, 0.75, 0.95, 0.99 over the last second, measured from the actual send (as
  PerfTest does), plus ``_count`` and a ``_max`` gauge.

flowdeck's own figures come as ``flowdeck_*``: cumulative counters
(``flowdeck_published_total``...), latency from the intended send too
(``flowdeck_latency_seconds{kind, basis, quantile}``, where coordinated omission shows),
pending confirms, unacked, blocked connections, and the settings in force (in-flight
limit, prefetch, ack interval, rate, client counts, paused).

The HTTP server is prometheus-client's, on a thread of its own with its own registry;
``observe`` only swaps a reference, so it never slows the controller's loop.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.settings import STEERABLE
from flowdeck.engine.sinks import NullSink
from flowdeck.figures.latency import Percentiles

#: The quantiles PerfTest publishes, and the Percentiles attribute holding each.
QUANTILES: tuple[tuple[str, str], ...] = (
    ("0.5", "p50"),
    ("0.75", "p75"),
    ("0.95", "p95"),
    ("0.99", "p99"),
)

#: PerfTest's latency metric for each latency kind (measured from the actual send).
PERFTEST_LATENCY_NAMES: dict[LatencyKind, str] = {
    LatencyKind.END_TO_END: "perftest_latency_seconds",
    LatencyKind.CONFIRM: "perftest_confirm_latency_seconds",
}

#: PerfTest's rate gauges and the Tick attribute each one reads.
PERFTEST_RATES: tuple[tuple[str, str], ...] = (
    ("perftest_published", "publish_rate"),
    ("perftest_confirmed", "confirm_rate"),
    ("perftest_nacked", "nack_rate"),
    ("perftest_returned", "return_rate"),
    ("perftest_consumed", "consume_rate"),
)

#: Cumulative message counters: metric name (without ``_total``) and Counters attribute.
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("flowdeck_published", "published", "messages published"),
    ("flowdeck_confirmed", "confirmed", "messages the broker confirmed"),
    ("flowdeck_nacked", "nacked", "messages the broker nacked"),
    ("flowdeck_returned", "returned", "messages returned as unroutable (mandatory)"),
    ("flowdeck_consumed", "consumed", "messages delivered to consumers"),
    ("flowdeck_acked", "acked", "deliveries consumers acknowledged"),
    ("flowdeck_redelivered", "redelivered", "deliveries flagged redelivered"),
    ("flowdeck_duplicates", "duplicates", "deliveries of a sequence already consumed"),
    ("flowdeck_rejected", "rejected", "deliveries consumers rejected (basic.nack)"),
    ("flowdeck_requeued", "requeued", "rejected deliveries sent back to the queue"),
    ("flowdeck_dead_lettered", "dead_lettered", "messages taken off the dead-letter queue"),
)


@dataclass(slots=True)
class _State:
    """What the collector serves; replaced as a whole so a scrape sees one moment."""

    tick: Tick | None = None
    latency_counts: dict[tuple[LatencyKind, SendBasis], int] = field(default_factory=dict)
    latency_max: dict[tuple[LatencyKind, SendBasis], float] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    running: bool = False
    finished: bool = False


class _RunCollector(Collector):
    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self._endpoint = endpoint

    def collect(self) -> Iterable[Metric]:
        return list(_metrics(self._endpoint.state))


class MetricsEndpoint(NullSink):
    """An HTTP ``/metrics`` endpoint serving a run's client-side figures.

    ``port=0`` picks a free port; :attr:`url` says which after :meth:`start`.
    """

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        if not 0 <= port <= 65_535:
            raise ValueError(f"metrics port must be 0..65535, got {port}")
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_RunCollector(self))
        self.state = _State()
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    @property
    def serving(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Serve ``/metrics``; raises OSError when the port is taken."""
        if self._server is not None:
            return
        self._server, self._thread = start_http_server(self.port, self.host, self.registry)
        self.port = int(self._server.server_port)

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> MetricsEndpoint:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # As a sink of the run (Controller.add_sink): the updates it serves.

    def on_tick(self, tick: Tick) -> None:
        self.observe(tick)

    def on_event(self, event: RunEvent) -> None:
        self.observe(event)

    def on_finish(self, summary: RunSummary) -> None:
        self.observe(summary)

    def observe(self, update: Tick | BrokerSample | RunEvent | RunSummary) -> None:
        """A Controller listener: take in a Tick, event or summary (broker samples are the
        broker's own figures, which RabbitMQ's Prometheus plugin already serves).
        """
        with self._lock:
            old = self.state
            if isinstance(update, Tick):
                counts = dict(old.latency_counts)
                maxima = dict(old.latency_max)
                for key, p in update.latency.items():
                    counts[key] = counts.get(key, 0) + p.count
                    maxima[key] = p.max
                self.state = _State(update, counts, maxima, old.events, True, old.finished)
            elif isinstance(update, RunEvent):
                events = dict(old.events)
                events[update.kind.value] = events.get(update.kind.value, 0) + 1
                running = old.running or update.kind is EventKind.RUN_STARTED
                if update.kind is EventKind.RUN_STOPPED:
                    running = False
                self.state = _State(
                    old.tick, old.latency_counts, old.latency_max, events, running, old.finished
                )
            elif isinstance(update, RunSummary):
                self.state = _State(
                    old.tick, old.latency_counts, old.latency_max, old.events, False, True
                )


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _summary(
    name: str, doc: str, p: Percentiles | None, count: int, labels: dict[str, str] | None = None
) -> Metric:
    """A summary in PerfTest's shape: quantile samples in seconds and a sample count.

    There is no ``_sum``: the engine's percentiles do not carry one, and an invented sum
    would be a wrong mean.
    """
    base = labels or {}
    metric = Metric(name, doc, "summary")
    if p is not None and p.count:
        for quantile, attr in QUANTILES:
            value_ms: float = getattr(p, attr)
            metric.add_sample(name, {**base, "quantile": quantile}, value_ms / 1000.0)
    metric.add_sample(name + "_count", base, float(count))
    return metric


def _metrics(state: _State) -> Iterator[Metric]:
    tick = state.tick
    yield _gauge(
        "flowdeck_run_running", "1 while a run is publishing or draining", float(state.running)
    )
    yield _gauge("flowdeck_run_finished", "1 once the run has ended", float(state.finished))
    events = CounterMetricFamily("flowdeck_events", "run events by kind", labels=["kind"])
    for kind, count in sorted(state.events.items()):
        events.add_metric([kind], count)
    yield events
    if tick is None:
        return
    for name, attr in PERFTEST_RATES:
        what = name.removeprefix("perftest_")
        yield _gauge(name, f"messages {what} per second over the last second", getattr(tick, attr))
    for kind, name in PERFTEST_LATENCY_NAMES.items():
        key = (kind, SendBasis.ACTUAL)
        label = "message latency" if kind is LatencyKind.END_TO_END else "confirm latency"
        yield _summary(name, label, tick.latency.get(key), state.latency_counts.get(key, 0))
        if key in state.latency_max:
            yield _gauge(
                name + "_max", f"largest {label} of the last second", state.latency_max[key] / 1000
            )
    flowdeck_latency = Metric(
        "flowdeck_latency_seconds",
        "latency over the last second by kind (e2e, confirm) and basis (actual send, intended "
        "send of the rate schedule: coordinated omission shows in the intended one)",
        "summary",
    )
    for kind in LatencyKind:
        for basis in SendBasis:
            labels = {"kind": kind.value, "basis": basis.value}
            p = tick.latency.get((kind, basis))
            if p is not None and p.count:
                for quantile, attr in (*QUANTILES, ("1", "max")):
                    flowdeck_latency.add_sample(
                        "flowdeck_latency_seconds",
                        {**labels, "quantile": quantile},
                        getattr(p, attr) / 1000.0,
                    )
            flowdeck_latency.add_sample(
                "flowdeck_latency_seconds_count",
                labels,
                float(state.latency_counts.get((kind, basis), 0)),
            )
    yield flowdeck_latency
    for name, attr, doc in COUNTERS:
        yield CounterMetricFamily(name, doc, value=getattr(tick.totals, attr))
    settings = tick.settings
    gauges: tuple[tuple[str, str, float], ...] = (
        ("flowdeck_elapsed_seconds", "seconds since the run started", tick.elapsed),
        ("flowdeck_duration_seconds", "how long the run is to last", tick.duration),
        (
            "flowdeck_target_rate",
            "total target publish rate in msg/s (0 = no limit)",
            tick.target_rate,
        ),
        (
            "flowdeck_pending_confirms",
            "messages published and not yet confirmed",
            tick.pending_confirms,
        ),
        ("flowdeck_unacked", "deliveries not yet acknowledged", tick.unacked),
        ("flowdeck_connections", "client connections open", tick.connections),
        ("flowdeck_blocked_connections", "connections the broker has blocked", tick.blocked),
        *((row.gauge, row.help, settings.value(row.setting)) for row in STEERABLE),
        ("flowdeck_paused", "1 while publishing is paused", settings.paused),
        ("flowdeck_pending_changes", "changes asked for and not yet in force", len(tick.pending)),
        ("flowdeck_phase_index", "number of the current phase (0 = the first)", tick.phase_index),
        ("flowdeck_workers", "worker processes", tick.workers),
    )
    for name, doc, value in gauges:
        yield _gauge(name, doc, float(value))
