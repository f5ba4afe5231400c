"""The session reader over corrupted sessions (hypothesis): truncated, garbled, emptied or
missing manifest, event log and Parquet parts.

Whatever is broken, reading gives a clear SessionFormatError (the manifest cannot be read)
or a session that leaves the torn parts out and says so in ``problems`` — never another
exception, so ``flowdeck sessions``, the cockpit's replay and the report job can always
tell the operator what is wrong.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.events import EventKind, RunEvent
from engine.latency import LatencyKind, SendBasis
from engine.recording import format as fmt
from engine.recording.reader import list_sessions, open_session
from engine.recording.recorder import Recorder

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


@settings(
    max_examples=120,
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
