"""Recording survives what a run must survive: SIGKILL, a full disk, an unwritable directory."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest
from _synthetic import SPEC, SyntheticWorker, broker_sample

from engine.events import EventKind, RunEvent
from engine.recording import format as fmt
from engine.recording import recorder as recorder_module
from engine.recording.reader import open_session
from engine.recording.recorder import Recorder

HERE = Path(__file__).parent


def test_sigkill_mid_run_leaves_a_readable_incomplete_session(tmp_path: Path) -> None:
    session_id = f"killed-{uuid.uuid4().hex[:6]}"
    child = subprocess.Popen(
        [sys.executable, str(HERE / "_synthetic.py"), str(tmp_path), session_id],
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    assert child.stdout is not None
    ticks: list[tuple[int, float]] = []
    try:
        # Let it record for about two seconds (a few flushes), then kill it mid-stride.
        started: float | None = None
        while started is None or time.monotonic() - started < 2.5 or len(ticks) < 10:
            line = child.stdout.readline()
            assert line, "the recording process ended before it was killed"
            _, second, at = line.split()
            ticks.append((int(second), float(at)))
            started = started or time.monotonic()  # from its first second, not its imports
            assert time.monotonic() - started < 60
        child.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        # Ticks it printed before the kill that we had not read yet.
        for line in child.stdout:
            _, second, at = line.split()
            ticks.append((int(second), float(at)))
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL

    session = open_session(tmp_path / session_id)
    assert session.manifest.outcome == fmt.OUTCOME_RUNNING
    assert session.outcome == fmt.OUTCOME_INCOMPLETE
    assert session.problems == []  # every part that exists reads
    client = session.table(fmt.CLIENT_DIR)
    # Each worker's seconds are whole and in order from the first: nothing torn or skipped.
    # (A flush may fall between two workers' snapshots of the same second.)
    per_worker = {}
    for worker in (0, 1):
        rows = client.filter(pc.equal(client.column("worker"), worker))
        seconds = rows.column("elapsed_s").to_pylist()
        assert seconds == [float(s) for s in range(1, len(seconds) + 1)]
        per_worker[worker] = len(seconds)
    recorded = min(per_worker.values())
    assert max(per_worker.values()) - recorded <= 1
    # Every second handed over more than one flush interval and a margin before the kill
    # is on disk (the margin absorbs a busy machine; flush interval is 0.2 s).
    settled = [second for second, at in ticks if at < killed_at - 1.5]
    assert settled, "no tick old enough to have been flushed"
    assert recorded >= max(settled)
    assert max(per_worker.values()) <= ticks[-1][0]
    assert session.table(fmt.BROKER_DIR).num_rows >= max(settled)
    print(f"SIGKILL after {ticks[-1][0]} seconds handed over; {recorded} whole seconds read back")
    assert session.table(fmt.LATENCY_DIR).num_rows > 0


def test_unwritable_directory_sets_error_and_the_run_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    recorder = Recorder(blocker / "sessions", SPEC)
    recorder.start(time.time())
    assert recorder.error is not None
    assert "cannot create the session" in recorder.error
    assert str(blocker) in recorder.error and "--sessions-dir" in recorder.error
    # Every later call is harmless.
    recorder.snapshot(SyntheticWorker(0).snapshot(time.time()))
    recorder.broker(broker_sample(time.time()))
    recorder.event(RunEvent(time.time(), EventKind.INFO, "still running"))
    recorder.prometheus_range([(time.time(), "m", "{}", 1.0)])
    recorder.close("completed", {}, time.time())


def test_disk_error_while_writing_parts_keeps_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(tmp_path, SPEC, flush_seconds=0.0)
    start = time.time()
    recorder.start(start)
    worker = SyntheticWorker(0)
    for second in range(1, 4):
        recorder.snapshot(worker.snapshot(start + second))
    recorder.flush(wait=True)
    written = len(fmt.part_files(recorder.session_dir / fmt.CLIENT_DIR))

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(recorder_module.pq, "write_table", no_space)
    for second in range(4, 8):
        recorder.snapshot(worker.snapshot(start + second))
    recorder.flush(wait=True)
    assert recorder.error is not None
    assert "No space left on device [ENOSPC]" in recorder.error
    assert "kept" in recorder.error
    recorder.snapshot(worker.snapshot(start + 9))  # no raise, nothing recorded
    recorder.close("completed", {}, start + 10)

    session = open_session(recorder.session_dir)
    assert session.problems == []
    assert session.table(fmt.CLIENT_DIR).num_rows == written == 3
    assert session.outcome == fmt.OUTCOME_COMPLETED
    assert "ENOSPC" in session.manifest.recording_error
    leftovers = [p for p in recorder.session_dir.rglob(".*") if p.is_file()]
    assert leftovers == []  # the failed temporary part was removed


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 320 KiB tmpfs: a real full disk (needs root, as on the project's machines)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=320k", "flowdeck-test", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def test_full_disk_stops_recording_cleanly(tiny_tmpfs: Path) -> None:
    recorder = Recorder(tiny_tmpfs, SPEC, flush_seconds=0.0)
    start = time.time()
    recorder.start(start)
    workers = [SyntheticWorker(w) for w in range(4)]
    second = 0
    while recorder.error is None and second < 2000:
        second += 1
        for worker in workers:
            recorder.snapshot(worker.snapshot(start + second))
        recorder.broker(broker_sample(start + second, queues=50))
        recorder.event(RunEvent(start + second, EventKind.INFO, "x" * 200))
        recorder.flush(wait=True)
    assert recorder.error is not None, "the 320 KiB disk never filled"
    assert "No space left on device" in recorder.error
    recorder.close("completed", {}, start + second + 1)

    session = open_session(recorder.session_dir)
    assert session.problems == []
    client = session.table(fmt.CLIENT_DIR)
    assert 0 < client.num_rows <= 4 * second
    for worker in range(4):  # each worker's seconds whole and in order from the first
        rows = client.filter(pc.equal(client.column("worker"), worker))
        seconds = rows.column("elapsed_s").to_pylist()
        assert seconds == [float(s) for s in range(1, len(seconds) + 1)]
    assert len(session.events) >= 1
    # The space set aside at start let the final manifest say how the run ended.
    assert session.outcome == fmt.OUTCOME_COMPLETED
    assert "No space left on device" in session.manifest.recording_error
