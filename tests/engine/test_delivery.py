"""No silent zero: a run whose consumers took far fewer messages than it published ends
non-zero with one line saying where they went; a PerfTest line's routing key goes to
PerfTest's exchange, so ``-k`` delivers every message (before: published 151, consumed 0,
exit 0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from flowdeck.engine.delivery import UNDELIVERED_EXIT, where_messages_went
from flowdeck.engine.progress import DataSafety
from flowdeck.engine.spec import RunSpec

ROOT = Path(__file__).resolve().parents[2]


def flowdeck_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", "run", "--no-record", "--cleanup", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": ""},
    )


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(150)
def test_a_run_whose_messages_route_nowhere_ends_non_zero_saying_where(
    shared_uri: str, unique_name: str
) -> None:
    result = flowdeck_run(
        "--uri",
        shared_uri,
        "--queue-pattern",
        f"{unique_name}-%d",
        "--routing-key",
        f"{unique_name}-nowhere",
        "--publishers",
        "1",
        "--consumers",
        "1",
        "--rate",
        "50",
        "--duration",
        "3s",
        "--workers",
        "0",
    )
    assert result.returncode == UNDELIVERED_EXIT, result.stderr[-2000:]
    last = result.stdout.rstrip().splitlines()[-1]
    assert last.startswith("undelivered: consumers took 0 of "), last
    assert "reached no queue of the run" in last
    assert f"no queue of the run is named '{unique_name}-nowhere'" in last


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(150)
def test_a_perftest_line_with_a_routing_key_delivers_every_message(
    shared_uri: str, management_url: str, unique_name: str
) -> None:
    exchange = f"{management_url}/api/exchanges/%2F/direct"
    existed = httpx.get(exchange, auth=("guest", "guest")).status_code == 200
    try:
        result = flowdeck_run(
            "--uri",
            shared_uri,
            "--json",
            "--perftest",
            f"-x 1 -y 1 -u {unique_name}-q -k perf-test -z 3 -r 50 -c 10",
        )
    finally:
        if not existed:  # PerfTest's exchange, made by this run: leave none behind
            httpx.delete(exchange, auth=("guest", "guest"))
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    assert summary["spec"]["exchange"] == "direct" and summary["spec"]["routing_key"] == "perf-test"
    safety = summary["safety"]
    assert safety["published"] > 100
    assert safety["consumed"] == safety["published"] and safety["lost"] == 0
    assert summary["undelivered"] == ""


def safety(published: int, consumed: int, **counts: int) -> DataSafety:
    values = dict(
        published=published,
        confirmed=published,
        nacked=0,
        returned=0,
        consumed=consumed,
        redelivered=0,
        duplicates=0,
        unconfirmed=0,
        lost=0,
    )
    values.update(counts)
    return DataSafety(**values)  # type: ignore[arg-type]


def test_a_backlog_is_not_a_silent_zero_and_a_publish_only_run_is_not_judged() -> None:
    spec = RunSpec(queue_pattern="q-%d")
    assert where_messages_went(spec, safety(1000, 900), left=0) == ""
    assert where_messages_went(spec, safety(10_000, 3_000), left=7_000) == ""  # a backlog
    assert where_messages_went(spec, safety(1000, 0, nacked=900), left=100) == ""
    publish_only = RunSpec(queue_pattern="q-%d", consumers=0)
    assert where_messages_went(publish_only, safety(1000, 0), left=0) == ""


def test_the_line_says_where_the_messages_went() -> None:
    spec = RunSpec(queue_pattern="q-%d", exchange="orders", routing_key="eu.*", mandatory=True)
    assert where_messages_went(spec, safety(200, 0, returned=200), left=0) == (
        "consumers took 0 of 200 published messages: 200 came back unroutable (mandatory "
        "flag): exchange 'orders' (direct) with routing key 'eu.*' reaches no queue"
    )
    waiting = where_messages_went(RunSpec(queue_pattern="q-%d"), safety(200, 0), left=200)
    assert "200 wait in the run's queues, so the 1 consumer(s) consumed nothing" in waiting
    unknown = where_messages_went(RunSpec(queue_pattern="q-%d"), safety(200, 10), left=None)
    assert "190 reached no queue of the run (the queues could not be read)" in unknown
