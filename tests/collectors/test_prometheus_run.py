"""A whole run watched through Prometheus: both sources recorded, the run's series kept.

A real controller runs load against the private node while a real Prometheus server
scrapes it; the session must hold broker rows from both sources and the range query over
the run window in ``prometheus/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest

from flowdeck.collectors import Broker, LocalBroker, PrometheusServer
from flowdeck.engine.controller import Controller
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def prometheus(node: LocalBroker) -> Iterator[PrometheusServer]:
    with PrometheusServer([f"127.0.0.1:{node.prometheus_port}"]) as server:
        server.wait_scraped(60)
        yield server


async def test_a_run_with_prometheus_records_both_sources_and_the_range(
    node: LocalBroker, prometheus: PrometheusServer, tmp_path: Path, queue_name: str
) -> None:
    spec = RunSpec(
        name="prometheus-run",
        queue_pattern=f"{queue_name}-%d",
        publishers=1,
        consumers=1,
        rate=50,
        inflight=20,
        prefetch=50,
        ack_every=1,
        duration=10,
        workers=0,
    )
    controller = Controller(
        spec,
        broker=Broker.parse(
            node.uri, management_url=node.management_url, prometheus_url=prometheus.url
        ),
        recording=RunRecording(tmp_path),
        drain_seconds=2,
        cleanup=True,
    )
    await controller.start()
    summary = await controller.wait()
    assert summary.outcome == "completed", summary.errors
    assert summary.session_dir is not None and not summary.recording_error
    session = open_session(Path(summary.session_dir))

    broker = session.table(fmt.BROKER_DIR)
    sources = set(broker.column("source").to_pylist())
    assert sources == {"management", "prometheus"}
    from_prometheus = broker.filter(pc.equal(broker.column("source"), "prometheus"))
    fresh = from_prometheus.filter(pc.equal(from_prometheus.column("stale_reason"), ""))
    assert fresh.num_rows >= 5  # about one a second over 10 s, not just one
    # A rate needs two scrapes in its window: None (unknown) after missed scrapes.
    rates = [r for r in fresh.column("publish_rate").to_pylist() if r is not None]
    assert rates and max(rates) > 0

    rows = session.table(fmt.PROMETHEUS_DIR)
    times = [t.timestamp() for t in rows.column("ts").to_pylist()]
    assert times and min(times) >= summary.started - 1 and max(times) <= summary.ended + 1
    metrics = set(rows.column("metric").to_pylist())
    assert "rabbitmq_process_resident_memory_bytes" in metrics
    assert "rate(rabbitmq_global_messages_received_total[5s])" in metrics
    run_queue = f"{queue_name}-1"
    queue_labels = [
        json.loads(labels)
        for metric, labels in zip(
            rows.column("metric").to_pylist(), rows.column("labels").to_pylist(), strict=True
        )
        if metric.endswith("queue_consumers")
    ]
    assert {labels["queue"] for labels in queue_labels} == {run_queue}
    received = [
        value
        for metric, value in zip(
            rows.column("metric").to_pylist(), rows.column("value").to_pylist(), strict=True
        )
        if metric == "rate(rabbitmq_global_messages_received_total[5s])"
    ]
    # The broker's own rate agrees with what the run asked for.
    assert max(received) == pytest.approx(spec.rate, rel=0.35)
    kept = [e.message for e in session.events if e.message.startswith("kept ")]
    print(f"\n{kept[0]}; {fresh.num_rows} fresh Prometheus samples of {broker.num_rows} rows")
    assert kept and f"kept {rows.num_rows} Prometheus samples" in kept[0]
