"""The job submitted to a real standalone Spark master and worker, not only local[*]."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import spark_cluster
from tests.spark_cluster import spark_home
from tests.spark_reports.synthetic import PhasePlan, write_session

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A Spark master and one 1-core worker on 127.0.0.1, stopped afterwards."""
    with spark_cluster.standalone_cluster(tmp_path) as cluster:
        yield cluster


def test_spark_submit_to_a_standalone_master(
    standalone_cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, env = standalone_cluster
    session = write_session(
        tmp_path / "sessions",
        "cluster-sweep",
        [PhasePlan(seconds=10, inflight=5), PhasePlan(seconds=10, inflight=50)],
        samples_per_second=10,
    )
    out = tmp_path / "report"
    result = subprocess.run(
        [str(spark_home() / "bin" / "spark-submit"), "--master", url,
         "--executor-memory", "512m", "--total-executor-cores", "1",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
         str(ROOT / "spark_reports" / "job.py"), str(session.path), "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert "report:" in result.stdout
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"master {url}" in page  # ran on the standalone master, not local
    rows = (out / "cluster-sweep-sweep-inflight.csv").read_text().splitlines()
    assert rows[0].startswith("In-flight limit,")
    assert [line.split(",")[0] for line in rows[1:]] == ["5", "50"]
