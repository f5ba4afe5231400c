"""The report job end to end: sessions in, ``report.html`` plus Markdown and CSV out."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from flowdeck.figures.stats import Row
from flowdeck.spark_reports import charts, compare
from flowdeck.spark_reports.figures import (
    SWEEP_SETTINGS,
    SessionFigures,
    broker_table,
    build_figures,
    faults_table,
    hosts_table,
    latency_table,
    sweep_table,
    throughput_table,
)
from flowdeck.spark_reports.measure import Measurements, measure
from flowdeck.spark_reports.render import Chart, Section, render, session_intro
from flowdeck.spark_reports.sessions import open_sessions
from flowdeck.spark_reports.tables import Table

#: From this many charts on they are drawn by a pool of processes, one per core: a chart
#: is ~0.3 s of matplotlib, and a process pool's start ~1 s.
PARALLEL_CHARTS_FROM = 6

#: The stages ``build_report``'s ``progress`` hears of (Spark's start, before it, is the
#: caller's: the job says it as stage 0).
STAGES = 5


@dataclass(frozen=True, slots=True)
class Report:
    """What the job wrote, and the figures behind it (for callers and tests)."""

    out_dir: Path
    html_path: Path
    tables: tuple[Table, ...]
    figures: tuple[SessionFigures, ...]
    seconds: float
    #: One line per session or part file left out because it does not read.
    skipped: tuple[str, ...] = ()
    #: Seconds each stage took (reading sessions, Spark's reduction, figures, charts,
    #: writing), for the benchmark and anyone asking where the time goes.
    stages: tuple[tuple[str, float], ...] = ()


def _group(rows: Sequence[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        grouped[row["session"]].append(row)
    return grouped


#: A chart to draw: its title, the ``charts`` function's name and its arguments.
ChartJob = tuple[str, str, tuple[Any, ...]]


def _draw(job: ChartJob) -> bytes | None:
    _, function, args = job
    drawn: bytes | None = getattr(charts, function)(*args)
    return drawn


def draw_charts(jobs: Sequence[ChartJob]) -> list[Chart | None]:
    """Draw the charts (PNG bytes), in parallel when there are many, in the order of
    ``jobs``; None for a chart whose function draws nothing."""
    workers = min(os.cpu_count() or 1, len(jobs))
    if len(jobs) < PARALLEL_CHARTS_FROM or workers < 2:
        drawn = [_draw(job) for job in jobs]
    else:
        # spawn: a fresh interpreter per worker, not a fork of this one (which runs the
        # JVM gateway's threads).
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            drawn = list(pool.map(_draw, jobs))
    return [None if png is None else Chart(title, png)
            for (title, _, _), png in zip(jobs, drawn, strict=True)]  # fmt: skip


def _comparison_charts(all_figures: Sequence[SessionFigures]) -> list[ChartJob]:
    """Per benchmark (runs putting the same load on the broker) and setting any of its
    runs sweeps: msg/s and p99 per step, one line per run, as the seeds draw them."""
    names = compare.run_names(all_figures)
    result: list[ChartJob] = []
    for group in compare.benchmarks(all_figures):
        if len(group) < 2:
            continue
        runs = [(names[i], all_figures[i]) for i in group]
        for setting in SWEEP_SETTINGS:
            if any(sw.setting == setting for _, f in runs for sw in f.sweeps):
                result.append((f"{setting} per run", "comparison_chart", (runs, setting)))
    return result


def build_report(
    spark: SparkSession,
    sessions: Sequence[str],
    out_dir: Path,
    *,
    title: str = "",
    max_p99_ms: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Read the sessions, compute every figure with Spark and write the report.

    ``progress`` hears one line as each stage begins (what a front-end shows while the job
    runs); it changes nothing of the report."""
    began = time.monotonic()
    stages: list[tuple[str, float]] = []
    clock = [began]

    def stage(name: str) -> None:
        now = time.monotonic()
        stages.append((name, now - clock[0]))
        clock[0] = now

    def starting(number: int, what: str) -> None:
        if progress is not None:
            progress(f"[{number}/{STAGES}] {what}")

    starting(1, f"reading {len(sessions)} session(s)")
    opened, skipped = open_sessions(spark, sessions)
    stage("open sessions")
    starting(2, "per-phase figures with Spark")
    measured: Measurements = measure(spark, opened, max_p99_ms)
    stage("Spark")
    starting(3, "verdicts and sweeps")
    all_figures = build_figures(opened, measured)
    stage("figures")
    starting(4, "tables and charts")

    seconds = _group(measured.seconds)
    second_latency = _group(measured.second_latency)
    polls = _group(measured.broker_polls)
    # Tables first, every chart to draw listed; the charts are drawn together, then each
    # section takes its own.
    parts: list[tuple[str, str, list[Table], list[ChartJob]]] = []
    tables: list[Table] = []
    if len(all_figures) > 1:
        compared = [compare.sessions_table(all_figures), compare.comparison_table(all_figures)]
        parts.append(("Runs compared", "", compared, _comparison_charts(all_figures)))
        tables += compared
    for figures in all_figures:
        key = figures.session.key
        session_tables = [throughput_table(figures), latency_table(figures)]
        session_tables.append(broker_table(figures))
        per_host = hosts_table(figures)
        if per_host is not None:
            session_tables.append(per_host)
        session_tables += [sweep_table(figures, sweep) for sweep in figures.sweeps]
        session_tables.append(faults_table(figures))
        session_jobs: list[ChartJob] = [
            ("throughput and latency over time", "timeline_chart",
             (figures, seconds.get(key, []), second_latency.get(key, []))),
        ]  # fmt: skip
        session_jobs.append(
            ("queue depth and memory", "broker_chart", (figures, polls.get(key, [])))
        )
        session_jobs += [
            (f"{sweep.setting} sweep", "sweep_chart", (figures, sweep)) for sweep in figures.sweeps
        ]
        parts.append(
            (f"Session {figures.session.title}", session_intro(figures), session_tables,
             session_jobs)
        )  # fmt: skip
        tables += session_tables
    drawn = iter(draw_charts([job for *_, jobs in parts for job in jobs]))
    sections = []
    for heading, intro, part_tables, jobs in parts:
        mine = [chart for _ in jobs if (chart := next(drawn)) is not None]
        sections.append(Section(heading, intro, tuple(mine), tuple(part_tables)))

    stage("tables and charts")
    starting(5, f"writing {len(tables)} tables and report.html to {out_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    for table in tables:
        (out_dir / f"{table.name}.csv").write_text(table.to_csv(), encoding="utf-8")
        (out_dir / f"{table.name}.md").write_text(table.to_markdown(), encoding="utf-8")
    heading = title or (
        f"flowdeck report: {all_figures[0].session.title}"
        if len(all_figures) == 1
        else f"flowdeck report: {len(all_figures)} sessions"
    )
    generated = (
        f"generated {datetime.now(tz=UTC):%Y-%m-%d %H:%M UTC} by flowdeck's Spark job "
        f"(master {spark.sparkContext.master}) from "
        + ", ".join(f.session.uri for f in all_figures)
    )
    (out_dir / "report.md").write_text(
        f"# {heading}\n\n{generated}\n\n" + "\n".join(t.to_markdown() for t in tables),
        encoding="utf-8",
    )
    html_path = out_dir / "report.html"
    html_path.write_text(render(heading, sections, generated), encoding="utf-8")
    stage("write")
    return Report(
        out_dir=out_dir,
        html_path=html_path,
        tables=tuple(tables),
        figures=tuple(all_figures),
        seconds=time.monotonic() - began,
        skipped=tuple(skipped),
        stages=tuple(stages),
    )
