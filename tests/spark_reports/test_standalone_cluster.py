"""The job submitted to a real standalone Spark master and worker, not only local[*]."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark_reports.synthetic import PhasePlan, write_session

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not in {log} after {seconds} s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A Spark master and one 1-core worker on 127.0.0.1, stopped afterwards."""
    home = spark_home()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with master_log.open("wb") as out:
            processes.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(free_port())],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        wait_for(master_log, "I have been elected leader", processes[0], 120)
        with worker_log.open("wb") as out:
            processes.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                 "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                 str(free_port()), "--work-dir", str(tmp_path / "work")],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        wait_for(worker_log, "Successfully registered with master", processes[1], 120)
        yield url, env
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


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
