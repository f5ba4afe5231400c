"""Two Spark workers as hosts of their own: a standalone cluster, a private broker, TLS.

The machine becomes three hosts (tests/spark_cluster.py ``separate_hosts``): this one,
holding the bridge's address, runs the Spark master, the private RabbitMQ node, and
``flowdeck run`` (the controller and its Spark driver), listening for its workers on the
bridge's address with a self-signed certificate; ``loadhost-a`` and ``loadhost-b`` are a
network namespace each, with an address of their own on the bridge and a host name of
their own, and run one Spark worker each, whose executor and task process (the load
worker) start there too. The run is the one test_spark_workers.py makes on ``local[2]``
(tests/spark_runs.py), plus: the per-host rows name the two hosts, each task process runs
on its own host, and no executor or task is left on either host after the run.

The shared broker's guest user may only connect from loopback, so the run uses a private
node (its own ports) that also listens on the bridge's address with guest allowed there.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import pytest

from flowdeck.collectors.local_broker import LocalBroker
from tests import spark_cluster
from tests.private_nodes import PrivateNodes
from tests.spark_cluster import Hosts
from tests.spark_runs import Worker, two_workers_one_lost

pytestmark = [
    pytest.mark.private_broker,
    pytest.mark.spark,
    pytest.mark.slow,
    # A Spark cluster of its own (no shared session): in a group of its own, so it runs
    # beside the Spark session's tests instead of adding its ~100 s to their process. It
    # passed at load 11-14 (105-159 s), so the company does not break it.
    pytest.mark.xdist_group("spark-hosts"),
]


class BridgedBroker(LocalBroker):
    """A private node that also listens on ``address`` (the bridge's), where the hosts
    reach it, with the guest user allowed from there (RabbitMQ allows it on loopback
    alone by default)."""

    def __init__(self, address: str) -> None:
        super().__init__(name="flowdeck-test")
        self.address = address

    @property
    def bridged_uri(self) -> str:
        return f"amqp://guest:guest@{self.address}:{self.amqp_port}/%2F"

    def _config_text(self) -> str:
        return super()._config_text() + (
            f"listeners.tcp.bridge = {self.address}:{self.amqp_port}\n"
            "loopback_users.guest = false\n"
        )


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    why_not = spark_cluster.can_make_hosts()
    if why_not:
        pytest.skip(f"Spark workers as hosts of their own: {why_not}")
    with spark_cluster.separate_hosts(2) as made:
        yield made


def on_hosts(hosts: Hosts) -> dict[str, list[str]]:
    """The command line of every process on each host, by host name."""
    found: dict[str, list[str]] = {host.name: [] for host in hosts.hosts}
    for host in hosts.hosts:
        for pid in host.pids():
            with suppress(OSError):  # gone meanwhile
                found[host.name].append(Path(f"/proc/{pid}/cmdline").read_text())
    return found


def spark_tasks(lines: list[str]) -> list[str]:
    """A host's processes other than its Spark worker: its executors, their PySpark
    daemons and task processes."""
    return [line for line in lines if "org.apache.spark.deploy.worker.Worker" not in line]


@pytest.mark.timeout(420)
def test_two_spark_hosts_steered_merged_and_one_lost(
    tmp_path: Path, hosts: Hosts, private_broker: PrivateNodes
) -> None:
    began = time.monotonic()
    broker = BridgedBroker(hosts.address)
    private_broker.started.append(broker)  # discarded below, or at the session's end
    # The link's certificate, self-signed, as docs/spark-workers.md makes it.
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
         "-subj", "/CN=flowdeck", "-keyout", "link.key", "-out", "link.pem"],
        cwd=tmp_path, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    where: dict[int, str] = {}  # worker: the host its task process runs on

    def find_tasks(hello: dict[int, Worker]) -> None:
        for worker, said in hello.items():
            where[worker] = next(h.name for h in hosts.hosts if said.pid in h.pids())

    try:
        with ThreadPoolExecutor(1) as pool:
            node = pool.submit(broker.start)  # the node and the cluster boot at once
            with spark_cluster.standalone_cluster(
                tmp_path / "spark", master_host=hosts.address, worker_hosts=hosts.hosts
            ) as (master, _env):
                cluster_ready = time.monotonic() - began
                node.result(timeout=180)
                ready = time.monotonic() - began
                run = two_workers_one_lost(
                    tmp_path,
                    "flowdeck-test-hosts",
                    placement=(
                        f"--spark-master={master}",
                        f"--spark-listen={hosts.address}:0",
                        f"--spark-cert-file={tmp_path / 'link.pem'}",
                        f"--spark-key-file={tmp_path / 'link.key'}",
                        f"--uri={broker.bridged_uri}",
                        f"--management-url={broker.management_url}",
                    ),
                    management_url=broker.management_url,
                    prometheus_url=broker.prometheus_url,
                    duration="20s",
                    on_hello=find_tasks,
                )
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and any(
                    map(spark_tasks, on_hosts(hosts).values())
                ):
                    time.sleep(0.5)
                left = {host: spark_tasks(lines) for host, lines in on_hosts(hosts).items()}
    finally:
        private_broker.discard(broker)

    print(
        f"\nSpark hosts: cluster up in {cluster_ready:.1f} s, node in "
        f"{broker.started_in or 0:.1f} s, both {ready:.1f} s; {run.summary()}\n"
        f"{run.host_rows()}"
    )
    # Each worker said hello from a host of its own, its task process ran there, and the
    # rows under the summary name both hosts.
    assert {w: said.host for w, said in run.hello.items()} == where, where
    assert sorted(where.values()) == ["loadhost-a", "loadhost-b"]
    assert re.search(r"per-host figures of 2 Spark worker\(s\) on 2 host\(s\)", run.output)
    assert left == {"loadhost-a": [], "loadhost-b": []}, "Spark left a task on a host"
