"""A recorded session reads back with the figures that were recorded."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from _synthetic import SPEC, SyntheticWorker, broker_sample
from hdrh.histogram import HdrHistogram

from flowdeck.collectors.broker_uri import mask_text
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import HIGHEST_US, LATENCY_KEYS, LOWEST_US, record
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import list_sessions, open_session, resolve_outcome
from flowdeck.engine.recording.recorder import (
    SESSIONS_DIR_ENV,
    Recorder,
    default_sessions_root,
    new_session_id,
)
from flowdeck.engine.recording.rows import CLIENT_SCHEMA
from flowdeck.engine.snapshot import Counters

WORKERS = 3
SECONDS = 12


def record_synthetic_run(root: Path) -> tuple[Recorder, list[SyntheticWorker], float]:
    recorder = Recorder(root, SPEC, versions={"rabbitmq": "3.10.8"}, flush_seconds=0.0)
    start = 1_700_000_000.0
    recorder.start(start)
    recorder.event(RunEvent(start, EventKind.RUN_STARTED, "run started"))
    recorder.event(RunEvent(start, EventKind.PHASE, "phase 1: inflight=200"))
    workers = [SyntheticWorker(w) for w in range(WORKERS)]
    for second in range(1, SECONDS + 1):
        for worker in workers:
            errors = ("connection reset by amqp://flow:s3cret-pw@127.0.0.1",) if second == 5 else ()
            # the workers report a little apart, as real ones do
            at = start + second + worker.worker * 0.01
            recorder.snapshot(worker.snapshot(at, published=1000 + second, errors=errors))
        recorder.broker(broker_sample(start + second + 0.5))
        if second == 6:
            recorder.event(
                RunEvent(
                    start + second,
                    EventKind.CHANGE_APPLIED,
                    "inflight=400",
                    change_id=1,
                    detail={"uri": "amqp://flow:s3cret-pw@127.0.0.1:5672/%2F"},
                )
            )
            recorder.event(
                RunEvent(start + second, EventKind.PHASE, "phase 2: inflight=400", change_id=1)
            )
    recorder.prometheus_range(
        [(start + s, "rabbitmq_queue_messages", '{"queue":"q-0"}', float(s)) for s in range(10)]
    )
    recorder.close("completed", {"safety": {"lost": 0}}, start + SECONDS + 1, "duration reached")
    return recorder, workers, start


def test_recorded_run_reads_back_with_the_same_figures(tmp_path: Path) -> None:
    recorder, workers, _ = record_synthetic_run(tmp_path)
    assert recorder.error is None
    session = open_session(recorder.session_dir)

    expected = Counters()
    for worker in workers:
        expected = expected + worker.counters
    assert session.totals() == expected
    assert session.outcome == fmt.OUTCOME_COMPLETED
    assert session.manifest.stop_reason == "duration reached"
    assert session.manifest.summary == {"safety": {"lost": 0}}
    assert session.manifest.versions["rabbitmq"] == "3.10.8"
    assert session.manifest.schema_version == fmt.SCHEMA_VERSION
    assert session.duration == SECONDS + 1
    assert session.phases == 2

    client = session.table(fmt.CLIENT_DIR)
    assert client.num_rows == WORKERS * SECONDS
    assert client.schema == CLIENT_SCHEMA  # the one this flowdeck writes (its rows)
    assert sum(client.column("errors").to_pylist()) == WORKERS  # one error each, second 5

    series = session.client_per_second()
    assert series.column("second").to_pylist() == list(range(1, SECONDS + 1))
    assert series.column("workers").to_pylist() == [WORKERS] * SECONDS
    assert series.column("published").to_pylist() == [
        WORKERS * (1000 + s) for s in range(1, SECONDS + 1)
    ]
    assert series.column("published_rate").to_pylist() == [
        float(WORKERS * (1000 + s)) for s in range(1, SECONDS + 1)
    ]

    # Percentiles from the recorded bucket rows equal HDR's over every value recorded, at
    # the recorded precision.
    for key in LATENCY_KEYS:
        merged = HdrHistogram(LOWEST_US, HIGHEST_US, fmt.LATENCY_SIGNIFICANT_DIGITS)
        for worker in workers:
            for value in worker.latencies[key]:
                record(merged, value)
        got = session.latency_percentiles(*key)
        assert got is not None
        assert got.count == merged.get_total_count()
        for attribute, percentile in (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100)):
            assert getattr(got, attribute) == merged.get_value_at_percentile(percentile) / 1000

    broker = session.table(fmt.BROKER_DIR)
    assert broker.num_rows == SECONDS
    first = broker.slice(0, 1).to_pylist()[0]
    assert first["mem_used"] == 300 and first["mem_limit"] == 2000 and first["mem_alarm"]
    assert first["disk_free"] == 4000 and first["age_s"] == 2.5
    assert session.table(fmt.QUEUES_DIR).num_rows == 3 * SECONDS
    assert session.table(fmt.PROMETHEUS_DIR).num_rows == 10

    kinds = [event.kind for event in session.events]
    assert kinds == [
        EventKind.RUN_STARTED,
        EventKind.PHASE,
        EventKind.CHANGE_APPLIED,
        EventKind.PHASE,
    ]
    assert session.events[2].change_id == 1


def test_no_password_anywhere_in_the_session(tmp_path: Path) -> None:
    recorder, _, _ = record_synthetic_run(tmp_path)
    for path in recorder.session_dir.rglob("*"):
        if path.is_file():
            assert b"s3cret-pw" not in path.read_bytes(), path
    manifest = json.loads((recorder.session_dir / fmt.MANIFEST).read_text())
    assert manifest["spec"]["uri"] == "amqp://flow:***@127.0.0.1:5672/%2F"
    assert "amqp://flow:***@127.0.0.1:5672/%2F" in (recorder.session_dir / fmt.EVENTS).read_text()


def test_parts_are_written_as_the_run_goes(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path, SPEC, flush_seconds=3600)
    recorder.start(time.time())
    worker = SyntheticWorker(0)
    recorder.snapshot(worker.snapshot(time.time()))
    assert fmt.part_files(recorder.session_dir / fmt.CLIENT_DIR) == []  # still buffered
    recorder.flush(wait=True)
    assert len(fmt.part_files(recorder.session_dir / fmt.CLIENT_DIR)) == 1
    assert open_session(recorder.session_dir).outcome == fmt.OUTCOME_RUNNING
    recorder.close("stopped", {}, time.time(), "operator pressed stop")
    session = open_session(recorder.session_dir)
    assert session.outcome == fmt.OUTCOME_STOPPED
    assert session.totals() == worker.counters


def test_running_session_of_a_dead_recorder_is_incomplete(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path, SPEC)
    recorder.start(time.time())
    manifest = fmt.read_manifest(recorder.session_dir)
    assert resolve_outcome(manifest) == fmt.OUTCOME_RUNNING  # this process is recording
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    gone = fmt.Manifest(**{**manifest.to_json(), "recorder_pid": child})
    assert resolve_outcome(gone) == fmt.OUTCOME_INCOMPLETE
    elsewhere = fmt.Manifest(**{**manifest.to_json(), "host": "another-host"})
    assert resolve_outcome(elsewhere) == fmt.OUTCOME_INCOMPLETE
    recorder.close("completed", {}, time.time())


def test_torn_last_event_line_is_skipped(tmp_path: Path) -> None:
    recorder, _, _ = record_synthetic_run(tmp_path)
    with open(recorder.session_dir / fmt.EVENTS, "a") as events:
        events.write('{"at": 1700000013.0, "kind": "info", "mess')
    session = open_session(recorder.session_dir)
    assert len(session.events) == 4
    assert session.torn_event_lines == 1


def test_temporary_and_hidden_files_are_not_parts(tmp_path: Path) -> None:
    recorder, _, _ = record_synthetic_run(tmp_path)
    client_dir = recorder.session_dir / fmt.CLIENT_DIR
    (client_dir / ".part-00099.parquet.tmp").write_bytes(b"PAR1 torn")
    (client_dir / "_SUCCESS").write_bytes(b"")
    session = open_session(recorder.session_dir)
    assert session.table(fmt.CLIENT_DIR).num_rows == WORKERS * SECONDS
    assert session.problems == []
    # Spark reads the same directory; pyarrow's own dataset reader agrees.
    assert pq.read_table(client_dir).num_rows == WORKERS * SECONDS


def test_list_sessions_in_start_order(tmp_path: Path) -> None:
    first = Recorder(tmp_path, SPEC, session_id=new_session_id("b run", 1_700_000_100))
    second = Recorder(tmp_path, SPEC, session_id=new_session_id("a run", 1_700_000_000))
    for recorder, at in ((first, 1_700_000_100.0), (second, 1_700_000_000.0)):
        recorder.start(at)
        recorder.snapshot(SyntheticWorker(0).snapshot(at + 1, published=500))
        recorder.close("completed", {}, at + 2)
    (tmp_path / "not-a-session").mkdir()
    infos = list_sessions(tmp_path)
    assert [i.session_id for i in infos] == [second.session_id, first.session_id]
    assert infos[0].peak_publish_rate == 500.0
    assert infos[0].outcome == "completed" and infos[0].phases == 1
    assert list_sessions(tmp_path / "nowhere") == []


def test_session_ids_sort_by_start_and_name_the_run() -> None:
    earlier = new_session_id("Bench #2: sweep", 1_700_000_000)
    later = new_session_id("Bench #2: sweep", 1_700_000_001)
    assert earlier.startswith("20231114-221320-bench-2-sweep-")
    assert earlier < later
    assert new_session_id("!!!", 0).startswith("19700101-000000-run-")


def test_sessions_root_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SESSIONS_DIR_ENV, str(tmp_path / "mine"))
    assert default_sessions_root() == tmp_path / "mine"
    monkeypatch.delenv(SESSIONS_DIR_ENV)
    assert default_sessions_root().name == "sessions"


def test_masks_every_uri_password_in_text() -> None:
    text = "lost amqps://u:p%40ss@h:5671/v and http://admin:pw@mgmt:15672/api, kept amqp://h/"
    assert mask_text(text) == (
        "lost amqps://u:***@h:5671/v and http://admin:***@mgmt:15672/api, kept amqp://h/"
    )


def test_the_row_builders_fill_every_column_of_their_tables() -> None:
    """The recorder writes the rows ``engine.recording.rows`` builds, and the live figures
    keep the same rows: a column of the format without a builder would be null for ever."""
    from flowdeck.collectors.model import BrokerSample
    from flowdeck.engine.recording import format as fmt
    from flowdeck.engine.recording.rows import broker_row, client_row
    from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings

    sample = BrokerSample(
        source="management", taken_at=2.0, figures_at=2.0, statistics_interval=1.0
    )
    snap = ClientSnapshot(
        0,
        2.0,
        1.0,
        Counters(),
        0,
        0,
        0,
        0,
        Settings.of(inflight=1, prefetch=1, ack_every=1, rate=1.0, publishers=1, consumers=1),
        0.0,
    )
    for row, schema in (
        (broker_row(sample, 1.0), fmt.BROKER_SCHEMA),
        (client_row(snap, Counters(), 1.0), CLIENT_SCHEMA),
    ):
        assert set(row) == {"t_us" if name == "ts" else name for name in schema.names}
