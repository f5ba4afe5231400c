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

from flowdeck.figures.intervals import interval_maxima
from flowdeck.figures.stats import Row
from flowdeck.spark_reports import charts, compare
from flowdeck.spark_reports.figures import (
    SessionFigures,
    broker_table,
    build_figures,
    faults_table,
    hosts_table,
    latency_table,
    queue_table,
    sweep_settings,
    sweep_table,
    throughput_table,
)
from flowdeck.spark_reports.intervals import interval_table
from flowdeck.spark_reports.measure import Measurements, measure
from flowdeck.spark_reports.render import (
    Chart,
    Section,
    charts_markdown,
    render,
    session_intro,
)
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
    #: Every chart's PNG and SVG file beside report.html, in the report's order.
    charts: tuple[Path, ...]
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


#: A chart to draw: its title, its files' stem, the ``charts`` function's name and its
#: arguments.
ChartJob = tuple[str, str, str, tuple[Any, ...]]


def _draw(job: ChartJob) -> charts.Rendered | None:
    _, _, function, args = job
    figure = getattr(charts, function)(*args)
    return None if figure is None else charts.rendered(figure)


def draw_charts(jobs: Sequence[ChartJob]) -> list[Chart | None]:
    """Draw the charts (PNG and SVG bytes), in parallel when there are many, in the order
    of ``jobs``; None for a chart whose function draws nothing."""
    workers = min(os.cpu_count() or 1, len(jobs))
    if len(jobs) < PARALLEL_CHARTS_FROM or workers < 2:
        drawn = [_draw(job) for job in jobs]
    else:
        # spawn: a fresh interpreter per worker, not a fork of this one (which runs the
        # JVM gateway's threads).
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            drawn = list(pool.map(_draw, jobs))
    return [None if files is None else Chart(title, name, files.png, files.svg)
            for (title, name, _, _), files in zip(jobs, drawn, strict=True)]  # fmt: skip


def _comparison_charts(all_figures: Sequence[SessionFigures]) -> list[ChartJob]:
    """Per benchmark (runs putting the same load on the broker) and setting any of its
    runs sweeps: msg/s and p99 per step, one line per run, as the seeds draw them."""
    names = compare.chart_labels(all_figures)
    result: list[ChartJob] = []
    for group in compare.benchmarks(all_figures):
        if len(group) < 2:
            continue
        runs = [(names[i], all_figures[i]) for i in group]
        for setting in sweep_settings([f for _, f in runs]):
            if any(sw.setting == setting for _, f in runs for sw in f.sweeps):
                result.append(
                    (f"{setting} per run", f"comparison-{setting}", "comparison_chart",
                     (runs, setting))
                )  # fmt: skip
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
    queue_seconds = _group(measured.queue_second_latency)
    polls = _group(measured.broker_polls)
    maxima = interval_maxima(measured.interval_latency)
    # one y range for every run's timeline and broker chart: the runs read side by side
    keys = [f.session.key for f in all_figures]
    limits = charts.shared_limits(
        (f, seconds.get(k, []), second_latency.get(k, []), polls.get(k, []))
        for f, k in zip(all_figures, keys, strict=True)
    )
    # Tables first, every chart to draw listed; the charts are drawn together, then each
    # section takes its own.
    parts: list[tuple[str, str, list[Table], list[ChartJob]]] = []
    tables: list[Table] = []
    checked = compare.seed_table(all_figures)
    if len(all_figures) > 1:
        compared = [
            compare.runs_table(all_figures),
            compare.sessions_table(all_figures),
            compare.comparison_table(all_figures),
        ]
        if checked is not None:
            compared.insert(0, checked)
        parts.append(("Runs compared", "", compared, _comparison_charts(all_figures)))
        tables += compared
    elif checked is not None:
        parts.append(("The seed's conclusions", "", [checked], []))
        tables.append(checked)
    for figures in all_figures:
        key = figures.session.key
        session_tables = [
            throughput_table(figures),
            latency_table(figures),
            interval_table(figures, maxima),
        ]
        session_tables.append(broker_table(figures))
        per_host = hosts_table(figures)
        if per_host is not None:
            session_tables.append(per_host)
        per_queue = queue_table(figures)
        if per_queue is not None:
            session_tables.append(per_queue)
        session_tables += [sweep_table(figures, sweep) for sweep in figures.sweeps]
        session_tables.append(faults_table(figures))
        session_jobs: list[ChartJob] = [
            ("throughput and latency over time", f"{key}-timeline", "timeline_chart",
             (figures, seconds.get(key, []), second_latency.get(key, []), limits)),
            ("queue depth and memory", f"{key}-broker", "broker_chart",
             (figures, polls.get(key, []), limits)),
        ]  # fmt: skip
        if queue_seconds.get(key):
            session_jobs.append(
                ("e2e p99 per queue", f"{key}-queues", "queue_chart",
                 (figures, queue_seconds[key]))
            )  # fmt: skip
        session_jobs += [
            (f"{sweep.setting} sweep", f"{key}-sweep-{sweep.setting}", "sweep_chart",
             (figures, sweep))
            for sweep in figures.sweeps
        ]  # fmt: skip
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
    chart_files: list[Path] = []
    for section in sections:
        for chart in section.charts:
            png, svg = (out_dir / name for name in chart.files)
            png.write_bytes(chart.png)
            svg.write_bytes(chart.svg)
            chart_files += [png, svg]
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
        f"# {heading}\n\n{generated}\n\n"
        + "\n".join([*(t.to_markdown() for t in tables), charts_markdown(sections)]),
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
        charts=tuple(chart_files),
        seconds=time.monotonic() - began,
        skipped=tuple(skipped),
        stages=tuple(stages),
    )
