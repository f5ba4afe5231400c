"""How long the report job takes for 1 and for 20 sessions of 10 minutes each.

    .venv/bin/python benchmarks/report_time.py [--master local[2]] [--sessions 1 20]
    .venv/bin/python benchmarks/report_time.py --checks

``--checks`` times instead how long ``flowdeck report`` takes to refuse a bad argument (an
unknown session id, an ``--out`` that cannot be created), next to ``flowdeck presets``: the
command line's own start-up, which every command pays. The arguments are checked before
Spark starts, so the two should be alike.

Sessions are synthetic, written in the session format with realistic sizes: 2 worker
processes, one row per worker per second in ``client``, four latency histograms per worker
per second with ~50–70 non-empty HDR buckets each (200 samples a second per histogram),
and a broker poll a second; a 3-phase in-flight sweep (200 s per phase). One session is
generated and the others are copies under new names and ids (the job's work does not
depend on the values). Each count is timed in a fresh SparkSession, so the time includes
Spark's start-up as an operator would see it, and then once more on the warm session. The
first count also starts the JVM; later counts reuse it (a new SparkSession, the JVM's
loaded classes and compiled code kept). Besides wall time it prints the Spark JVM's CPU
seconds (Linux), the figure least moved by other work on a shared machine, and the load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flowdeck.engine.recording.format import MANIFEST  # noqa: E402
from tests.spark_reports.synthetic import PhasePlan, write_session  # noqa: E402

PLANS = [
    PhasePlan(seconds=200, inflight=10),
    PhasePlan(seconds=200, inflight=50, publish_share=0.9),
    PhasePlan(seconds=200, inflight=250, consume_share=0.9, depth_growth=20, mem_alarm_polls=30),
]


def make_sessions(root: Path, count: int, template: Path) -> list[Path]:
    paths = []
    for index in range(count):
        path = root / f"bench-{index:02d}"
        shutil.copytree(template, path)
        manifest = json.loads((path / MANIFEST).read_text())
        manifest["name"] = f"bench-{index:02d}"
        manifest["session_id"] = f"20231114-bench-{index:02d}"
        (path / MANIFEST).write_text(json.dumps(manifest))
        paths.append(path)
    return paths


def sizes(path: Path) -> tuple[int, int]:
    import pyarrow.parquet as pq

    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in (path / "latency").glob("*.parquet"))
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return rows, size


def time_checks(runs: int = 5) -> None:
    """Median wall time of ``flowdeck`` commands in fresh processes, as a user runs them."""

    def wall(words: list[str], expect: int) -> float:
        times = []
        for _ in range(runs):
            began = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "flowdeck.cli", *words], cwd=ROOT, capture_output=True
            )
            times.append(time.monotonic() - began)
            assert done.returncode == expect, (words, done.returncode, done.stderr[-500:])
        return statistics.median(times)

    with tempfile.TemporaryDirectory(prefix="flowdeck-bench-") as scratch:
        root = Path(scratch)
        session = write_session(root / "sessions", "checked", PLANS[:1], workers=1,
                                exact_histograms=False).path  # fmt: skip
        a_file = root / "a-file"
        a_file.write_text("")
        cases = [
            ("flowdeck presets (the CLI's start-up)", ["presets"], 0),
            ("report: unknown session id",
             ["report", "no-such-id", "--sessions-dir", str(root / "sessions"),
              "--out", str(root / "out")], 2),
            ("report: --out under a file",
             ["report", str(session), "--out", str(a_file / "report")], 2),
        ]  # fmt: skip
        print(f"| command (median of {runs} runs) | wall s |")
        print("|---|---:|")
        for title, words, expect in cases:
            print(f"| {title} | {wall(words, expect):.2f} |", flush=True)


def jvm_cpu_seconds() -> float | None:
    """CPU seconds (user + system) the Spark JVM this process started has used, from
    ``/proc`` (Linux); None elsewhere. Less noisy than wall time on a shared machine."""
    import os

    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    try:
        stat = Path(f"/proc/{process.pid}/stat").read_text() if process else ""
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if len(fields) < 13:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    import os

    return f"{os.getloadavg()[0]:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 20])
    parser.add_argument(
        "--checks", action="store_true", help="time the refusal of bad arguments instead"
    )
    args = parser.parse_args()
    if args.checks:
        time_checks()
        return 0

    from pyspark.sql import SparkSession

    from flowdeck.spark_reports.build import build_report
    from flowdeck.spark_reports.job import spark_session

    with tempfile.TemporaryDirectory(prefix="flowdeck-bench-") as scratch:
        root = Path(scratch)
        began = time.monotonic()
        template = write_session(
            root / "template", "template", PLANS, workers=2, samples_per_second=200,
            exact_histograms=False,
        ).path  # fmt: skip
        latency_rows, size = sizes(template)
        print(f"generated a 600 s session in {time.monotonic() - began:.0f} s: "
              f"{latency_rows:,} latency bucket rows, {size / 2**20:.1f} MiB on disk")  # fmt: skip
        print(f"master {args.master}")
        print("| sessions | cold (new SparkSession + job) s | of which Spark start s | "
              "warm (job again) s | JVM CPU s cold / warm | load 1-min start → end "
              "| latency rows |")  # fmt: skip
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for count in args.sessions:
            paths = make_sessions(root / f"set-{count}", count, template)
            loaded = load()
            began = time.monotonic()
            spark = spark_session(args.master)
            started = time.monotonic() - began
            cpu_began = jvm_cpu_seconds() or 0.0
            report = build_report(spark, [str(p) for p in paths], root / f"out-{count}")
            cold = time.monotonic() - began
            cpu_cold = jvm_cpu_seconds()
            where = getattr(report, "stages", ())  # reports before issue 18 have none
            began = time.monotonic()
            build_report(spark, [str(p) for p in paths], root / f"out-{count}-again")
            warm = time.monotonic() - began
            cpu_warm = jvm_cpu_seconds()
            cpu = (
                "–"
                if cpu_cold is None or cpu_warm is None
                # the first count starts the JVM: its start-up counts as cold
                else f"{cpu_cold - (0.0 if count == args.sessions[0] else cpu_began):.1f} / "
                f"{cpu_warm - cpu_cold:.1f}"
            )
            spark.stop()
            SparkSession._instantiatedSession = None  # a truly fresh session next round
            print(f"| {count} | {cold:.1f} | {started:.1f} | {warm:.1f} | {cpu} | "
                  f"{loaded} → {load()} | {count * latency_rows:,} |", flush=True)  # fmt: skip
            if where:
                print("  cold job: " + ", ".join(f"{name} {s:.1f} s" for name, s in where))
    return 0


if __name__ == "__main__":
    sys.exit(main())
