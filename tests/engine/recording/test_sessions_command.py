"""``flowdeck sessions list | show | export | delete`` on recorded sessions."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from test_recording_roundtrip import SECONDS, WORKERS, record_synthetic_run

from flowdeck.cli import main
from flowdeck.engine.recording.recorder import SESSIONS_DIR_ENV


def test_list_show_export_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorder, workers, _ = record_synthetic_run(tmp_path)
    session_id = recorder.session_id
    root = ["--sessions-dir", str(tmp_path)]

    assert main(["sessions", "list", *root]) == 0
    out = capsys.readouterr().out
    header, row, footer = out.strip().splitlines()
    assert header.split()[:3] == ["ID", "START", "NAME"]
    assert row.startswith(session_id)
    cells = row.split()
    assert cells[3:8] == ["synthetic", "sweep", "13.0s", "completed", "2"]
    # Rates climb each second: the best rate held for 5 consecutive seconds is the fifth-last.
    peak_published = WORKERS * (1000 + SECONDS - 4)
    assert cells[8] == f"{peak_published:,}"
    assert footer == f"1 session in {tmp_path}"

    assert main(["sessions", "show", session_id[:20], *root]) == 0
    out = capsys.readouterr().out
    published = sum(w.counters.published for w in workers)
    assert f"published {published:,}" in out
    assert "completed (duration reached)" in out
    assert "amqp://flow:***@127.0.0.1:5672/%2F" in out
    assert "e2e actual" in out and "p99" in out
    assert "events (4)" in out and "phase 2: inflight=400" in out
    assert "s3cret" not in out

    export_dir = tmp_path / "export"
    assert main(["sessions", "export", session_id, "--csv", str(export_dir), *root]) == 0
    capsys.readouterr()
    with open(export_dir / "client.csv") as rows:
        client = list(csv.DictReader(rows))
    assert len(client) == WORKERS * SECONDS
    assert sum(int(r["published"]) for r in client) == published
    with open(export_dir / "client_per_second.csv") as rows:
        assert len(list(csv.DictReader(rows))) == SECONDS
    assert (export_dir / "events.csv").read_text().count("\n") == 5

    assert main(["sessions", "delete", session_id, *root]) == 0
    assert f"deleted session {session_id}" in capsys.readouterr().out
    assert not recorder.session_dir.exists()


def test_unknown_id_says_where_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SESSIONS_DIR_ENV, str(tmp_path))
    assert main(["sessions", "show", "20991231-nothing"]) == 1
    error = capsys.readouterr().err
    assert f"no session '20991231-nothing' in {tmp_path}" in error
    assert "flowdeck sessions list" in error
    assert main(["sessions", "delete", "nope"]) == 1
    assert main(["sessions", "list"]) == 0
    assert f"no sessions in {tmp_path}" in capsys.readouterr().out


def test_ambiguous_prefix_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, _, _ = record_synthetic_run(tmp_path)
    record_synthetic_run(tmp_path)
    assert main(["sessions", "show", first.session_id[:8], "--sessions-dir", str(tmp_path)]) == 1
    assert "matches 2 sessions" in capsys.readouterr().err
