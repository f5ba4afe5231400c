"""Progress lines that never lie: one line per run second, in order, on a loaded machine.

The controller used to tick whenever its loop woke, label the tick with its rounded
elapsed time and schedule the next one half a second on when it woke late: on a loaded
machine one second came twice (the second copy with no snapshot, so no latency) and a
stall of several seconds left one line for all of them. It now ticks at each second's
end and catches up on the seconds a late wake missed, each over the snapshots taken by
its end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flowdeck.engine.aggregate import SnapshotAggregator
from flowdeck.engine.latency import LatencyKind, SendBasis, encode, new_histogram
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings

ROOT = Path(__file__).resolve().parents[2]
E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)
TICK_LINE = re.compile(r"^\[\s*(\d+)/(\d+) s\] target")


def _snap(at: float, published: int, latency_ms: float) -> ClientSnapshot:
    histogram = new_histogram()
    histogram.record_value(int(latency_ms * 1000))
    return ClientSnapshot(
        worker=0,
        at=at,
        interval=1.0,
        counters=Counters(published=published, confirmed=published, consumed=published),
        pending_confirms=0,
        unacked=0,
        connections=2,
        blocked=0,
        settings=Settings.of(
            inflight=1000, prefetch=1000, ack_every=1, rate=100.0, publishers=1, consumers=1
        ),
        target_rate=100.0,
        latency={E2E: encode(histogram)},
    )


def test_ticks_caught_up_late_each_show_their_own_second() -> None:
    """Three seconds' snapshots arrive before a stalled controller ticks again: each of the
    three ticks it then takes has its own second's rate and latency."""
    aggregator = SnapshotAggregator()
    start = 1000.0
    # cumulative counts: 100, 200 and 300 msg/s in the three seconds
    for second, (published, latency) in enumerate([(100, 1.0), (300, 5.0), (600, 9.0)], 1):
        aggregator.add(_snap(start + second - 0.1, published, latency))
    ticks = [aggregator.tick(start + second) for second in (1, 2, 3)]
    assert [t.rates.publish for t in ticks] == [100.0, 200.0, 300.0]
    assert [t.latency[E2E].p50 for t in ticks] == pytest.approx([1.0, 5.0, 9.0], rel=0.01)
    assert [t.totals.published for t in ticks] == [100, 300, 600]


def test_a_snapshot_taken_after_a_tick_waits_for_the_next() -> None:
    aggregator = SnapshotAggregator()
    aggregator.add(_snap(1001.5, 150, 2.0))
    assert aggregator.tick(1001.0).totals.published == 0
    assert aggregator.tick(1002.0).totals.published == 150


def _busy_loops(seconds: float) -> list[subprocess.Popen[bytes]]:
    """One busy loop per core, each ending by itself after ``seconds``."""
    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 2)]


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_one_progress_line_per_second_under_cpu_load(shared_uri: str, unique_name: str) -> None:
    duration = 6
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flowdeck.cli",
            "run",
            "--uri",
            shared_uri,
            "--queue-pattern",
            f"{unique_name}-%d",
            "--duration",
            str(duration),
            "--rate",
            "500",
            "--workers",
            "1",
            "--drain",
            "2",
            "--no-record",
            "--cleanup",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": ""},
        # Below the busy loops' priority: the controller and its worker wait for the CPU.
        preexec_fn=lambda: os.nice(10),
    )
    loops: list[subprocess.Popen[bytes]] = []
    lines: list[str] = []
    try:
        assert run.stdout is not None
        for line in run.stdout:
            lines.append(line.rstrip("\n"))
            if not loops and "started against" in line:
                loops = _busy_loops(duration + 2)  # the load comes once the run has begun
        stderr = run.stderr.read() if run.stderr is not None else ""
        code = run.wait(timeout=60)
    finally:
        run.kill()
        for loop in loops:
            loop.kill()
            loop.wait()
    assert loops, "\n".join(lines)
    assert code == 0, stderr
    seconds = [int(m.group(1)) for line in lines if (m := TICK_LINE.match(line))]
    assert seconds == list(range(1, duration + 1)), "\n".join(lines)
