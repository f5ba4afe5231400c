"""The report's Spark work: every recorded row of all sessions read and reduced.

Spark reads the recorded tables and reduces them, in DataFrame/SQL only (no Python UDFs,
so it runs on the executors of any cluster), to small frames that reach the driver through
Arrow: a row per session and second (client figures summed over workers), a row per fresh
broker poll, a row per phase and latency bucket (counts summed over workers and seconds),
and a row per second with the chart's e2e percentiles p50 to p99.9 (from each second's
histogram in one pass). The per-phase statistics over those rows are ``figures.stats``'s.

Rules (``docs/reports.md`` states them for readers of a report):

* A worker's row (client and latency alike) belongs to the run second in which the middle
  of its one-second interval lies, ``floor(ts - 0.5 s - run start)``; every worker-second
  belongs to the phase in force at the middle of its second. So one second is never split
  between two phases, whatever the offsets of the workers' snapshots or of the change.
* Rates (msg/s): per phase and for the whole run, messages over the clients' active time,
  the run summary's basis (``figures.active``). Per second: per worker, messages /
  interval length (rows covering less than half a second, like the run's cut-short last
  interval, are left out), summed over workers; per phase their population standard
  deviation and minimum, how steady the phase ran.
* Client counts and settings (publishers, consumers, in-flight limit...): each worker records
  the run's whole figure, so a second has the largest over its workers, not their sum.
* Paused: a worker-second is paused when publishing was paused at either end of its
  interval (at its end, or at the end of the worker's previous one), so the second that
  holds a pause or a resume counts as paused.
* Target: per second the summed ``target_rate`` (none when a worker had 0: no rate limit,
  paused, or stopped); per phase the mean over its seconds not paused, when each of them
  has one.
* Gauges (pending confirms, unacked, blocked connections): per worker the last value of
  the second, summed over workers; per phase mean and max over seconds.
* Latency percentiles: the bucket rows of all workers and seconds of a phase summed per
  ``value_us``; the q-th percentile is the first value whose running count reaches
  ``max(1, int(q * total / 100 + 0.5))`` — exactly what an HDR histogram merged from them
  reports (``figures.latency``).
* Per queue (format 1.7 on): each queue's end-to-end bucket rows (from the actual send)
  summed over its workers per phase and per second, by the same rule.
* Latency intervals (the run's ``interval``, PerfTest's ``--interval``): each phase cut
  into intervals of that many seconds from its first second; an interval's p75, p95 and
  p99 from its bucket rows summed, by the rule above. The most per phase is
  ``intervals.interval_maxima``'s.
* Broker: only fresh polls (``stale_reason`` empty) of one source per session (the one
  with most polls); a poll belongs to the phase in force when it was taken. Queue depth is
  the ready count summed over the run's queues; its slope is the least-squares slope over
  the phase's polls. A poll's alarm state holds until the next poll; alarm seconds are
  those intervals' overlap with the phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from flowdeck.engine.recording.format import (
    BROKER_DIR,
    BROKER_SCHEMA,
    CLIENT_DIR,
    LATENCY_DIR,
    QUEUE_LATENCY_DIR,
)
from flowdeck.figures import RunFigures, RunInputs, run_figures
from flowdeck.figures.active import ActiveSpans
from flowdeck.figures.intervals import INTERVAL_PERCENTILES
from flowdeck.figures.phases import HALF_SECOND_US
from flowdeck.figures.run import active_spans as run_active_spans
from flowdeck.figures.stats import Row
from flowdeck.spark_reports import hosts
from flowdeck.spark_reports.sessions import Session, read_table, small_table


@dataclass(frozen=True, slots=True)
class Measurements:
    """Collected results: each session's figures (``figures.run``, from the rows and
    buckets Spark reduced), and the rows the charts draw, plain dicts keyed by the column
    names documented above."""

    runs: dict[str, RunFigures]  # by session key
    seconds: list[Row]  # session, phase, sec, publish/confirm/consume rate, pending, ...
    second_latency: list[Row]  # session, sec, kind, basis, p50, p75, p95, p99, p999 (µs)
    broker_polls: list[Row]  # session, sec (float), queue_ready, mem_used, alarms
    #: Runs whose workers ran on Spark hosts only: session, host, workers, lost, counts,
    #: rates and e2e p50/p99 (``spark_reports.hosts``).
    host_client: list[Row] = field(default_factory=list)
    #: Per session, phase, interval, kind and basis of the chart's latency kind: the
    #: interval's seconds with latencies and its p75, p95, p99 (µs) (``intervals``).
    interval_latency: list[Row] = field(default_factory=list)
    #: Per session, second and queue: the e2e p50, p95, p99 (µs) of the queues a chart
    #: draws (sessions of format 1.7 on: the seed's per-queue lines).
    queue_second_latency: list[Row] = field(default_factory=list)


#: The per-second latencies the timeline chart draws (:data:`SECOND_PERCENTILES` of these).
CHART_LATENCY_KIND = "e2e"
#: The client columns the figures read, before the session's own settings (its manifest's).
CLIENT_COLUMNS = (
    "worker", "interval_s", "published", "confirmed", "consumed", "nacked", "returned",
    "pending_confirms", "unacked", "blocked_connections", "target_rate", "paused",
)  # fmt: skip
#: Every recorded broker column: the figures read the polls as the session reader gives
#: them (credit flow, the run's own channel counts and the pipeline included), so the report
#: judges a phase as the run and the replay did. A session from before a column holds None.
BROKER_COLUMNS = tuple(name for name in BROKER_SCHEMA.names if name != "ts")


def phase_at(session: Session, t_us: Column) -> Column:
    """The index of the session's phase in force at ``t_us``: phases are ``[start, end)``,
    the first open to the past and the last to the future. A SQL expression on the
    session's own bounds, so rows find their phase without a join."""
    expression: Column = F.lit(session.phases[-1].index)
    for phase in reversed(session.phases[:-1]):
        expression = F.when(t_us < F.lit(phase.end_us), phase.index).otherwise(expression)
    return expression.cast("int")


def with_second_and_phase(session: Session, frame: DataFrame) -> DataFrame:
    """A worker's rows (``ts``) of ``session`` with their run ``sec`` (the one holding the
    middle of the row's interval) and the ``phase`` in force at the middle of that second.
    The run start and phase bounds are the session's constants: each session's rows get
    them before the sessions are put together."""
    start = F.lit(session.start_us)
    t_us = F.unix_micros("ts")
    sec = F.floor((t_us - start - F.lit(HALF_SECOND_US)) / F.lit(1_000_000)).cast("long")
    rows = frame.withColumn("sec", sec)
    middle = start + F.col("sec") * F.lit(1_000_000) + F.lit(HALF_SECOND_US)
    return rows.withColumn("phase", phase_at(session, middle))


#: The percentiles the timeline draws each second, as (column, percentile): the seed's
#: latency lines (PerfTest's p50, p75, p95, p99 and p99.9).
SECOND_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0), ("p75", 75.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9),
)  # fmt: skip
#: Each queue's e2e percentiles each second (the seed's per-queue lines).
QUEUE_SECOND_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0), ("p95", 95.0), ("p99", 99.0),
)  # fmt: skip


def bucket_percentiles(
    rows: DataFrame,
    keys: Sequence[str],
    percentiles: Sequence[tuple[str, float]],
    carry: Sequence[Column] = (),
) -> DataFrame:
    """The ``percentiles`` (one column each, µs) per group of ``keys``, from the group's
    bucket rows in one aggregation: the buckets of all workers gathered in value order (a
    value repeated across workers sits together), then one pass keeps the running count and
    takes the first value reaching each rank — ``max(1, int(q × total / 100 + 0.5))``, an
    HDR histogram's own rule — with no window and no sort of the whole table. ``carry``:
    more aggregates of the group to keep beside them."""
    grouped = rows.groupBy(*keys).agg(
        F.sort_array(F.collect_list(F.struct("value_us", "count"))).alias("buckets"),
        F.sum("count").alias("total"),
        *carry,
    )

    def rank(q: float) -> Column:
        wanted = F.lit(q) * F.col("total").cast("double") / F.lit(100.0) + F.lit(0.5)
        return F.greatest(F.lit(1).cast("long"), wanted.cast("long"))

    empty = F.struct(
        F.lit(0).cast("long").alias("running"),
        *(F.lit(None).cast("long").alias(name) for name, _ in percentiles),
    )

    def step(acc: Column, bucket: Column) -> Column:
        running = acc["running"] + bucket["count"]
        return F.struct(
            running.alias("running"),
            *(
                F.coalesce(acc[name], F.when(running >= rank(q), bucket["value_us"])).alias(name)
                for name, q in percentiles
            ),
        )

    kept = [name for name in grouped.columns if name not in ("buckets", "total")]
    found = grouped.filter(F.col("total") > 0).select(
        *kept, F.aggregate("buckets", empty, step).alias("found")
    )
    return found.select(*kept, *(f"found.{name}" for name, _ in percentiles))


def second_percentiles(rows: DataFrame) -> DataFrame:
    """:data:`SECOND_PERCENTILES` per session, second, kind and basis."""
    return bucket_percentiles(rows, ("session", "sec", "kind", "basis"), SECOND_PERCENTILES)


def interval_of(session: Session) -> int:
    """The session's latency interval in seconds: its spec's ``interval`` (PerfTest's
    ``--interval``), 1 for a session recorded before runs had one."""
    value = session.manifest.spec.get("interval")
    return int(value) if isinstance(value, int | float) and value >= 1 else 1


def with_interval(session: Session, frame: DataFrame) -> DataFrame:
    """:func:`with_second_and_phase`, and the ``interval`` of the phase each row's second
    falls in (intervals of :func:`interval_of` seconds from the phase's first second) with
    that length as ``interval_s``: the keys of the interval percentiles."""
    rows = with_second_and_phase(session, frame)
    length = interval_of(session)
    first: Column = F.lit(0)
    for phase in session.phases:
        # the first second whose middle is in the phase
        begin = -(-(phase.begin_us - session.start_us - HALF_SECOND_US) // 1_000_000)
        first = F.when(F.col("phase") == phase.index, max(0, begin)).otherwise(first)
    offset = F.greatest(F.col("sec") - first, F.lit(0))
    return rows.withColumn("interval", F.floor(offset / F.lit(length)).cast("long")).withColumn(
        "interval_s", F.lit(length)
    )


def interval_percentiles(rows: DataFrame) -> DataFrame:
    """The :data:`intervals.INTERVAL_PERCENTILES` of each phase's intervals (rows of
    :func:`with_interval`), with the count of seconds each interval had latencies in."""
    return bucket_percentiles(
        rows,
        ("session", "phase", "interval", "interval_s", "kind", "basis"),
        INTERVAL_PERCENTILES,
        carry=(F.countDistinct("sec").alias("seconds"),),
    )


def _collect(frame: DataFrame) -> list[Row]:
    """A small frame's rows through Arrow (one columnar transfer, not a Row per object)."""
    rows: list[Row] = frame.toArrow().to_pylist()
    return rows


def _t_us(table: pa.Table) -> list[int]:
    """The ``ts`` column as integer microseconds since the epoch."""
    values: list[int] = table.column("ts").cast(pa.int64()).to_pylist()
    return values


def _small_rows(
    spark: SparkSession, session: Session, table: str, columns: Sequence[str]
) -> list[Row]:
    data = small_table(spark, session, table)
    present = [name for name in columns if name in data.column_names]
    rows: list[Row] = data.select(present).to_pylist()
    absent = dict.fromkeys(name for name in columns if name not in present)
    for row, t_us in zip(rows, _t_us(data), strict=True):
        row.update(absent)
        row["t_us"] = t_us
        row["session"] = session.key
    return rows


def active_spans(session: Session) -> ActiveSpans:
    """When the session's clients were active (``figures.run.active_spans``)."""
    return run_active_spans(session.phases, session.start_us, session.manifest.summary)


def measure(
    spark: SparkSession, sessions: Sequence[Session], max_p99_ms: float | None = None
) -> Measurements:
    """Reduce the sessions: the latency buckets with Spark (two jobs: summed per phase and
    value, and each second's chart percentiles), the small tables (a row per worker-second
    or poll) on the driver; then every figure by ``figures.run``, the one computation."""
    clients: dict[str, list[Row]] = {}
    polls: dict[str, list[Row]] = {}
    for session in sessions:
        settings = [setting.name for setting in session.manifest.settings]
        clients[session.key] = _small_rows(spark, session, CLIENT_DIR, (*CLIENT_COLUMNS, *settings))
        polls[session.key] = _small_rows(spark, session, BROKER_DIR, BROKER_COLUMNS)
    # The bucket rows are the bulk of a session: Spark sums them per phase and bucket (a
    # few hundred rows per phase), and takes each second's chart percentiles in one pass.
    located = read_table(spark, sessions, LATENCY_DIR, with_interval)
    buckets = _collect(
        located.groupBy("session", "phase", "kind", "basis", "value_us").agg(
            F.sum("count").alias("count")
        )
    )
    latency: dict[str, dict[tuple[int, str, str], dict[int, int]]] = {}
    for row in buckets:
        per_phase = latency.setdefault(row["session"], {})
        counts = per_phase.setdefault((row["phase"], row["kind"], row["basis"]), {})
        counts[row["value_us"]] = counts.get(row["value_us"], 0) + row["count"]
    queued = read_table(spark, sessions, QUEUE_LATENCY_DIR, with_second_and_phase)
    queue_latency: dict[str, dict[tuple[int, str], dict[int, int]]] = {}
    for row in _collect(
        queued.groupBy("session", "phase", "queue", "value_us").agg(F.sum("count").alias("count"))
    ):
        per_queue = queue_latency.setdefault(row["session"], {})
        per_queue.setdefault((row["phase"], row["queue"]), {})[row["value_us"]] = row["count"]
    queue_second_latency = _collect(
        bucket_percentiles(queued, ("session", "sec", "queue"), QUEUE_SECOND_PERCENTILES)
    )
    queue_second_latency.sort(key=lambda r: (r["session"], r["queue"], r["sec"]))
    charted = located.filter(F.col("kind") == CHART_LATENCY_KIND)
    second_latency = _collect(second_percentiles(charted))
    second_latency.sort(key=lambda r: (r["session"], r["sec"]))
    interval_latency = _collect(interval_percentiles(charted))
    host_client = _host_figures(located, sessions, clients)
    runs: dict[str, RunFigures] = {}
    for session in sessions:
        runs[session.key] = run_figures(
            RunInputs(
                key=session.key,
                start_us=session.start_us,
                phases=tuple(session.phases),
                client_rows=clients[session.key],
                polls=polls[session.key],
                latency=latency.get(session.key, {}),
                summary=session.manifest.summary,
                settings=[setting.name for setting in session.manifest.settings],
                sweep_settings=[s.name for s in session.manifest.settings if s.sweep],
                queue_latency=queue_latency.get(session.key, {}),
                stream=session.manifest.spec.get("queue_type") == "stream",
            ),
            max_p99_ms,
        )
    polled = ("queue_ready", "queue_unacked", "mem_used", "mem_limit", "mem_alarm",
              "disk_alarm", "unconfirmed")  # fmt: skip
    broker_polls = [
        {"session": key, "sec": (row["t_us"] - run.start_us) / 1e6,
         **{k: row.get(k) for k in polled}}
        for key, run in sorted(runs.items())
        for row in run.polls
    ]  # fmt: skip
    return Measurements(
        runs=runs,
        seconds=[row for run in runs.values() for row in run.seconds],
        second_latency=second_latency,
        broker_polls=broker_polls,
        host_client=host_client,
        interval_latency=interval_latency,
        queue_second_latency=queue_second_latency,
    )


def _host_figures(
    located: DataFrame, sessions: Sequence[Session], clients: dict[str, list[Row]]
) -> list[Row]:
    """Per host figures of the sessions whose workers ran on Spark hosts; their e2e
    buckets summed per worker by Spark (one more job, only when such a session is there)."""
    placed = {s.key: hosts.placements(s.events) for s in sessions}
    placed = {key: where for key, where in placed.items() if where}
    if not placed:
        return []
    kind, basis = hosts.HOST_LATENCY
    buckets = _collect(
        located.filter(
            (F.col("kind") == kind)
            & (F.col("basis") == basis)
            & F.col("session").isin(list(placed))
        )
        .groupBy("session", "worker", "value_us")
        .agg(F.sum("count").alias("count"))
    )
    result = []
    for session in sessions:
        if session.key not in placed:
            continue
        mine = [row for row in buckets if row["session"] == session.key]
        for row in hosts.host_figures(
            clients[session.key],
            mine,
            placed[session.key],
            session.start_us,
            session.phases,
            active_spans(session),
        ):
            result.append({"session": session.key, **row})
    return result
