"""pyarrow (the reader) and PySpark read the same recorded session to the same numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_recording_roundtrip import record_synthetic_run
from test_recording_versions import OLD_SESSION

from flowdeck.engine.latency import LATENCY_KEYS
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import COUNTER_COLUMNS, Session, open_session

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: The percentile query of docs/session-format.md, for one (kind, basis) and percentile.
PERCENTILE_SQL = """
WITH b AS (SELECT value_us, SUM(count) AS n FROM latency
           WHERE kind = '{kind}' AND basis = '{basis}' GROUP BY value_us),
     r AS (SELECT value_us, SUM(n) OVER (ORDER BY value_us) AS running,
                  SUM(n) OVER () AS total FROM b)
SELECT MIN(value_us) AS value_us FROM r
WHERE running >= GREATEST(1, FLOOR({q} * total + 0.5))
"""


def spark_figures(spark: Any, session_dir: Path) -> dict[str, Any]:
    client = spark.read.parquet(str(session_dir / fmt.CLIENT_DIR))
    # A count an older format did not record (1.8's rejected, ...) reads as 0, as the
    # reader's totals have it.
    written = [name for name in COUNTER_COLUMNS if name in client.columns]
    totals = {
        **dict.fromkeys(COUNTER_COLUMNS, 0),
        **client.selectExpr(*(f"SUM({name}) AS {name}" for name in written)).first().asDict(),
    }
    per_second = [
        (row["second"], row["published"])
        for row in client.selectExpr("CAST(FLOOR(elapsed_s) AS BIGINT) AS second", "published")
        .groupBy("second")
        .sum("published")
        .withColumnRenamed("sum(published)", "published")
        .orderBy("second")
        .collect()
    ]
    spark.read.parquet(str(session_dir / fmt.LATENCY_DIR)).createOrReplaceTempView("latency")
    percentiles = {}
    for kind, basis in LATENCY_KEYS:
        for q in (0.5, 0.95, 0.99, 1.0):
            sql = PERCENTILE_SQL.format(kind=kind.value, basis=basis.value, q=q)
            percentiles[(kind.value, basis.value, q)] = spark.sql(sql).first()["value_us"]
    return {
        "totals": totals,
        "per_second": per_second,
        "percentiles": percentiles,
    }


def pyarrow_figures(session: Session) -> dict[str, Any]:
    totals = session.totals()
    series = session.client_per_second()
    percentiles = {}
    for kind, basis in LATENCY_KEYS:
        p = session.latency_percentiles(kind, basis)
        for q, value in (
            (0.5, None if p is None else p.p50),
            (0.95, None if p is None else p.p95),
            (0.99, None if p is None else p.p99),
            (1.0, None if p is None else p.max),
        ):
            percentiles[(kind.value, basis.value, q)] = (
                None if value is None else round(value * 1000)
            )
    return {
        "totals": {name: getattr(totals, name) for name in COUNTER_COLUMNS},
        "per_second": list(
            zip(
                series.column("second").to_pylist(),
                series.column("published").to_pylist(),
                strict=True,
            )
        ),
        "percentiles": percentiles,
    }


def test_spark_and_pyarrow_agree_on_a_recorded_session(spark: Any, tmp_path: Path) -> None:
    recorder, _, _ = record_synthetic_run(tmp_path)
    session = open_session(recorder.session_dir)
    by_spark = spark_figures(spark, recorder.session_dir)
    by_pyarrow = pyarrow_figures(session)
    assert by_spark == by_pyarrow
    assert by_spark["totals"]["published"] > 0
    assert all(value is not None for value in by_spark["percentiles"].values())

    broker = spark.read.parquet(str(recorder.session_dir / fmt.BROKER_DIR))
    row = broker.selectExpr("COUNT(*) AS n", "SUM(mem_used) AS mem", "MAX(age_s) AS age").first()
    table = session.table(fmt.BROKER_DIR)
    assert (row["n"], row["mem"], row["age"]) == (
        table.num_rows,
        sum(table.column("mem_used").to_pylist()),
        max(table.column("age_s").to_pylist()),
    )


def test_spark_reads_the_format_1_0_session_like_the_reader(spark: Any) -> None:
    by_spark = spark_figures(spark, OLD_SESSION)
    by_pyarrow = pyarrow_figures(open_session(OLD_SESSION))
    assert by_spark["totals"] == by_pyarrow["totals"]
    assert by_spark["per_second"] == by_pyarrow["per_second"]
    key = ("e2e", "actual", 0.99)
    assert by_spark["percentiles"][key] == by_pyarrow["percentiles"][key] == 8191
