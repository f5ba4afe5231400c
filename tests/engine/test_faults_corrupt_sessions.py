"""The session reader over corrupted sessions (hypothesis): truncated, garbled, emptied or
missing manifest, event log and Parquet parts.

Whatever is broken, reading gives a clear SessionFormatError (the manifest cannot be read)
or a session that leaves the torn parts out and says so in ``problems`` — never another
exception, so ``flowdeck sessions``, the cockpit's replay and the report job can always
tell the operator what is wrong.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import list_sessions, open_session
from flowdeck.engine.recording.recorder import Recorder

sys.path.insert(0, str(Path(__file__).parent / "recording"))
from _synthetic import SPEC, SyntheticWorker, broker_sample

CORRUPTIONS = ("truncate", "garble", "overwrite", "empty", "delete", "append")


def record(root: Path) -> Path:
    recorder = Recorder(root, SPEC, versions={"rabbitmq": "3.10.8"}, flush_seconds=0.0)
    start = 1_700_000_000.0
    recorder.start(start)
    recorder.event(RunEvent(start, EventKind.RUN_STARTED, "run started"))
    workers = [SyntheticWorker(w) for w in range(2)]
    for second in range(1, 7):
        for worker in workers:
            recorder.snapshot(worker.snapshot(start + second + worker.worker * 0.01))
        recorder.broker(broker_sample(start + second + 0.5))
        if second == 3:
            recorder.event(RunEvent(start + second, EventKind.PHASE, "phase 1: inflight=400"))
    recorder.close("completed", {"safety": {"lost": 0}}, start + 8, "duration reached")
    return Path(recorder.session_dir)


@pytest.fixture(scope="module")
def good_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("sessions"))


def session_files(session: Path) -> list[str]:
    return sorted(str(p.relative_to(session)) for p in session.rglob("*") if p.is_file())


def corrupt(file: Path, how: str, where: float, garbage: bytes) -> None:
    data = file.read_bytes()
    at = int(len(data) * where)
    if how == "truncate":
        file.write_bytes(data[:at])
    elif how == "garble":
        file.write_bytes(data[:at] + garbage + data[at + len(garbage) :])
    elif how == "overwrite":
        file.write_bytes(garbage)
    elif how == "empty":
        file.write_bytes(b"")
    elif how == "delete":
        file.unlink()
    else:
        file.write_bytes(data + garbage)


def read_everything(session_dir: Path) -> list[str]:
    """Read every figure the front-ends read; the problems the reader reported."""
    infos = list_sessions(session_dir.parent)
    assert len(infos) == 1
    try:
        session = open_session(session_dir)
    except fmt.SessionFormatError as exc:
        assert str(exc)  # a message the operator can read
        assert infos[0].problem
        return [str(exc)]
    for name in fmt.TABLES:
        session.table(name)
    _ = (session.events, session.phases, session.duration, session.outcome)
    session.totals()
    session.client_per_second()
    for kind in LatencyKind:
        for basis in SendBasis:
            session.latency_percentiles(kind, basis)
    session.info()
    return list(session.problems)


def test_the_uncorrupted_session_reads_without_problems(good_session: Path) -> None:
    assert read_everything(good_session) == []
    assert len(session_files(good_session)) >= 8  # manifest, events, several parts


@pytest.mark.slow
# Six corruptions of eight files or more, at random places: 60 examples a run cover each
# pairing about once, and every run draws new ones (no example database is kept); 120
# took 49 s of a quiet CI run.
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=st.data(),
    how=st.sampled_from(CORRUPTIONS),
    where=st.floats(0.0, 1.0),
    garbage=st.binary(min_size=1, max_size=64),
)
def test_corrupted_sessions_read_or_fail_clearly(
    good_session: Path, data: st.DataObject, how: str, where: float, garbage: bytes
) -> None:
    target = data.draw(st.sampled_from(session_files(good_session)), label="file")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / good_session.name
        shutil.copytree(good_session, copy)
        corrupt(copy / target, how, where, garbage)
        problems = read_everything(copy)
        if target.endswith(".parquet") and how in ("overwrite", "empty"):
            assert any(target.split("/")[-1] in p for p in problems), problems


# -- manifests whose fields hold the wrong values --------------------------------------------

#: Manifests that parse as JSON but hold values no reader can show, and the field named.
BAD_MANIFESTS: dict[str, tuple[dict[str, Any], str]] = {
    "safety-text": ({"summary": {"safety": {"lost": "many"}}}, "'summary.safety.lost'"),
    "start-1e300": ({"start": 1e300}, "'start' must be a Unix time"),
    "end-infinite": ({"end": math.inf}, "'end' must be a Unix time"),
    "versions-list": ({"versions": ["3.13"]}, "'versions' must be an object"),
    "pid-text": ({"recorder_pid": "1234"}, "'recorder_pid' must be a process id"),
}


def with_manifest(source: Path, target: Path, **changes: Any) -> Path:
    shutil.copytree(source, target)
    manifest = json.loads((target / fmt.MANIFEST).read_text(encoding="utf-8"))
    manifest.update(changes)
    (target / fmt.MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return target


def flowdeck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_sessions_list_skips_corrupted_manifests_and_lists_the_others(
    good_session: Path, tmp_path: Path
) -> None:
    for name in ("good-1", "good-2"):
        shutil.copytree(good_session, tmp_path / name)
    for name, (changes, _) in BAD_MANIFESTS.items():
        with_manifest(good_session, tmp_path / name, **changes)

    result = flowdeck("sessions", "list", "--sessions-dir", str(tmp_path))

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == len(BAD_MANIFESTS)
    for name, (_, says) in BAD_MANIFESTS.items():
        (line,) = (w for w in warnings if w.startswith(f"flowdeck: skipped session {name}: "))
        assert says in line
    header, *rows, footer = result.stdout.strip().splitlines()
    assert header.startswith("ID")
    assert len(rows) == 2 and all("completed" in row for row in rows)
    assert footer == f"2 sessions in {tmp_path} ({len(BAD_MANIFESTS)} unreadable, skipped)"


@pytest.mark.parametrize("name", sorted(BAD_MANIFESTS))
def test_sessions_show_on_a_corrupted_manifest_is_one_line(
    good_session: Path, tmp_path: Path, name: str
) -> None:
    changes, says = BAD_MANIFESTS[name]
    with_manifest(good_session, tmp_path / name, **changes)
    result = flowdeck("sessions", "show", name, "--sessions-dir", str(tmp_path))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("flowdeck: ") and says in line


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_manifest_keys = st.sampled_from(
    [*fmt.Manifest.__dataclass_fields__, "summary.safety", "summary.safety.lost"]
)


@pytest.mark.slow
# New manifests every run, as above (150 took 30 s of a quiet CI run).
@settings(
    max_examples=75,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    changes=st.dictionaries(_manifest_keys, _json, min_size=1, max_size=4),
    whole=st.one_of(st.none(), _json),
)
def test_random_manifest_json_reads_or_is_refused_never_a_traceback(
    good_session: Path, changes: dict[str, Any], whole: Any
) -> None:
    """Any JSON in the manifest: the session reads and shows, or is a SessionFormatError
    (listed as skipped, shown as one line); never another exception."""
    from flowdeck.cli import main

    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "session"
        shutil.copytree(good_session, copy)
        manifest = json.loads((copy / fmt.MANIFEST).read_text(encoding="utf-8"))
        for key, value in changes.items():
            if key.startswith("summary."):
                summary = manifest.get("summary")
                summary = manifest["summary"] = dict(summary) if isinstance(summary, dict) else {}
                if key == "summary.safety":
                    summary["safety"] = value
                else:
                    safety = summary.get("safety")
                    summary["safety"] = {
                        **(safety if isinstance(safety, dict) else {}),
                        "lost": value,
                    }
            else:
                manifest[key] = value
        if whole is not None and not isinstance(whole, dict):
            manifest = whole  # not even an object
        (copy / fmt.MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")

        try:
            fmt.read_manifest(copy)
        except fmt.SessionFormatError as exc:
            refused = str(exc)
        else:
            refused = ""
        event("refused" if refused else "read")
        (info,) = list_sessions(Path(scratch))
        assert bool(info.problem) == bool(refused)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            shown = main(["sessions", "show", "session", "--sessions-dir", scratch])
            listed = main(["sessions", "list", "--sessions-dir", scratch])
        assert (shown, listed) == ((1, 0) if refused else (0, 0)), err.getvalue()
        if refused:
            assert len(err.getvalue().strip().splitlines()) == 2  # show's error, list's skip
