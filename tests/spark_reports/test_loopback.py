"""A local report run's Spark driver, and the tests' shared session made the same way,
listen on loopback only: nothing of a report is served to the network."""

from __future__ import annotations

import ipaddress

import psutil


def test_the_local_spark_driver_listens_on_loopback_only(spark) -> None:  # type: ignore[no-untyped-def]
    spark.range(10).count()  # the executor's block manager is up
    jvm = psutil.Process(spark.sparkContext._gateway.proc.pid)
    listening = [
        c.laddr for c in jvm.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
    ]
    assert listening, "the driver listens nowhere"
    outward = [
        a for a in listening if not ipaddress.ip_address(a.ip.removeprefix("::ffff:")).is_loopback
    ]
    assert not outward, f"the Spark driver listens beyond loopback: {outward}"
