"""A Spark standalone master and workers on 127.0.0.1, from the pyspark package.

Shared by the report job's cluster test and the Spark workers benchmark: the same master
and workers an operator starts with ``spark-class``, bound to loopback, logging into a
directory of their own, stopped (terminated, then killed) when the block ends.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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


@contextmanager
def standalone_cluster(
    where: Path, workers: int = 1, cores: int = 1, memory: str = "1g"
) -> Iterator[tuple[str, dict[str, str]]]:
    """A master and ``workers`` workers of ``cores`` cores each; the master URL and the
    environment that reaches it (SPARK_HOME, loopback, this interpreter for PySpark)."""
    home = spark_home()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(where / "logs"),
        "SPARK_WORKER_DIR": str(where / "work"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    master_log = where / "master.log"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with master_log.open("wb") as out:
            processes.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(free_port())],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        wait_for(master_log, "I have been elected leader", processes[0], 120)
        for index in range(workers):
            worker_log = where / f"worker-{index}.log"
            with worker_log.open("wb") as out:
                processes.append(subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                     "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port",
                     str(free_port()), "--work-dir", str(where / "work" / str(index))],
                    env=env, stdout=out, stderr=subprocess.STDOUT,
                ))  # fmt: skip
        for index in range(workers):
            log = where / f"worker-{index}.log"
            wait_for(log, "Successfully registered with master", processes[index + 1], 120)
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
