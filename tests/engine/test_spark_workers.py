"""Workers placed by Spark: the link, and a real run of two workers as Spark tasks.

The link tests run both ends in this process with a stand-in runtime (no Spark, no
broker): the token before anything is unpickled, a dropped link as a recorded loss with
its unconfirmed messages, TLS pinned to the controller's certificate.

The run test starts ``flowdeck run --spark-master local[2] --workers 2`` in a subprocess
(a SparkContext per process: the suite's shared local Spark session may live in this
one), steers it through its control endpoint, kills one worker's task process mid-run and
checks the merged figures against the per-host rows and the broker's own counts
(tests/spark_runs.py; test_spark_hosts.py runs the same on a standalone master whose two
Spark workers are hosts of their own).
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from flowdeck.engine.commands import Stop, WorkerAssignment
from flowdeck.engine.control.address import ControlAddress
from flowdeck.engine.errors import SpecError
from flowdeck.engine.events import EventKind
from flowdeck.engine.process import WorkerFailed, WorkerLost
from flowdeck.engine.snapshot import ClientSnapshot, Counters, WorkerReport
from flowdeck.engine.spark_workers import SparkPlacement, parse_spark_master, workers_for
from flowdeck.engine.spark_workers.link import LinkServer, RemoteWorker
from flowdeck.engine.spark_workers.task import TaskOrders, _linked_worker
from flowdeck.engine.spark_workers.wire import MAGIC, WorkerHello, frame, read_frame, token_header
from flowdeck.engine.spec import RunSpec, settings_of
from flowdeck.engine.tls import TlsOptions
from tests.conftest import SHARED_MANAGEMENT_URL
from tests.engine.test_tls import make_certificates
from tests.spark_runs import two_workers_one_lost

SPEC = RunSpec(uri="amqp://guest:guest@127.0.0.1:5672/%2F", publishers=2, consumers=2)


async def stand_in_runtime(assignment: WorkerAssignment, commands, emit):  # type: ignore[no-untyped-def]
    """A worker that publishes nothing: one snapshot, then its report at Stop."""
    emit(snapshot(assignment.worker, Counters(published=5, confirmed=5)))
    await commands.get()
    return WorkerReport(worker=assignment.worker, counters=Counters(published=5, confirmed=5))


def snapshot(worker: int, counters: Counters, pending: int = 0) -> ClientSnapshot:
    return ClientSnapshot(
        worker=worker,
        at=time.time(),
        interval=1.0,
        counters=counters,
        pending_confirms=pending,
        unacked=3,
        connections=2,
        blocked=0,
        settings=settings_of(SPEC),
        target_rate=0.0,
    )


def assignment(worker: int, workers: int = 2) -> WorkerAssignment:
    return WorkerAssignment(worker, workers, SPEC, time.time(), (SPEC.uri,))


# -- the link, both ends in this process -----------------------------------------------------


def test_masters_and_worker_counts_are_checked_before_anything_starts() -> None:
    assert parse_spark_master(" spark://10.0.0.5:7077 ") == "spark://10.0.0.5:7077"
    assert workers_for("local[3]", -1) == 3
    assert workers_for("spark://h:7077", 4) == 4
    for bad, message in [
        (lambda: parse_spark_master("yarn"), "--spark-master must be spark://HOST:PORT"),
        (lambda: workers_for("local[2]", 3), "use local[3]"),
        (lambda: workers_for("spark://h:7077", -1), "needs --workers N"),
        (lambda: workers_for("local[2]", 0), "--workers 1 or more"),
        (
            lambda: SparkPlacement("local[1]", listen=ControlAddress("10.1.2.3", 0)),
            "--spark-cert-file",
        ),
    ]:
        with pytest.raises(SpecError, match=re.escape(message)):
            bad()


async def test_a_wrong_token_is_refused_before_anything_is_unpickled() -> None:
    hosts = {0: RemoteWorker(0, 1, lambda message: None)}
    refusals: list[str] = []
    server = LinkServer("the-token", hosts, version="v", on_refused=refusals.append)
    port = await server.start("127.0.0.1", 0, None)
    for first in (token_header("not-the-token"), b"GET / HTTP/1.1\r\n\r\n"):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(first + frame(WorkerHello(0, "evil", 1, "v")))
        assert await reader.read() == b""  # closed unanswered
        writer.close()
    await server.close()
    assert not hosts[0].connected
    assert len(refusals) == 2 and all("no or wrong token" in r for r in refusals)
    assert MAGIC not in b"GET"


async def test_a_worker_round_trip_over_the_link_and_a_second_hello_is_refused() -> None:
    messages: list[object] = []
    hosts = {0: RemoteWorker(0, 1, messages.append)}
    server = LinkServer("t", hosts, version="v")
    port = await server.start("127.0.0.1", 0, None)
    orders = TaskOrders("127.0.0.1", port, "t", f"{__name__}:stand_in_runtime", "v")
    task = asyncio.create_task(_linked_worker(orders, 0))
    assert await asyncio.wait_for(hosts[0].ready(), 10)
    again = await _linked_worker(orders, 0)  # a retried Spark task
    assert "already connected once" in again
    hosts[0].begin(assignment(0, 1))
    hosts[0].send(Stop())
    report = await asyncio.wait_for(hosts[0].wait(), 10)
    assert report is not None and report.counters.published == 5
    assert await task == "worker 0 reported"
    assert hosts[0].usage is not None and hosts[0].usage.wall_seconds > 0
    assert [type(m).__name__ for m in messages] == ["WorkerEvent", "ClientSnapshot", "WorkerReport"]
    await server.close()


async def test_a_dropped_link_is_a_loss_with_its_unconfirmed_counted() -> None:
    messages: list[object] = []
    hosts = {1: RemoteWorker(1, 2, messages.append)}
    server = LinkServer("t", hosts, version="v")
    port = await server.start("127.0.0.1", 0, None)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(token_header("t") + frame(WorkerHello(1, "host-b", 4242, "v")))
    assert await hosts[1].ready()
    hosts[1].begin(assignment(1))
    assert isinstance(await read_frame(reader), WorkerAssignment)
    writer.write(frame(snapshot(1, Counters(published=100, confirmed=90, nacked=2), pending=8)))
    await writer.drain()
    await asyncio.sleep(0.2)
    writer.transport.abort()  # the host is gone: no report, no goodbye
    assert await asyncio.wait_for(hosts[1].wait(), 10) is None
    await server.close()
    lost = [m for m in messages if isinstance(m, WorkerLost)]
    assert len(lost) == 1 and not any(isinstance(m, WorkerFailed) for m in messages)
    event, report = lost[0].event, lost[0].report
    assert event.kind is EventKind.ERROR and "worker 1 on host-b (pid 4242) lost" in event.message
    assert event.detail["publishers"] == [1] and event.detail["consumers"] == [1]
    assert event.detail["pending_confirms"] == 8 and event.detail["unacked"] == 3
    assert report.counters.published == 100 and report.published_unconfirmed == 8


async def test_tls_link_trusts_the_controllers_certificate_alone(tmp_path: Path) -> None:
    certificates = make_certificates(tmp_path)
    placement = SparkPlacement(
        "local[1]",
        workers=1,
        listen=ControlAddress("127.0.0.1", 0),
        tls=TlsOptions(
            cert_file=str(certificates.server_cert), key_file=str(certificates.server_key)
        ),
    )
    hosts = {0: RemoteWorker(0, 1, lambda message: None)}
    server = LinkServer("t", hosts, version="v")
    port = await server.start("127.0.0.1", 0, placement._server_tls)
    pinned = TaskOrders(
        "127.0.0.1", port, "t", f"{__name__}:stand_in_runtime", "v", placement._server_cert
    )
    task = asyncio.create_task(_linked_worker(pinned, 0))
    assert await asyncio.wait_for(hosts[0].ready(), 10)
    hosts[0].begin(assignment(0, 1))
    hosts[0].send(Stop())
    assert await asyncio.wait_for(task, 10) == "worker 0 reported"
    other = certificates.client_cert.read_text()  # a certificate, not the controller's
    stranger = TaskOrders("127.0.0.1", port, "t", "x:y", "v", other)
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        await _linked_worker(stranger, 0)
    await server.close()


# -- a real run: two Spark tasks on local[2], the shared broker ------------------------------


@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.timeout(420)
def test_two_spark_workers_steered_merged_and_one_lost(tmp_path: Path, unique_name: str) -> None:
    run = two_workers_one_lost(
        tmp_path,
        unique_name,
        placement=("--spark-master=local[2]",),
        management_url=SHARED_MANAGEMENT_URL,
    )
    print(f"\nSpark workers: {run.summary()}")
