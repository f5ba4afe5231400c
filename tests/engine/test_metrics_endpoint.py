"""/metrics: what a run serves, read back by prometheus-client's parser and by a real
Prometheus server scraping a real run on the shared broker."""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flowdeck.collectors import Broker, PrometheusServer
from flowdeck.engine.change import parse_change
from flowdeck.engine.controller import Controller
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.metrics_endpoint import MetricsEndpoint
from flowdeck.engine.progress import Percentiles, Tick
from flowdeck.engine.snapshot import Counters, Settings
from flowdeck.engine.spec import RunSpec, ScheduleStep

E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)
CONFIRM = (LatencyKind.CONFIRM, SendBasis.ACTUAL)


def _tick(second: int, published: int, inflight: int = 50) -> Tick:
    return Tick(
        at=1_700_000_000.0 + second,
        elapsed=float(second),
        duration=60.0,
        target_rate=200.0,
        publish_rate=199.0,
        confirm_rate=198.0,
        consume_rate=197.0,
        nack_rate=1.0,
        return_rate=0.0,
        totals=Counters(published=published, confirmed=published - 5, consumed=published - 9),
        pending_confirms=5,
        unacked=3,
        connections=4,
        blocked=1,
        settings=Settings.of(
            inflight=inflight, prefetch=100, ack_every=10, rate=100.0, publishers=2, consumers=2
        ),
        latency={
            E2E: Percentiles(count=200, p50=1.5, p75=2.0, p95=3.0, p99=4.0, p999=6.0, max=9.0),
            CONFIRM: Percentiles(count=190, p50=1.0, p75=1.2, p95=2.0, p99=2.5, p999=4.0, max=5.0),
        },
    )


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(url, timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_endpoint_serves_perftest_and_flowdeck_figures() -> None:
    with MetricsEndpoint() as endpoint:
        assert endpoint.port > 0 and endpoint.url.endswith("/metrics")
        before = _scrape(endpoint.url)
        assert before[("flowdeck_run_running", ())] == 0
        endpoint.observe(RunEvent(1.0, EventKind.RUN_STARTED, "started"))
        endpoint.observe(_tick(1, 200))
        endpoint.observe(_tick(2, 400, inflight=80))
        got = _scrape(endpoint.url)
    assert got[("perftest_published", ())] == 199
    assert got[("perftest_confirmed", ())] == 198
    assert got[("perftest_consumed", ())] == 197
    assert got[("perftest_nacked", ())] == 1
    assert got[("perftest_returned", ())] == 0
    assert got[("perftest_latency_seconds", (("quantile", "0.99"),))] == pytest.approx(0.004)
    assert got[("perftest_latency_seconds", (("quantile", "0.5"),))] == pytest.approx(0.0015)
    assert got[("perftest_latency_seconds_count", ())] == 400  # two ticks of 200 samples
    assert got[("perftest_latency_seconds_max", ())] == pytest.approx(0.009)
    assert got[("perftest_confirm_latency_seconds", (("quantile", "0.95"),))] == pytest.approx(
        0.002
    )
    assert got[("flowdeck_published_total", ())] == 400
    assert got[("flowdeck_confirmed_total", ())] == 395
    assert got[("flowdeck_pending_confirms", ())] == 5
    assert got[("flowdeck_blocked_connections", ())] == 1
    assert got[("flowdeck_inflight_limit", ())] == 80
    assert got[("flowdeck_prefetch", ())] == 100
    assert got[("flowdeck_ack_every", ())] == 10
    assert got[("flowdeck_rate_per_publisher", ())] == 100
    assert got[("flowdeck_run_running", ())] == 1
    assert got[("flowdeck_events_total", (("kind", "run_started"),))] == 1
    key = ("flowdeck_latency_seconds", (("basis", "actual"), ("kind", "e2e"), ("quantile", "0.75")))
    assert got[key] == pytest.approx(0.002)


def test_a_taken_port_is_an_error_and_stop_frees_the_port() -> None:
    first = MetricsEndpoint()
    first.start()
    port = first.port
    with pytest.raises(OSError):
        MetricsEndpoint(port=port).start()
    first.stop()
    again = MetricsEndpoint(port=port)
    again.start()  # free again once stopped
    again.stop()


# -- a real Prometheus server scraping a real run ---------------------------------------


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[PrometheusServer]:
    """A Prometheus server of our own (collectors.PrometheusServer) with a job "flowdeck"
    whose targets the test sets once the endpoint's port is known."""
    if shutil.which("prometheus") is None:
        pytest.skip("the prometheus binary is not installed (apt-get install prometheus)")
    with PrometheusServer(job="flowdeck", per_queue=False, base_dir=tmp_path) as server:
        yield server


def _query(prometheus_url: str, promql: str) -> float | None:
    response = httpx.get(f"{prometheus_url}/api/v1/query", params={"query": promql}, timeout=5)
    response.raise_for_status()
    result = response.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def _run_samples(prometheus_url: str, series: str, began: float, ended: float) -> list[float]:
    """The values Prometheus scraped of ``series`` between two wall-clock moments."""
    response = httpx.get(
        f"{prometheus_url}/api/v1/query_range",
        params={"query": series, "start": began, "end": ended, "step": 1},
        timeout=5,
    )
    response.raise_for_status()
    result = response.json()["data"]["result"]
    return [float(value) for _, value in result[0]["values"]] if result else []


def _wait_for(prometheus_url: str, promql: str, ok: object, seconds: float = 20) -> float | None:
    deadline = time.monotonic() + seconds
    value = _query(prometheus_url, promql)
    while not ok(value) and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.5)
        value = _query(prometheus_url, promql)
    return value


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_prometheus_scrapes_a_real_run(
    prometheus: PrometheusServer, shared_uri: str, unique_name: str
) -> None:
    prometheus_url = prometheus.url
    spec = RunSpec(
        name="metrics",
        queue_pattern=f"{unique_name}-%d",
        publishers=1,
        consumers=1,
        rate=100,
        inflight=50,
        prefetch=100,
        ack_every=5,
        duration=14,
        workers=0,
        schedule=(ScheduleStep(5.0, parse_change("inflight=30")),),
    )
    with MetricsEndpoint() as endpoint:
        prometheus.set_targets([f"127.0.0.1:{endpoint.port}"], labels={"run": "metrics"})
        up = _wait_for(prometheus_url, 'up{job="flowdeck"}', lambda v: v == 1, 30)
        assert up == 1, "prometheus never scraped the endpoint"
        controller = Controller(
            spec, broker=Broker.parse(shared_uri), drain_seconds=3, cleanup=True
        )
        controller.add_listener(endpoint.observe)
        began = time.time()
        await controller.start()
        summary = await controller.wait()
        ended = time.time()
        assert summary.outcome == "completed", summary.errors
        published = summary.safety.published
        # the closing tick carries the final totals; wait for Prometheus to scrape them
        total = _wait_for(prometheus_url, "flowdeck_published_total", lambda v: v == published, 20)
        assert total == published
        running = _wait_for(prometheus_url, "flowdeck_run_finished", lambda v: v == 1, 20)
        assert running == 1

    window = "[2m]"
    # the gauge is each second's rate: a publisher catching up after a late second peaks
    # over the target (a busy run read 145.6 for 100), so the run's middle second is judged
    sending = [v for v in _run_samples(prometheus_url, "perftest_published", began, ended) if v]
    assert len(sending) >= 5, sending
    assert statistics.median(sending) / spec.target_rate == pytest.approx(1, abs=0.35), sending
    consumed = _query(prometheus_url, f"max_over_time(perftest_consumed{window})")
    assert consumed is not None and consumed > 0
    p99 = _query(
        prometheus_url, f'max_over_time(perftest_latency_seconds{{quantile="0.99"}}{window})'
    )
    p50 = _query(
        prometheus_url, f'max_over_time(perftest_latency_seconds{{quantile="0.5"}}{window})'
    )
    assert p99 is not None and p50 is not None and 0 < p50 <= p99 < 5
    confirm_p99 = _query(
        prometheus_url,
        f'max_over_time(perftest_confirm_latency_seconds{{quantile="0.99"}}{window})',
    )
    assert confirm_p99 is not None and confirm_p99 > 0
    # the in-flight limit the schedule changed mid-run shows as both values over the run
    assert _query(prometheus_url, f"max_over_time(flowdeck_inflight_limit{window})") == 50
    assert _query(prometheus_url, f"min_over_time(flowdeck_inflight_limit{window})") == 30
    assert _query(prometheus_url, f"max_over_time(flowdeck_prefetch{window})") == 100
    assert _query(prometheus_url, f"max_over_time(flowdeck_ack_every{window})") == 5
    assert _query(prometheus_url, f"max_over_time(flowdeck_rate_per_publisher{window})") == 100
    pending = _query(prometheus_url, f"max_over_time(flowdeck_pending_confirms{window})")
    assert pending is not None and 0 <= pending <= 50
    # the label Prometheus attached to the target comes back with the series
    labelled = _query(
        prometheus_url, f'count(max_over_time(perftest_published{{run="metrics"}}{window}))'
    )
    assert labelled == 1
