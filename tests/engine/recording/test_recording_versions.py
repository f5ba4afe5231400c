"""Sessions from older format versions read; a newer major version is refused clearly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.latency import LatencyKind, SendBasis
from engine.recording import format as fmt
from engine.recording.reader import list_sessions, open_session
from engine.snapshot import Counters
from tui.cli import main

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
