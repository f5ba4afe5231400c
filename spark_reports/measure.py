"""The report's figures, computed by Spark SQL over the recorded tables of all sessions.

Everything here is DataFrame/SQL (no Python UDFs), so it runs on executors of any
cluster; only small results — one row per phase, per second or per broker poll — are
collected to the driver.

Rules (``docs/reports.md`` states them for readers of a report):

* A recorded row belongs to the phase in which its interval ended (``start < ts <= end``)
  and to the run second ``floor(ts - run start)``.
* Rates: per worker and second, messages / interval length (rows covering less than
  half a second, like the run's cut-short last interval, are left out); summed over
  workers per second; per phase the mean, population standard deviation and minimum over seconds.
* Target: per second the summed ``target_rate`` (none when a worker had 0: no rate limit,
  paused, or stopped); per phase the mean over its seconds not paused, when each of them
  has one.
* Gauges (pending confirms, unacked, blocked connections): per worker the last value of
  the second, summed over workers; per phase mean and max over seconds.
* Latency percentiles: the bucket rows of all workers and seconds of a phase summed per
  ``value_us``; the q-th percentile is the first value whose running count reaches
  ``max(1, int(q * total / 100 + 0.5))`` — exactly what an HDR histogram merged from them
  reports (``engine.latency.percentile_from_buckets``).
* Broker: only fresh polls (``stale_reason`` empty) of one source per session (the one
  with most polls). Queue depth is the ready count summed over the run's queues; its
  slope is the least-squares slope over the phase's polls. A poll's alarm state holds
  until the next poll; alarm seconds are those intervals' overlap with the phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from flowdeck.engine.recording.format import BROKER_DIR, CLIENT_DIR, LATENCY_DIR
from flowdeck.spark_reports.sessions import Session, read_table

PERCENTILES: tuple[int, ...] = (50, 75, 95, 99)
#: Client rows covering less than this many seconds are left out of rates and gauges.
MIN_INTERVAL_S = 0.5

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Measurements:
    """Collected results, plain dicts keyed by the column names documented above."""

    phase_client: list[Row]  # session, phase, seconds, rates (mean/sd/min), gauges, settings
    phase_latency: list[Row]  # session, phase, kind, basis, count, p50..p99, max (µs)
    session_latency: list[Row]  # session, kind, basis, count, p50..p99, max (µs)
    session_client: list[Row]  # session, seconds, whole-run rate means, totals
    phase_broker: list[Row]  # session, phase, depth start/end/slope, memory, alarm seconds
    seconds: list[Row]  # session, phase, sec, publish/confirm/consume rate, pending, ...
    second_latency: list[Row]  # session, sec, kind, basis, p50, p99 (µs)
    broker_polls: list[Row]  # session, sec (float), queue_ready, mem_used, alarms


def phases_frame(spark: SparkSession, sessions: Sequence[Session]) -> DataFrame:
    schema = T.StructType(
        [
            T.StructField("session", T.StringType(), False),
            T.StructField("phase", T.IntegerType(), False),
            T.StructField("start_us", T.LongType(), False),
            T.StructField("end_us", T.LongType(), False),
            T.StructField("run_start_us", T.LongType(), False),
            T.StructField("run_end_us", T.LongType(), True),
        ]
    )
    rows = [
        (s.key, p.index, p.start_us, p.end_us, s.start_us, s.phases[-1].finish_us)
        for s in sessions
        for p in s.phases
    ]
    return spark.createDataFrame(rows, schema)


def _in_phase(frame: DataFrame, phases: DataFrame) -> DataFrame:
    """Each row of ``frame`` (with ``session`` and ``t_us``) joined to its phase."""
    p = phases.alias("p")
    joined = frame.alias("r").join(
        F.broadcast(p),
        (F.col("r.session") == F.col("p.session"))
        & (F.col("r.t_us") > F.col("p.start_us"))
        & (F.col("r.t_us") <= F.col("p.end_us")),
    )
    return joined.select("r.*", "p.phase", "p.start_us", "p.end_us", "p.run_start_us")


def _second(column: str = "t_us") -> Column:
    return F.floor((F.col(column) - F.col("run_start_us")) / F.lit(1_000_000)).cast("long")


def client_seconds(client: DataFrame, phases: DataFrame) -> DataFrame:
    """One row per session, phase and run second, summed over workers."""
    # A partial interval (the run's last, cut short when publishing stops) would read as a
    # dip in rate that never happened: seconds are made of intervals of at least half one.
    whole_intervals = client.filter(F.col("interval_s") >= MIN_INTERVAL_S)
    rows = _in_phase(whole_intervals.withColumn("t_us", F.unix_micros("ts")), phases)
    rows = rows.withColumn("sec", _second())
    per_worker = rows.groupBy("session", "phase", "sec", "worker").agg(
        *[
            (F.sum(name) / F.sum("interval_s")).alias(f"{name}_rate")
            for name in ("published", "confirmed", "consumed", "nacked", "returned")
        ],
        *[
            F.max_by(name, "t_us").alias(name)
            for name in (
                "pending_confirms",
                "unacked",
                "blocked_connections",
                "target_rate",
                "inflight",
                "prefetch",
                "ack_every",
                "rate",
                "publishers",
                "consumers",
                "paused",
            )
        ],
    )
    return per_worker.groupBy("session", "phase", "sec").agg(
        F.sum("published_rate").alias("publish_rate"),
        F.sum("confirmed_rate").alias("confirm_rate"),
        F.sum("consumed_rate").alias("consume_rate"),
        F.sum("nacked_rate").alias("nack_rate"),
        F.sum("returned_rate").alias("return_rate"),
        F.sum("pending_confirms").alias("pending_confirms"),
        F.sum("unacked").alias("unacked"),
        F.sum("blocked_connections").alias("blocked_connections"),
        # a worker with target 0 has no rate limit: the second has no target then
        F.when(F.min("target_rate") > 0, F.sum("target_rate")).alias("target_rate"),
        F.max("inflight").alias("inflight"),
        F.max("prefetch").alias("prefetch"),
        F.max("ack_every").alias("ack_every"),
        F.max("rate").alias("rate"),
        F.sum("publishers").alias("publishers"),
        F.sum("consumers").alias("consumers"),
        F.max(F.col("paused").cast("int")).alias("paused"),
    )


def _phase_target() -> Column:
    """The phase's target: the mean target of its seconds not paused, when every one of them
    has a target (publishers were rate-limited throughout). Paused seconds have none (target
    0 while paused) and are left out of it; a second publishing without a target (no rate
    limit, or the run's drain in sessions without a drain event) leaves the phase without."""
    running = F.coalesce(F.col("paused"), F.lit(0)) == 0
    seconds_running = F.count(F.when(running, F.lit(1)))
    with_target = F.count(F.when(running, F.col("target_rate")))
    return F.when(
        (seconds_running > 0) & (with_target == seconds_running),
        F.avg(F.when(running, F.col("target_rate"))),
    )


def phase_client_stats(seconds: DataFrame) -> DataFrame:
    running = F.coalesce(F.col("paused"), F.lit(0)) == 0
    rates = [F.avg(F.when(running, F.col("publish_rate"))).alias("publish_rate_unpaused_mean")]
    for name in ("publish_rate", "confirm_rate", "consume_rate"):
        rates += [
            F.avg(name).alias(f"{name}_mean"),
            F.stddev_pop(name).alias(f"{name}_sd"),
            F.min(name).alias(f"{name}_min"),
        ]
    return seconds.groupBy("session", "phase").agg(
        F.count(F.lit(1)).alias("seconds"),
        *rates,
        F.avg("nack_rate").alias("nack_rate_mean"),
        F.avg("return_rate").alias("return_rate_mean"),
        _phase_target().alias("target_rate"),
        F.avg("pending_confirms").alias("pending_confirms_mean"),
        F.max("pending_confirms").alias("pending_confirms_max"),
        F.avg("unacked").alias("unacked_mean"),
        F.max("unacked").alias("unacked_max"),
        F.sum(F.when(F.col("blocked_connections") > 0, 1).otherwise(0)).alias("blocked_s"),
        F.sum(F.col("paused")).alias("paused_s"),
        *[
            F.mode(name).alias(name)
            for name in ("inflight", "prefetch", "ack_every", "rate", "publishers", "consumers")
        ],
    )


def session_client_stats(seconds: DataFrame) -> DataFrame:
    return seconds.groupBy("session").agg(
        F.countDistinct("sec").alias("seconds"),
        F.avg("publish_rate").alias("publish_rate_mean"),
        F.avg("confirm_rate").alias("confirm_rate_mean"),
        F.avg("consume_rate").alias("consume_rate_mean"),
        F.max("pending_confirms").alias("pending_confirms_max"),
        F.sum(F.when(F.col("blocked_connections") > 0, 1).otherwise(0)).alias("blocked_s"),
    )


def latency_percentiles(latency: DataFrame, keys: Sequence[str]) -> DataFrame:
    """p50/p75/p95/p99/max and count per ``keys`` × kind × basis, merged exactly from
    bucket rows (see the module docstring)."""
    group = [*keys, "kind", "basis"]
    buckets = (
        latency.groupBy(*group, "value_us").agg(F.sum("count").alias("n")).filter(F.col("n") > 0)
    )
    whole = Window.partitionBy(*group)
    upto = whole.orderBy("value_us").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    buckets = buckets.withColumn("running", F.sum("n").over(upto)).withColumn(
        "total", F.sum("n").over(whole)
    )

    def rank(q: int) -> Column:
        wanted = (F.lit(float(q)) * F.col("total").cast("double") / F.lit(100.0)) + F.lit(0.5)
        return F.greatest(F.lit(1).cast("long"), wanted.cast("long"))

    return buckets.groupBy(*group).agg(
        F.max("total").alias("count"),
        *[
            F.min(F.when(F.col("running") >= rank(q), F.col("value_us"))).alias(f"p{q}")
            for q in PERCENTILES
        ],
        F.max("value_us").alias("max"),
    )


def chosen_broker_polls(broker: DataFrame) -> DataFrame:
    """Fresh polls of each session's main source, with the next poll's time."""
    fresh = broker.filter(F.col("stale_reason") == "")
    per_source = fresh.groupBy("session", "source").agg(F.count(F.lit(1)).alias("polls"))
    best = per_source.groupBy("session").agg(
        F.max_by("source", F.struct("polls", "source")).alias("source")
    )
    polls = fresh.join(best, ["session", "source"]).withColumn("t_us", F.unix_micros("ts"))
    order = Window.partitionBy("session").orderBy("t_us")
    return polls.withColumn("next_us", F.lead("t_us").over(order))


def phase_broker_stats(polls: DataFrame, phases: DataFrame) -> DataFrame:
    rows = _in_phase(polls, phases).withColumn(
        "t_s", (F.col("t_us") - F.col("run_start_us")) / F.lit(1e6)
    )
    known_depth = F.when(F.col("queue_ready").isNotNull(), F.col("t_us"))
    point = rows.groupBy("session", "phase").agg(
        F.count(F.lit(1)).alias("polls"),
        F.min_by("queue_ready", known_depth).alias("depth_start"),
        F.max_by("queue_ready", known_depth).alias("depth_end"),
        F.max("queue_ready").alias("depth_max"),
        F.regr_slope(F.col("queue_ready").cast("double"), F.col("t_s")).alias("depth_slope"),
        F.max("mem_used").alias("mem_peak"),
        F.max("mem_limit").alias("mem_limit"),
        F.max("connections_blocked").alias("connections_blocked_max"),
    )
    # Alarm time: a poll's state holds from it to the next poll (or the run's end).
    p = phases.alias("p")
    b = polls.alias("b")
    until = F.coalesce(F.col("b.next_us"), F.col("p.run_end_us"), F.col("b.t_us"))
    overlap = b.join(
        F.broadcast(p),
        (F.col("b.session") == F.col("p.session"))
        & (F.col("b.t_us") < F.col("p.end_us"))
        & (until > F.col("p.start_us")),
    ).select(
        F.col("b.session").alias("session"),
        F.col("p.phase").alias("phase"),
        "b.mem_alarm",
        "b.disk_alarm",
        (
            (
                F.least(until, F.col("p.end_us"), F.coalesce(F.col("p.run_end_us"), until))
                - F.greatest(F.col("b.t_us"), F.col("p.start_us"))
            )
            / F.lit(1e6)
        ).alias("span_s"),
    )
    overlap = overlap.filter(F.col("span_s") > 0)  # polls after the run's end hold for 0 s
    alarms = overlap.groupBy("session", "phase").agg(
        F.sum(F.when(F.col("mem_alarm"), F.col("span_s")).otherwise(0.0)).alias("mem_alarm_s"),
        F.sum(F.when(F.col("disk_alarm"), F.col("span_s")).otherwise(0.0)).alias("disk_alarm_s"),
        F.sum(
            F.when(F.col("mem_alarm") | F.col("disk_alarm"), F.col("span_s")).otherwise(0.0)
        ).alias("alarm_s"),
    )
    return point.join(alarms, ["session", "phase"], "full_outer")


def _collect(frame: DataFrame) -> list[Row]:
    return [row.asDict(recursive=True) for row in frame.collect()]


def measure(spark: SparkSession, sessions: Sequence[Session]) -> Measurements:
    """Run every query of the report over the sessions and collect the small results."""
    phases = phases_frame(spark, sessions)
    client = read_table(spark, sessions, CLIENT_DIR)
    latency = read_table(spark, sessions, LATENCY_DIR)
    broker = read_table(spark, sessions, BROKER_DIR)

    seconds = client_seconds(client, phases).cache()
    # The bucket rows are the bulk of a session: read them once, summed over workers per
    # second and bucket, and derive every latency figure from that.
    lat = (
        _in_phase(latency.withColumn("t_us", F.unix_micros("ts")), phases)
        .withColumn("sec", _second())
        .groupBy("session", "phase", "sec", "kind", "basis", "value_us")
        .agg(F.sum("count").alias("count"))
        .cache()
    )
    polls = chosen_broker_polls(broker).cache()
    try:
        polls_for_charts = _in_phase(polls, phases).select(
            "session",
            ((F.col("t_us") - F.col("run_start_us")) / F.lit(1e6)).alias("sec"),
            "queue_ready",
            "queue_unacked",
            "mem_used",
            "mem_limit",
            "mem_alarm",
            "disk_alarm",
            "unconfirmed",
        )
        second_lat = latency_percentiles(lat, ["session", "sec"]).select(
            "session", "sec", "kind", "basis", "p50", "p99"
        )
        return Measurements(
            phase_client=_collect(phase_client_stats(seconds)),
            phase_latency=_collect(latency_percentiles(lat, ["session", "phase"])),
            session_latency=_collect(latency_percentiles(lat, ["session"])),
            session_client=_collect(session_client_stats(seconds)),
            phase_broker=_collect(phase_broker_stats(polls, phases)),
            seconds=_collect(seconds.orderBy("session", "sec", "phase")),
            second_latency=_collect(second_lat.orderBy("session", "sec")),
            broker_polls=_collect(polls_for_charts.orderBy("session", "sec")),
        )
    finally:
        seconds.unpersist()
        polls.unpersist()
        lat.unpersist()
