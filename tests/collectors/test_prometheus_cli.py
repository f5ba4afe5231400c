"""Prometheus mode from a shell: `flowdeck collect --prometheus-url` and
`flowdeck run --start-prometheus`, in a subprocess, against the shared broker (read only)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flowdeck.collectors import PrometheusServer

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]
SHARED_PROMETHEUS_TARGET = "127.0.0.1:15692"

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(300)]


def flowdeck(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def prometheus() -> Iterator[PrometheusServer]:
    with PrometheusServer([SHARED_PROMETHEUS_TARGET], per_object=True) as server:
        server.wait_scraped(60)
        yield server


def test_collect_once_reads_the_broker_through_prometheus(prometheus: PrometheusServer) -> None:
    done = flowdeck("collect", "--once", "--json", "--prometheus-url", prometheus.url)
    assert done.returncode == 0, done.stderr
    sample = json.loads(done.stdout)
    assert sample["source"] == "prometheus" and not sample["stale"]
    assert sample["broker_version"].startswith("3.")
    assert sample["nodes"] and sample["nodes"][0]["mem_used"] > 0
    assert sample["statistics_interval"] == 1.0
    assert "job 'rabbitmq' (also scraped by 'rabbitmq-per-object'; give --job" in done.stderr


def test_collect_names_a_job_with_no_broker_series(prometheus: PrometheusServer) -> None:
    done = flowdeck("collect", "--once", "--prometheus-url", prometheus.url, "--job", "absent")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"flowdeck: Prometheus at {prometheus.url} has no rabbitmq_* series for job "
        "'absent': is it scraping the broker's :15692?"
    ]


def test_start_prometheus_and_a_prometheus_url_are_refused_together() -> None:
    done = flowdeck(
        "run",
        "--uri",
        "amqp://guest:guest@127.0.0.1:5672/%2F",
        "--prometheus-url",
        "http://127.0.0.1:9090",
        "--start-prometheus",
        "--duration",
        "2",
        "--no-record",
    )
    assert done.returncode == 2
    assert "give either --prometheus-url or --start-prometheus, not both" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_with_start_prometheus_keeps_the_broker_series(
    tmp_path: Path, unique_name: str
) -> None:
    done = flowdeck(
        "run",
        "--uri",
        "amqp://guest:guest@127.0.0.1:5672/%2F",
        "--start-prometheus",
        "--publishers",
        "1",
        "--consumers",
        "1",
        "--rate",
        "50",
        "--duration",
        "8",
        "--workers",
        "0",
        "--queue-pattern",
        f"{unique_name}-%d",
        "--cleanup",
        "--sessions-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"scraping {SHARED_PROMETHEUS_TARGET} every 1 s" in done.stdout
    kept = [line for line in done.stdout.splitlines() if "Prometheus samples of the run" in line]
    assert kept, done.stdout
    (session,) = tmp_path.iterdir()
    rows = pq.read_table(session / "prometheus").to_pylist()
    assert rows and {row["metric"] for row in rows} >= {
        "rabbitmq_process_resident_memory_bytes",
        "rate(rabbitmq_global_messages_received_total[5s])",
    }
    queues = {json.loads(r["labels"])["queue"] for r in rows if "queue" in r["labels"]}
    assert queues == {f"{unique_name}-1"}
    sources = set(pq.read_table(session / "broker").column("source").to_pylist())
    assert sources == {"management", "prometheus"}
