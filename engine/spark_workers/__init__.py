"""Load workers on other hosts, placed by Spark and steered as one run.

:class:`SparkPlacement` is what ``flowdeck run --spark-master`` gives the controller: it
starts the run's workers as Spark tasks that connect back over TCP (``link`` on the
controller's side, ``task`` on the executors', ``wire`` between them). PySpark loads only
when a run is launched. docs/spark-workers.md describes the set-up.
"""

from flowdeck.engine.spark_workers.link import HostRow, RemoteWorker
from flowdeck.engine.spark_workers.placement import (
    SparkPlacement,
    parse_spark_master,
    task_slots,
    workers_for,
)

__all__ = [
    "HostRow",
    "RemoteWorker",
    "SparkPlacement",
    "parse_spark_master",
    "task_slots",
    "workers_for",
]
