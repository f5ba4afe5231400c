"""A run of two Spark workers steered live, one of them lost mid-run, checked end to end.

Shared by the Spark workers' tests on ``local[2]`` (tests/engine/test_spark_workers.py) and
on a standalone cluster whose workers are hosts of their own (test_spark_hosts.py): the
run is ``flowdeck run`` in a subprocess (a SparkContext per process), steered through its
control endpoint; the figures it prints are checked against each other and against the
broker's own counts, read from the management API at ``management_url`` and, on a node the
run has to itself, from the node's own message counters at ``prometheus_url``.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tests.engine.test_control_api import consumer_prefetch, end_run, start_steerable_run

#: msg/s of each publisher: a worker's messages after its last snapshot stay below 3 s of it.
RATE = 40


@dataclass(frozen=True)
class Worker:
    """A worker as the run said hello to it, and its row under the summary."""

    host: str
    pid: int
    published: int = 0
    lost: bool = False


@dataclass(frozen=True)
class LostWorkerRun:
    """What a checked run printed and what the broker counted."""

    hello: dict[int, Worker]
    rows: dict[int, Worker]
    merged: int
    broker: list[int]
    #: What the node routed during the run, by its own counter (a node of the run's own).
    routed: int | None
    #: What worker 1's queue took in, by the queue's own count (on the shared broker).
    enqueued: int | None
    output: str
    hello_after: float
    killed_at: float
    seconds: float

    @property
    def tail(self) -> int:
        """What worker 1 published after its last snapshot (the broker has it, its row not):
        by the node's counter where there is one, else by its queue's own count."""
        if self.routed is not None:
            return self.routed - self.broker[0] - self.rows[1].published
        assert self.enqueued is not None
        return self.enqueued - self.rows[1].published

    def summary(self) -> str:
        rows = self.rows
        return (
            f"hello after {self.hello_after:.1f} s, worker 1 killed at {self.killed_at:.1f} s; "
            f"merged published {self.merged:,} = {rows[0].published:,} + "
            f"{rows[1].published:,}; broker queue -1 {self.broker[0]:,}, queue -2 "
            f"{self.broker[1]:,}"
            + ("" if self.routed is None else f", node routed {self.routed:,}")
            + ("" if self.enqueued is None else f", queue -2 took in {self.enqueued:,}")
            + f" (tail {self.tail}); test {self.seconds:.0f} s"
        )

    def host_rows(self) -> str:
        """The per-host rows as the run printed them, with their heading."""
        lines = self.output.splitlines()
        first = next(i for i, line in enumerate(lines) if re.match(r"worker\s+host\s+pid", line))
        return "\n".join(lines[first : first + 1 + len(self.rows)])


def _queue(management_url: str, name: str) -> dict[str, Any]:
    """Queue ``name`` of vhost / as the management API lists it."""
    with httpx.Client(base_url=management_url, auth=("guest", "guest"), timeout=10) as api:
        return dict(api.get(f"/api/queues/%2F/{quote(name, safe='')}").json())


def queue_enqueued(management_url: str, name: str) -> int | None:
    """What classic queue ``name`` has taken in since it was declared, by its own count (the
    next sequence number of its backing queue): a message counts as the queue takes it,
    and a message requeued keeps its number, so a channel killed with its connection takes
    none of it along. None until the node has emitted the queue's statistics."""
    taken = (_queue(management_url, name).get("backing_queue_status") or {}).get("next_seq_id")
    return None if taken is None else int(taken)


def messages_routed(prometheus_url: str) -> int:
    """The messages the node has routed to queues since it started, over every protocol, by
    its global counters (``rabbitmq_global_messages_routed_total``): counted as each message
    is routed, not from a channel's statistics, so a channel killed with its connection
    takes none of it along."""
    metrics = httpx.get(f"{prometheus_url}/metrics", timeout=10).text
    found = re.findall(r"^rabbitmq_global_messages_routed_total\{[^}]*\} (\S+)$", metrics, re.M)
    assert found, "the node's prometheus endpoint has no rabbitmq_global_messages_routed_total"
    return sum(int(float(count)) for count in found)


def wait_for_line(run_output, pattern: str, seconds: float) -> re.Match[str]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = re.search(pattern, run_output())
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"{pattern!r} not in the run's output:\n{run_output()[-4000:]}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def two_workers_one_lost(
    tmp_path: Path,
    queue_prefix: str,
    *,
    placement: tuple[str, ...],
    management_url: str,
    prometheus_url: str | None = None,
    duration: str = "35s",
    hello_seconds: float = 240,
    on_hello: Callable[[dict[int, Worker]], None] = lambda hello: None,
) -> LostWorkerRun:
    """Run 2 Spark workers (``placement``: --spark-master and what goes with it; a --uri
    there replaces the shared broker's), each with a publisher and a consumer on a queue
    of its own at RATE msg/s; steer in-flight and prefetch live and check both in force in
    both workers (prefetch 37 on both queues' consumers, as the broker says); kill worker
    1's task process 8 s into the load; check the loss is recorded before the run ends by
    its duration with exit 0, the merged count is the sum of the per-host rows, worker 0's
    row is what the broker says its queue received (worker 1's up to 3 s of messages
    more: those after its last snapshot), and no task process outlives the run.
    ``prometheus_url``: the node's, when the run has the node to itself; worker 1's queue is
    then judged by what the node routed, not by its queue's statistics (see below).
    ``on_hello`` is called with the workers as they said hello, while both run."""
    began = time.monotonic()
    routed_before = None if prometheus_url is None else messages_routed(prometheus_url)
    run = start_steerable_run(
        tmp_path,
        queue_prefix,
        duration=duration,
        extra=(
            "--workers=2",
            "--queues=2",
            "--publishers=2",
            "--consumers=2",
            f"--rate={RATE}",
            # The broker's per-queue publish count comes from the channels' statistics:
            # a channel closed before the node collected its last ones (every second here)
            # takes them along. Under load 2 s of drain once left worker 0's queue 59
            # messages (1.5 s) short; the publishers stop first, so a longer drain lets the
            # node collect them while the connections are still open.
            "--drain=5",
            *placement,
        ),
        cleanup=False,  # the queues' counts are read after the run
    )
    try:
        for worker in (0, 1):
            hello_line = rf"worker {worker} connected from \S+ \(pid \d+\)"
            wait_for_line(run.output, hello_line, hello_seconds)
        hello = {
            int(w): Worker(host, int(pid))
            for w, host, pid in re.findall(
                r"worker (\d) connected from (\S+) \(pid (\d+)\)", run.output()
            )
        }
        on_hello(hello)
        wait_for_line(run.output, r"run '.*' started .* with 2 Spark tasks on \S+", 60)
        started = time.monotonic()
        with run.api() as api:
            for change in ("inflight=80", "prefetch=37"):
                answer = api.post("/changes", json={"change": change})
                assert answer.status_code == 200 and answer.json()["in_force"], answer.text
            in_force = api.get("/status").json()["settings"]["in_force"]
        assert (in_force["inflight"], in_force["prefetch"]) == (80, 37)
        assert len(re.findall(r"in effect in every worker", run.output())) == 2
        queues = [f"{queue_prefix}-1", f"{queue_prefix}-2"]
        deadline = time.monotonic() + 20
        while (
            time.monotonic() < deadline
            and [consumer_prefetch(management_url, q) for q in queues] != [[37]] * 2
        ):
            time.sleep(0.5)
        # both workers' consumers
        assert [consumer_prefetch(management_url, q) for q in queues] == [[37], [37]]

        time.sleep(max(0.0, started + 8 - time.monotonic()))  # well into the run
        os.kill(hello[1].pid, signal.SIGKILL)  # worker 1's Spark task process, mid-run
        killed_at = time.monotonic() - started
        lost = wait_for_line(run.output, r"worker 1 on \S+ \(pid \d+\) lost: ([^\n]*)", 30)
        run.process.wait(timeout=120)
    finally:
        end_run(run)
    output = run.output()
    assert run.process.returncode == 0, output[-4000:]
    assert "run completed: duration reached" in output
    assert "publisher(s) (1)" in lost[0] and "consumer(s) (1)" in lost[0]
    # Its messages in flight count as unconfirmed in the summary's data-safety figures
    # (the surviving worker's were all confirmed by its report).
    in_flight = re.search(r"(\d+) unconfirmed", lost[0])
    summary = re.search(r"^unconfirmed\s+([\d,]+)", output, re.M)
    assert in_flight and summary and in_flight[1] == summary[1].replace(",", ""), lost[0]
    assert output.index(lost[0]) < output.index("publishing stopped (duration reached)")

    merged = int(re.search(r"^published\s+([\d,]+)", output, re.M)[1].replace(",", ""))  # type: ignore[index]
    rows = {
        int(m[1]): Worker(m[2], int(m[3]), int(m[4].replace(",", "")), bool(m[5]))
        for m in re.finditer(
            r"^(\d)\s+(\S+)\s+(\d+)\s+\d+\s+\d+\s+([\d,]+)\s.*?(LOST)?$", output, re.M
        )
    }
    assert [(rows[w].host, rows[w].pid) for w in (0, 1)] == [
        (hello[w].host, hello[w].pid) for w in (0, 1)
    ]
    assert (rows[0].lost, rows[1].lost) == (False, True)
    assert merged == rows[0].published + rows[1].published
    # The broker's counts: worker 0's publisher fills queue -1 alone, worker 1's queue -2.
    # Each queue's own count of what it took in, as the node last emitted it: a queue's
    # publish count (its publishers' channel statistics) fell short even for the surviving
    # worker beside the CPU hog, 750 where its row and its confirms said 802, 30 s after
    # the run (the run's channels closed before the node collected their last figures).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        queue_enqueued(management_url, queues[0]) != rows[0].published
    ):
        time.sleep(1)
    broker = [queue_enqueued(management_url, q) or 0 for q in queues]
    assert broker[0] == rows[0].published, (broker, rows)
    routed = enqueued = None
    # A queue's publish count is what the node collected of its publishers' channel
    # statistics; a channel that dies with its connection takes what was not yet collected
    # along. Under load (2 CPU spinners beside the suite) the killed worker's queue showed
    # 136 published where its last snapshot said 313, and in CI 298 where it said 313: the
    # broker's statistics, not the row, were short (with in-flight 80 in force a publisher
    # is never more than 80 messages ahead of what the node confirmed, so it had routed at
    # least 233). So worker 1's queue is judged by a count that loses nothing: what the
    # queue itself took in on the shared broker, what the node routed on a node of its own
    # (worker 0's queue's count, proved above, plus worker 1's). Either is worker 1's row
    # and up to 3 s more (those after its last snapshot, which never reached the
    # controller).
    if prometheus_url is None:
        # the node emits a queue's statistics every few seconds: until they hold its last ones
        deadline = time.monotonic() + 30
        while (
            time.monotonic() < deadline
            and (queue_enqueued(management_url, queues[1]) or 0) < rows[1].published
        ):
            time.sleep(1)
        enqueued = queue_enqueued(management_url, queues[1])
        assert enqueued is not None, f"the node shows no count for {queues[1]}"
        assert 0 <= enqueued - rows[1].published <= RATE * 3, (enqueued, broker, rows)
    else:
        routed = messages_routed(prometheus_url) - (routed_before or 0)
        assert 0 <= routed - broker[0] - rows[1].published <= RATE * 3, (routed, broker, rows)
        assert broker[1] <= routed - broker[0], (routed, broker, rows)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(alive(w.pid) for w in hello.values()):
        time.sleep(0.5)
    assert not any(alive(w.pid) for w in hello.values()), "a Spark task outlived the run"
    return LostWorkerRun(
        hello,
        rows,
        merged,
        broker,
        routed,
        enqueued,
        output,
        started - began,
        killed_at,
        time.monotonic() - began,
    )
