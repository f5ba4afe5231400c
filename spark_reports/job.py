"""The report job's entry point: ``flowdeck report`` and ``spark-submit spark_reports/job.py``.

    spark-submit --master spark://host:7077 spark_reports/job.py SESSION... --out DIR

Sessions are local directories or Hadoop URIs (``hdfs://``, ``s3a://``...); ``flowdeck
report`` also takes session ids. Local sessions and the output directory are checked before
Spark starts, so a bad argument fails at once (exit 2). The driver
needs flowdeck importable (installed, or this file's checkout on ``sys.path``); executors
need only PySpark, as the job runs no Python code on them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as a file by spark-submit: make the checkout importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_MASTER = "local[*]"
LOOPBACK = "127.0.0.1"
#: JVM options of a local run's driver (which is also its executor): the client compiler
#: only. A report is a short job in a fresh JVM; the optimising compiler's work on the
#: first queries costs more than its faster code earns back (measured with
#: ``benchmarks/report_time.py``: the JVM's CPU time for one session 29-33 s → 15-18 s,
#: for twenty 103 s → 83 s).
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sessions",
        nargs="+",
        metavar="SESSION",
        help="session directories or URIs (hdfs://, s3a://, file://...)",
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help="directory for report.html and the tables' .md and .csv",
    )
    parser.add_argument(
        "--master",
        default=None,
        help=f"Spark master URL (default {DEFAULT_MASTER}, or spark-submit's)",
    )
    parser.add_argument("--title", default="", help="the report's heading")
    parser.add_argument(
        "--max-p99-ms",
        type=float,
        default=None,
        help="acceptable e2e p99 in ms for the recommended sweep setting",
    )


def spark_session(master: str | None, app_name: str = "flowdeck report"):  # type: ignore[no-untyped-def]
    """A SparkSession; ``master`` None keeps what spark-submit set, else ``local[*]``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    submitted = "spark.master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "") or os.environ.get(
        "SPARK_ENV_LOADED"
    )
    if master is not None:
        builder = builder.master(master)
    elif not submitted:
        builder = builder.master(DEFAULT_MASTER)
    chosen = master or ("" if submitted else DEFAULT_MASTER)
    if chosen.startswith("local"):
        # Everything runs in this process: the driver listens on loopback only, not on
        # the machine's outward address (Spark's choice for a host name that resolves
        # to 127.0.0.1).
        # SPARK_LOCAL_IP reaches the JVM this process starts (its block manager, and the
        # warning Spark prints when it picks an address itself); the UI is off: a report
        # run has nobody watching it, and it would listen on every interface.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        # Python tasks run this interpreter (which has flowdeck), not whatever python3 is
        # first on PATH: a cockpit run that places its load workers on this process's
        # context later runs flowdeck in them.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (
            builder.config("spark.driver.host", LOOPBACK)
            .config("spark.driver.bindAddress", LOOPBACK)
            .config("spark.ui.enabled", "false")
        )
        if "spark.driver.extraJavaOptions" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
            # Reaches the JVM only when this call starts it (not an already running one).
            builder = builder.config("spark.driver.extraJavaOptions", LOCAL_JAVA_OPTIONS)
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # A report's data is small: Spark's 200 default partitions cost more than they give.
        partitions = max(2, 2 * spark.sparkContext.defaultParallelism)
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return spark


def progress(line: str) -> None:
    """One line per stage on stdout as it begins (``report [2/5] per-phase figures with
    Spark``), flushed at once: the cockpit shows the last one while the job runs."""
    print(f"report {line}", flush=True)


def run(args: argparse.Namespace) -> int:
    from flowdeck.spark_reports.inputs import InputError, check_inputs

    try:
        sessions, skipped = check_inputs(args.sessions, args.out)
    except InputError as exc:
        print(f"flowdeck report: {exc}", file=sys.stderr)
        return 2
    for line in skipped:
        print(f"flowdeck report: {line}", file=sys.stderr)

    from pyspark.sql import SparkSession

    from flowdeck.engine.recording.format import SessionFormatError
    from flowdeck.spark_reports.build import STAGES, build_report

    # Inside a process that already runs Spark (tests, notebooks), use its session and
    # leave it running.
    already_running = SparkSession.getActiveSession() is not None
    progress(f"[0/{STAGES}] starting Spark" + (f" at {args.master}" if args.master else ""))
    spark = spark_session(args.master)
    try:
        report = build_report(
            spark,
            sessions,
            args.out,
            title=args.title,
            max_p99_ms=args.max_p99_ms,
            progress=progress,
        )
    except SessionFormatError as exc:
        print(f"flowdeck report: {exc}", file=sys.stderr)
        return 2
    finally:
        if not already_running:
            spark.stop()
    for line in report.skipped:
        print(f"flowdeck report: {line}", file=sys.stderr)
    print(f"report: {report.html_path} ({len(report.tables)} tables, "
          f"{report.seconds:.1f} s)")  # fmt: skip
    for figures in report.figures:
        for sweep in figures.sweeps:
            print(f"{figures.session.title}: {sweep.recommendation.reasoning[-1]}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="spark_reports/job.py",
        description="flowdeck's report job: recorded sessions to HTML, Markdown and CSV.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
