"""Recording survives what a run must survive: SIGKILL, a full disk, an unwritable directory."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import shutil
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

from flowdeck.collectors import Broker
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording import recorder as recorder_module
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.recording.recorder import Recorder

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


@contextlib.contextmanager
def mounted_tmpfs(mount_point: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted with ``options`` at ``mount_point`` (needs root, as on the project's
    machines; skips the test elsewhere), unmounted afterwards."""
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "flowdeck-test", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 320 KiB tmpfs: a real full disk."""
    with mounted_tmpfs(tmp_path / "tiny", "size=320k") as mount_point:
        yield mount_point


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


# -- recording trouble is said when it happens, by the run (controller, CLI, cockpit) ------

ROOT = HERE.parents[2]
SHARED_MANAGEMENT = "http://127.0.0.1:15672"
TICK_LINE = re.compile(r"^\[\s*\d+/\d+ s\]")


def run_args(unique_name: str, sessions: Path, duration: int) -> list[str]:
    return [
        sys.executable, "-m", "flowdeck.cli", "run",
        "--uri", "amqp://guest:guest@127.0.0.1:5672/%2F",
        "--management-url", SHARED_MANAGEMENT,
        "--publishers", "1", "--consumers", "1", "--rate", "20",
        "--duration", str(duration), "--workers", "0", "--drain", "1",
        "--queue-pattern", f"{unique_name}-%d", "--cleanup",
        "--sessions-dir", str(sessions),
    ]  # fmt: skip


def missing_paths_named(text: str, root: Path) -> list[str]:
    """Paths under ``root`` that ``text`` names and that do not exist."""
    named = re.findall(re.escape(str(root)) + r"[^\s:;,()'\"]*", text)
    return [path for path in named if not Path(path.rstrip(".")).exists()]


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs: root writes through a chmod, not through a read-only mount."""
    with mounted_tmpfs(tmp_path / "read-only", "ro,size=64k") as mount_point:
        yield mount_point


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_cli_with_a_read_only_sessions_dir_says_so_before_the_load_and_names_no_session(
    read_only_dir: Path, unique_name: str
) -> None:
    result = subprocess.run(
        run_args(unique_name, read_only_dir, duration=3),
        capture_output=True,
        text=True,
        timeout=100,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": ""},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    trouble = next(i for i, line in enumerate(lines) if "recording is off" in line)
    first_tick = next(i for i, line in enumerate(lines) if TICK_LINE.match(line))
    ended = next(
        i for i, line in enumerate(lines) if line.startswith("run ") and "completed" in line
    )
    assert trouble < first_tick < ended  # said at the start, not only in the summary
    assert "warning:" in lines[trouble] and "Read-only file system" in lines[trouble]
    assert str(read_only_dir) in lines[trouble] and "--sessions-dir" in lines[trouble]
    assert not any(line.startswith(("session:", "recording to")) for line in lines)
    assert missing_paths_named(result.stdout + result.stderr, read_only_dir) == []
    assert os.listdir(read_only_dir) == []


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_cli_says_at_once_when_the_session_is_removed_mid_run(
    tmp_path: Path, unique_name: str
) -> None:
    sessions = tmp_path / "sessions"
    child = subprocess.Popen(
        run_args(unique_name, sessions, duration=10),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": "", "FLOWDECK_PASSWORD": ""},
    )
    assert child.stdout is not None
    lines: list[tuple[float, str]] = []
    removed_at: float | None = None
    session: Path | None = None
    try:
        for line in child.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))
            if line.startswith("recording to "):
                session = Path(line.removeprefix("recording to ").strip())
            if removed_at is None and session is not None and TICK_LINE.match(line):
                # A second into the load the session has parts queued: take it away.
                shutil.rmtree(session)
                removed_at = time.monotonic()
        child.wait(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 0, [text for _, text in lines]
    assert session is not None and removed_at is not None
    texts = [text for _, text in lines]
    trouble = next(i for i, text in enumerate(texts) if "recording stopped" in text)
    drain = next(i for i, text in enumerate(texts) if "publishing stopped" in text)
    assert trouble < drain, texts  # during the load, not at the end
    assert "warning:" in texts[trouble] and "removed from disk" in texts[trouble]
    # Parts are flushed every 2 s and the controller looks every second: well within 8 s.
    assert lines[trouble][0] - removed_at < 8, texts
    after = "\n".join(texts[trouble:])
    assert str(session) not in after and missing_paths_named(after, sessions) == []
    assert not any(text.startswith("session:") for text in texts)
    assert not session.exists()  # nothing re-created it


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
async def test_the_run_records_the_trouble_as_an_event_when_it_happens(
    tmp_path: Path, unique_name: str
) -> None:
    from flowdeck.engine.controller import Controller
    from flowdeck.engine.run_recording import RunRecording
    from flowdeck.engine.spec import RunSpec

    spec = RunSpec(
        name="vanishing",
        queue_pattern=f"{unique_name}-%d",
        publishers=1,
        consumers=1,
        rate=20,
        duration=8,
        workers=0,
    )
    controller = Controller(
        spec,
        broker=Broker.parse(
            "amqp://guest:guest@127.0.0.1:5672/%2F", management_url=SHARED_MANAGEMENT
        ),
        recording=RunRecording(tmp_path),
        drain_seconds=1,
        cleanup=True,
    )
    events: list[RunEvent] = []
    controller.add_listener(lambda u: events.append(u) if isinstance(u, RunEvent) else None)
    await controller.start()
    session = controller.session_dir
    assert session is not None and session.is_dir()
    await asyncio.sleep(1.5)
    removed_at = time.time()
    shutil.rmtree(session)
    summary = await controller.wait()

    stopped = [e for e in events if e.kind is EventKind.RECORDING_STOPPED]
    assert len(stopped) == 1, [e.message for e in events]
    drain = next(e for e in events if e.kind is EventKind.DRAIN)
    assert removed_at <= stopped[0].at < drain.at
    assert "removed from disk" in stopped[0].message and str(session) not in stopped[0].message
    assert stopped[0].detail["session_dir"] is None
    assert summary.session_dir is None and controller.session_dir is None
    assert "removed from disk" in summary.recording_error
    assert summary.outcome == "completed" and summary.safety.published > 0


async def test_the_cockpit_banner_shows_recording_trouble() -> None:
    from flowdeck.tui.app import FlowdeckApp
    from flowdeck.tui.widgets.alarm_banner import AlarmBanner
    from tests.tui.fakes import T0, FakeControl

    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        fake.emit_tick(2)
        await pilot.pause()
        banner = app.screen.query_one(AlarmBanner)
        assert not banner.display
        message = "recording stopped: cannot write part-00002.parquet: No space left on device"
        fake.emit(RunEvent(T0 + 2, EventKind.RECORDING_STOPPED, message))
        fake.emit_tick(1)
        await pilot.pause()
        assert banner.display
        shown = str(banner.render())
        assert "NOT RECORDING" in shown and "No space left on device" in shown
