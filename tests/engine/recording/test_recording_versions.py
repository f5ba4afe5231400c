"""Sessions from older format versions read; a newer major version is refused clearly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _synthetic import SPEC, SyntheticWorker, broker_sample

from flowdeck.cli import main
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import RECORDED_NODES, list_sessions, open_session
from flowdeck.engine.recording.recorder import Recorder
from flowdeck.engine.recording.rows import RECORDED_SETTINGS, SETTING_COLUMNS
from flowdeck.engine.snapshot import Counters

OLD_SESSION = Path(__file__).parent / "fixtures" / "format-1.0-session"


def copy_old_session(root: Path, session_id: str = "20231114-221320-format-one-oh-0a0a") -> Path:
    path = root / session_id
    shutil.copytree(OLD_SESSION, path)
    return path


def test_format_1_0_session_reads() -> None:
    session = open_session(OLD_SESSION)
    assert session.manifest.schema_version == "1.0"
    assert session.manifest.recording_error == ""
    assert session.outcome == fmt.OUTCOME_COMPLETED
    # 2 workers x 5 s: worker w publishes 100 * (w + 1) and consumes 90 * (w + 1) a second
    assert session.totals() == Counters(published=1500, confirmed=1500, consumed=1350, acked=1350)
    client = session.table(fmt.CLIENT_DIR)
    assert client.schema == fmt.CLIENT_SCHEMA
    assert client.column("errors").null_count == client.num_rows == 10  # not in 1.0
    assert session.client_per_second().column("published_rate").to_pylist() == [300.0] * 5
    latency = session.latency_percentiles(LatencyKind.END_TO_END, SendBasis.ACTUAL)
    assert latency is not None
    assert (latency.count, latency.p50, latency.p95, latency.max) == (900, 2.047, 8.191, 8.191)
    assert session.table(fmt.BROKER_DIR).num_rows == 0  # a table with no parts is empty
    assert session.phases == 1


def record_ticked_run(root: Path) -> tuple[Path, float]:
    """Three seconds of one worker, its ticks a little after each snapshot, one poll each."""
    recorder = Recorder(root, SPEC, flush_seconds=0.0)
    start = 1_700_000_000.0
    recorder.start(start)
    worker = SyntheticWorker(0)
    for second in range(1, 4):
        recorder.snapshot(worker.snapshot(start + second + 0.002, published=100))
        recorder.tick(start + second + 0.001)  # before the snapshot's own time
        recorder.broker(broker_sample(start + second + 0.5))
    recorder.tick(start + 3.7)
    recorder.close("completed", {}, start + 3.7)
    return recorder.session_dir, start


#: What format 1.5 added to a broker sample: flow control and the run's broker-side figures.
FLOW_FIGURES = (
    "connections_flow",
    "channels",
    "channels_flow",
    "run_publishers",
    "run_publishers_flow",
    "publishers_in_flow",
    "run_accepted",
    "run_accept_rate",
    "run_unconfirmed",
    "run_delivered",
    "run_deliver_rate",
    "run_acked",
    "run_ack_rate",
    "run_unacked",
)
#: What format 1.11 added to a broker sample: the stream plugin's figures.
STREAM_FIGURES = (
    "stream_connections",
    "stream_consumers",
    "stream_offset_lag",
    "stream_offset_lag_max",
    "stream_publishers",
    "stream_errored",
)
NODE_FLOW_FIGURES = (
    "connections_running",
    "connections_flow",
    "connections_blocking",
    "connections_blocked",
    "channels_running",
    "channels_flow",
)


def test_format_1_5_reads_tick_times_nodes_queue_placement_and_flow(tmp_path: Path) -> None:
    path, start = record_ticked_run(tmp_path)
    session = open_session(path)
    assert session.manifest.schema_version == fmt.SCHEMA_VERSION == "1.11"
    # 1.6: the manifest lists the settings the run had, each a client-table column
    assert session.manifest.settings == RECORDED_SETTINGS
    assert [s.name for s in session.manifest.settings] == list(SETTING_COLUMNS)
    ticks = session.ticks()
    assert [t.at for t in ticks] == [start + 1.001, start + 2.001, start + 3.001, start + 3.7]
    # Each tick has the snapshots the controller had and that were taken by its time, as
    # the live controller counted them: a snapshot stamped a millisecond after a tick
    # belongs to the next one (the last tick, at 3.7 s, has them all).
    assert [t.totals.published for t in ticks] == [0, 100, 200, 300]
    samples = session.broker_samples()
    assert [n.name for n in samples[0].nodes] == ["rabbit@a", "rabbit@b"]
    assert samples[0].nodes == broker_sample(start + 1.5).nodes
    # a cluster's placement and partitions read back as the collector gave them (1.4)
    assert samples[0].queues == broker_sample(start + 1.5).queues
    assert samples[0].queues[0].leader == "rabbit@a"
    assert samples[0].nodes[0].partitions == ("rabbit@c",)
    # flow control per node and summed, and the run's own figures, as polled (1.5)
    recorded = broker_sample(start + 1.5)
    assert samples[0].nodes[0].connections_flow == 2
    assert [getattr(samples[0], name) for name in FLOW_FIGURES] == [
        getattr(recorded, name) for name in FLOW_FIGURES
    ]
    # the stream plugin's figures, as polled (1.11)
    assert [getattr(samples[0], name) for name in STREAM_FIGURES] == [5, 2, 1_250, 1_000, 3, 0]


def test_session_before_1_11_reads_with_no_stream_figures(tmp_path: Path) -> None:
    path, _ = record_ticked_run(tmp_path)
    for part in fmt.part_files(path / fmt.BROKER_DIR):
        written = pq.read_table(part)
        pq.write_table(written.drop_columns(list(STREAM_FIGURES)), part)
    manifest = json.loads((path / fmt.MANIFEST).read_text())
    manifest["schema_version"] = "1.10"
    (path / fmt.MANIFEST).write_text(json.dumps(manifest))
    sample = open_session(path).broker_samples()[0]
    assert [getattr(sample, name) for name in STREAM_FIGURES] == [None] * 6
    assert sample.run_unacked == 50  # what 1.10 recorded reads as it was


def test_session_before_1_5_reads_with_no_flow_figures(tmp_path: Path) -> None:
    path, _ = record_ticked_run(tmp_path)
    added = {fmt.BROKER_DIR: FLOW_FIGURES, fmt.NODES_DIR: NODE_FLOW_FIGURES}
    for table, columns in added.items():
        for part in fmt.part_files(path / table):
            written = pq.read_table(part)
            pq.write_table(written.drop_columns(list(columns)), part)
    manifest = json.loads((path / fmt.MANIFEST).read_text())
    manifest["schema_version"] = "1.4"
    (path / fmt.MANIFEST).write_text(json.dumps(manifest))
    sample = open_session(path).broker_samples()[0]
    assert [getattr(sample, name) for name in FLOW_FIGURES] == [None] * 5 + [()] + [None] * 8
    assert sample.connections_blocking == 1  # what 1.4 recorded reads as it was
    for node in sample.nodes:
        assert [getattr(node, name) for name in NODE_FLOW_FIGURES] == [None] * 6


def test_session_before_1_3_reads_with_whole_second_ticks_and_one_summed_node(
    tmp_path: Path,
) -> None:
    path, start = record_ticked_run(tmp_path)
    shutil.rmtree(path / fmt.TICKS_DIR)
    shutil.rmtree(path / fmt.NODES_DIR)
    manifest = json.loads((path / fmt.MANIFEST).read_text())
    manifest["schema_version"] = "1.2"
    (path / fmt.MANIFEST).write_text(json.dumps(manifest))
    session = open_session(path)
    assert session.table(fmt.TICKS_DIR).num_rows == session.table(fmt.NODES_DIR).num_rows == 0
    ticks = session.ticks()
    assert [t.at for t in ticks] == [start + 1, start + 2, start + 3, start + 3.7]
    assert [t.totals.published for t in ticks] == [0, 100, 200, 300]
    (node,) = session.broker_samples()[0].nodes
    assert (node.name, node.mem_used, node.mem_alarm) == (RECORDED_NODES, 300, True)


def test_format_1_0_session_replays() -> None:
    ticks = open_session(OLD_SESSION).ticks()
    assert ticks and ticks[-1].totals.published == 1500


def test_newer_minor_version_reads_and_drops_columns_it_does_not_know(tmp_path: Path) -> None:
    path = copy_old_session(tmp_path)
    manifest = json.loads((path / fmt.MANIFEST).read_text())
    manifest["schema_version"] = f"{fmt.SCHEMA_MAJOR}.99"
    manifest["something_new"] = {"added": "later"}
    (path / fmt.MANIFEST).write_text(json.dumps(manifest))
    part = path / fmt.CLIENT_DIR / "part-00000.parquet"
    table = pq.read_table(part)
    pq.write_table(table.append_column("future_gauge", pa.array([1.5] * table.num_rows)), part)
    session = open_session(path)
    assert session.table(fmt.CLIENT_DIR).schema == fmt.CLIENT_SCHEMA
    assert session.totals().published == 1500


def test_newer_major_version_is_refused_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_old_session(tmp_path)
    manifest = json.loads((path / fmt.MANIFEST).read_text())
    manifest["schema_version"] = f"{fmt.SCHEMA_MAJOR + 1}.0"
    (path / fmt.MANIFEST).write_text(json.dumps(manifest))

    with pytest.raises(fmt.SessionFormatError, match="newer than this flowdeck reads"):
        open_session(path)
    [info] = list_sessions(tmp_path)
    assert "upgrade flowdeck" in info.problem

    assert main(["sessions", "show", path.name, "--sessions-dir", str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert f"written with session format {fmt.SCHEMA_MAJOR + 1}.0" in error
    assert "upgrade flowdeck to read it" in error


def test_required_column_missing_is_reported_not_hidden(tmp_path: Path) -> None:
    path = copy_old_session(tmp_path)
    part = path / fmt.CLIENT_DIR / "part-00001.parquet"
    pq.write_table(pq.read_table(part).drop_columns(["published"]), part)
    session = open_session(path)
    assert session.totals().published == 700  # the first part (5 rows) still reads
    assert len(session.problems) == 1
    assert "required column 'published' is missing" in session.problems[0]
