"""`flowdeck run` and `flowdeck presets` as an operator uses them: in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowdeck.engine.events import EventKind
from flowdeck.engine.presets import PRESETS
from flowdeck.engine.recording.reader import open_session

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]
ROOT = Path(__file__).resolve().parents[2]


def flowdeck(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": ""},
    )


def test_presets_lists_one_line_per_preset_starting_with_its_name() -> None:
    result = flowdeck("presets")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(PRESETS)
    bench2 = next(line for line in lines if line.startswith("bench2-sweep "))
    assert "20 publishers x 2000 msg/s" in bench2 and "in-flight 1% (20)" in bench2
    assert bench2.split()[1:3] == ["fig", "9"]  # the seed figure it reproduces


@pytest.mark.parametrize("command", [[], ["run"], ["cockpit"], ["sessions"], ["report"]])
def test_every_help_page_prints(command: list[str]) -> None:
    result = flowdeck(*command, "--help", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "usage: flowdeck" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prefetch", "70000"], "prefetch must be 0..65535, got 70000"),
        (["--preset", "bench9"], "unknown preset 'bench9'"),
        (["--duration", "soon"], "duration must be seconds like 30, 30s, 5m or 1h, got 'soon'"),
        (["--queue-type", "fifo"], "queue_type must be one of classic, quorum, stream"),
        (["--rate", "fast"], "rate must be a number, got 'fast'"),
        (["--change", "10:speed=3"], "unknown setting 'speed'"),
        (["--preset", "bench1", "--scale", "0"], "scale must be in (0, 100], got 0"),
        (["--uri", "http://broker"], "uri must start with amqp:// or amqps://"),
        (["--consumer-node", "nearby"], "consumer_node must be one of spread, off-leader"),
        # refused before anything is declared: a single node has no other node to sit on
        (
            ["--uri", "amqp://guest:guest@localhost:5672/%2F", "--consumer-node", "off-leader"],
            "consumer_node = off-leader needs a cluster's node uris, the run has one",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = flowdeck("run", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flowdeck: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(180)
def test_a_scaled_sweep_preset_runs_end_to_end_with_json(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    result = flowdeck(
        "run",
        "--preset",
        "bench1-sweep",
        "--scale",
        "0.05",
        "--duration",
        "9s",
        "--uri",
        shared_uri,
        "--queue-pattern",
        f"{unique_name}-%d",
        "--workers",
        "1",  # a worker process: the preset's queue args travel by pickle
        "--sessions-dir",
        str(tmp_path),
        "--cleanup",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # stdout holds the JSON alone
    assert summary["name"] == "bench1-sweep" and summary["outcome"] == "completed"
    assert summary["phases"] == 7  # the start and six in-flight limits
    safety = summary["safety"]
    assert safety["lost"] == 0 and safety["published"] == safety["consumed"] > 0
    assert summary["publish_rate"] / 1000 > 0.9  # 1 publisher x 1000 msg/s after scaling
    assert summary["session_dir"] and Path(summary["session_dir"]).is_dir()
    progress = result.stderr.splitlines()
    ticks = [line for line in progress if line.startswith("[") and "target" in line]
    assert len(ticks) >= 7
    assert sum("in effect in every worker" in line for line in progress) == 6
    # the preset keeps the seed's 3.8 queue argument; this broker says it ignores it, once,
    # printed and recorded with the run's start
    said = [line for line in progress if "ignores x-max-in-memory-length = 0 (since 3.10)" in line]
    assert len(said) == 1 and "kept in the spec for the record" in said[0], progress
    recorded = (Path(summary["session_dir"]) / "events.jsonl").read_text()
    assert recorded.count("ignores x-max-in-memory-length = 0") == 1


@pytest.mark.parametrize(
    ("flags", "sweep", "no_confirms"),
    [
        (["--step", "10s"], 60, 20),  # a run without a schedule: its preset's 2 steps
        (["--duration", "30s"], 30, 30),
        (["--step", "10s", "--duration", "45s"], 60, 45),  # each takes its own
    ],
)
def test_the_matrix_gives_each_run_its_length(
    flags: list[str], sweep: float, no_confirms: float
) -> None:
    from flowdeck.cli import build_parser
    from flowdeck.cli.import_perftest import spec_from_run_args
    from flowdeck.cli.run import matrix_run_args

    args = build_parser().parse_args(["run", "--matrix", "bench2", "--scale", "0.05", *flags])
    lengths = {
        name: spec_from_run_args(matrix_run_args(args, name)).duration
        for name in ("bench2-sweep", "bench2-mirrored-noconfirms")
    }
    assert lengths == {"bench2-sweep": sweep, "bench2-mirrored-noconfirms": no_confirms}


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(180)
def test_step_holds_each_phase_that_long_and_the_duration_follows(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    """--step 3s on a 3-step schedule: a 9 s run whose phases each last 3 s, judged by the
    recording's own clocks (the phase events' times and the drain's), within a tick."""
    step = 3.0
    result = flowdeck(
        "run",
        "--rate", "100",
        "--schedule", "0:inflight=10; 1:inflight=20; 2:inflight=40",
        "--step", f"{step:g}s",
        "--uri", shared_uri,
        "--queue-pattern", f"{unique_name}-%d",
        "--workers", "0",
        "--sessions-dir", str(tmp_path),
        "--drain", "1",
        "--cleanup",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    session = open_session(next(tmp_path.iterdir()))
    assert session.manifest.spec["duration"] == 3 * step
    assert [s["at"] for s in session.manifest.spec["schedule"]] == [0, step, 2 * step]
    phases = [e for e in session.events if e.kind is EventKind.PHASE and e.change_id]
    drain = next(e.at for e in session.events if e.kind is EventKind.DRAIN)
    assert [e.detail["label"] for e in phases] == ["inflight=10", "inflight=20", "inflight=40"]
    starts = [e.at for e in phases]
    lengths = [end - begin for begin, end in zip(starts, [*starts[1:], drain], strict=True)]
    tick = 1.0
    assert all(abs(length - step) <= tick for length in lengths), lengths


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(180)
def test_ctrl_c_stops_cleanly_with_the_summary(shared_uri: str, unique_name: str) -> None:
    process = subprocess.Popen(
        [
            *FLOWDECK,
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
            "100",
            "--duration",
            "120",
            "--workers",
            "0",
            "--no-record",
            "--cleanup",
            "--durable",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert process.stdout is not None
    lines: list[str] = []
    started = time.monotonic()
    while time.monotonic() - started < 60:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "target" in line and "publish" in line and " 0/s" not in line.split("publish")[1][:10]:
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    text = "".join(lines) + out
    # 130, as shells expect of an interrupted command: `flowdeck run ... && flowdeck
    # report ...` does not carry on; the run still drained and printed its summary.
    assert process.returncode == 130, err
    assert "stopped by operator (Ctrl-C)" in text
    assert "lost (confirmed, never consumed)" in text
    assert "Traceback" not in err


@pytest.mark.parametrize("words", [["presets"], ["--version"]], ids=["presets", "version"])
def test_a_reader_that_goes_away_gets_no_traceback(words: list[str]) -> None:
    """``flowdeck presets | head -1``, ``flowdeck --version | head -1`` (scripts/setup does
    that): the pipe closes early; flowdeck stops quietly."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "flowdeck.cli", *words],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 141


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_without_confirms_the_summary_says_loss_cannot_be_assessed(
    shared_uri: str, unique_name: str
) -> None:
    result = flowdeck(
        "run",
        "--preset",
        "low-latency",
        "--duration",
        "3s",
        "--uri",
        shared_uri,
        "--queue-pattern",
        f"{unique_name}-%d",
        "--workers",
        "0",
        "--no-record",
        "--cleanup",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    safety = json.loads(result.stdout)["safety"]
    assert safety["confirms"] is False
    assert safety["confirmed"] == 0 and safety["unconfirmed"] == 0
    assert safety["published"] == safety["consumed"] > 0


def test_at_capacity_picks_the_fragile_run_and_the_scale_just_past_its_capacity() -> None:
    from flowdeck.cli.run import fragile_preset, scale_past
    from flowdeck.engine import matrix, preset

    names = matrix("bench2")
    assert fragile_preset(names) == "bench2-mirrored-noconfirms"
    full = preset("bench2-mirrored-noconfirms")  # 20 publishers x 2,000 msg/s
    assert full.publishers * full.rate == 40_000
    # a broker that held 6,400 msg/s: the matrix runs at 8,000 (1.25x), scale 0.2
    scale = scale_past(full, 6_400)
    assert scale == 0.2
    chosen = preset("bench2-mirrored-noconfirms", scale)
    assert chosen.publishers * chosen.rate == 8_000
    # 4,000 held (the seed redo's cluster): 5,000 wanted, 2,000 a publisher: 3 publishers,
    # never a scale whose publishers round down to the capacity itself (0.12: 2, 4,000)
    scale = scale_past(full, 4_000)
    assert scale == 0.15
    chosen = preset("bench2-mirrored-noconfirms", scale)
    assert chosen.publishers == 3 and chosen.publishers * chosen.rate == 6_000
    for capacity in (1_000, 2_500, 3_999, 7_000, 12_345):
        chosen = preset("bench2-mirrored-noconfirms", scale_past(full, capacity))
        total = chosen.publishers * chosen.rate
        assert 1.25 * capacity <= total < 1.25 * capacity + chosen.rate, (capacity, total)
