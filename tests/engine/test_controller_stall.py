"""A stalled controller is recorded as a stall, not shown as an outage.

`flowdeck run` stopped with SIGSTOP for 7 s and let go with SIGCONT: its worker process went
on publishing at 200 msg/s, but the controller saw nothing meanwhile. Before, it printed
and recorded ``publish 0/s confirm 0/s consume 0/s`` for the seconds it missed, and no event
said why. Now an event records the stall and its length, and the missed seconds are filled
in from the workers' snapshots of those seconds.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowdeck.engine.events import EventKind
from flowdeck.engine.recording.reader import open_session

ROOT = Path(__file__).resolve().parents[2]
STOP_SECONDS = 7.0


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(150)
def test_a_stopped_controller_is_recorded_as_a_stall_with_the_workers_figures(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flowdeck.cli",
            "run",
            "--uri",
            shared_uri,
            "--queue-pattern",
            f"{unique_name}-%d",
            "--publishers",
            "1",
            "--consumers",
            "1",
            "--rate",
            "200",
            "--duration",
            "30s",
            "--workers",
            "1",  # a worker process of its own, which the stop does not reach
            "--sessions-dir",
            str(tmp_path),
            "--cleanup",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": ""},
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("[    8/30 s]"):
                break
        else:
            pytest.fail("the run never reached its 8th second:\n" + "".join(lines))
        process.send_signal(signal.SIGSTOP)
        time.sleep(STOP_SECONDS)
        process.send_signal(signal.SIGCONT)
        out, err = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.communicate()
    output = "".join(lines) + out
    assert process.returncode == 0, err[-2000:]

    (session_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    session = open_session(session_dir)
    start = session.manifest.start
    (stall,) = [e for e in session.events if e.kind is EventKind.CONTROLLER_STALLED]
    stalled = float(stall.detail["stalled_s"])
    assert STOP_SECONDS - 2.5 <= stalled <= STOP_SECONDS + 3, stall.message
    assert f"controller stalled {stalled:.1f} s" in stall.message
    began, ended = float(stall.detail["from"]) - start, float(stall.detail["to"]) - start

    ticks = [t for t in session.ticks() if t.elapsed <= 30]  # not the closing tick
    missed = [t for t in ticks if began + 1 <= t.elapsed <= ended - 1]
    steady = [t.publish_rate for t in ticks if 3 <= t.elapsed < began or ended + 2 < t.elapsed]
    assert len(missed) >= 3 and len(steady) >= 5
    usual = statistics.median(steady)
    assert usual > 100
    for tick in missed:  # what the worker did in those seconds, not zeros
        assert tick.publish_rate / usual > 0.7, (tick.elapsed, tick.publish_rate, usual)
        assert tick.consume_rate / usual > 0.7, (tick.elapsed, tick.consume_rate, usual)
    # The progress lines of the missed seconds say the controller stalled, with no zeros.
    late = [
        line for line in output.splitlines() if "controller stalled" in line and "target" in line
    ]
    assert len(late) >= len(missed)
    assert not any(" publish       0/s" in line for line in late)
