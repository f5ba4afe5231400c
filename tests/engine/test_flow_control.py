"""Credit flow, recorded: a private node started with a small credit (as `flowdeck broker
start --set credit_flow_default_credit={20,10}` starts one) under publishers sending as fast
as they can without confirms puts their connections in `flow`, and the session's broker
samples say so (the node's connections in flow, the run's publishers in flow, which ones);
at RabbitMQ's default credit and a gentle rate the samples record none. Judged by the
recorded data, read back as replay reads it, not by the wall clock.

What puts them in flow is the broker falling behind, more than the credit: measured here,
full-speed publishing (about 40,000 msg/s offered) recorded flow in 12 of 17 samples at the
default credit too, and 2 x 2,000 msg/s recorded none even at a credit of {2,1}. The
credit sets how many messages wait in the processes before flow holds the publishers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flowdeck.collectors import Broker, BrokerSample, LocalBroker, LocalNodes
from flowdeck.engine.controller import Controller
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec
from flowdeck.figures.pipeline import BEFORE_QUEUES, WAIT_MIN, pipeline_of
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(240)]


async def recorded_run(node: LocalBroker, spec: RunSpec, sessions: Path) -> list[BrokerSample]:
    """Run ``spec`` on ``node`` to its end, recorded; its management samples read back
    (the session is the only one in ``sessions``)."""
    broker = Broker.parse(
        node.uri,
        management_url=node.management_url,
        statistics_interval=node.stats_interval_ms / 1000,
        private=True,
        local=LocalNodes(node),
    )
    controller = Controller(spec, broker=broker, recording=RunRecording(sessions), drain_seconds=2)
    await controller.start()
    summary = await controller.wait()
    assert summary.outcome == "completed", summary.errors
    assert summary.session_dir is not None
    samples = open_session(Path(summary.session_dir)).broker_samples()
    fresh = [s for s in samples if s.source == "management" and not s.stale]
    assert len(fresh) >= 5, [s.stale_reason for s in samples]
    return fresh


def spec(name: str, **fields: object) -> RunSpec:
    values: dict[str, object] = {
        "name": name,
        "queue_pattern": f"{name}-%d",
        "queue_type": "quorum",
        "publishers": 2,
        "consumers": 1,
        "prefetch": 500,
        "message_size": 1000,
        "duration": 12,
        "workers": 0,
    }
    values.update(fields)
    return RunSpec(**values)  # type: ignore[arg-type]


async def test_a_small_credit_and_fast_publishers_record_connections_in_flow(
    private_broker: PrivateNodes, tmp_path: Path
) -> None:
    node = private_broker(rabbit_settings={"credit_flow_default_credit": "{20,10}"})
    try:
        samples = await recorded_run(
            node, spec("flow-small-credit", rate=0, confirms=False, inflight=0), tmp_path
        )
    finally:
        private_broker.discard(node)
    in_flow = [s for s in samples if s.connections_flow]
    print(
        f"\n{len(in_flow)} of {len(samples)} samples with connections in flow; run's "
        f"publishers in flow per sample: {[s.run_publishers_flow for s in samples]}"
    )
    assert in_flow, "no sample recorded a connection in flow"
    assert max(s.run_publishers_flow or 0 for s in samples) > 0
    # the flow is the run's publishers', by id, on the node that holds them
    named = [s for s in samples if s.publishers_in_flow]
    assert named and {i for s in named for i in s.publishers_in_flow} <= {0, 1}
    # (while the run stops, a publisher's connection may be gone from a sample already)
    assert all(len(s.publishers_in_flow) == s.run_publishers_flow for s in named)
    assert all((s.run_publishers_flow or 0) <= (s.run_publishers or 0) <= 2 for s in named)
    assert any((n.connections_flow or 0) > 0 for s in in_flow for n in s.nodes)
    # Where the messages waited: before the queues, held by the flow, as the flow tab and
    # the replay read it off the recorded polls.
    waiting = most_before_the_queues(tmp_path)
    print(f"most messages waiting before the queues at one poll: {waiting:,.0f}")
    assert waiting >= WAIT_MIN


async def test_the_default_credit_and_a_gentle_rate_record_none(
    private_broker: PrivateNodes, tmp_path: Path
) -> None:
    node = private_broker()
    try:
        samples = await recorded_run(
            node, spec("flow-default-credit", rate=20, confirms=True, inflight=20), tmp_path
        )
    finally:
        private_broker.discard(node)
    assert all(s.connections_flow == 0 and s.channels_flow == 0 for s in samples), [
        (s.connections_flow, s.channels_flow) for s in samples
    ]
    assert all(s.run_publishers_flow == 0 and s.publishers_in_flow == () for s in samples)
    # the run's clients were seen all along, and what they sent was taken in
    assert max(s.run_publishers or 0 for s in samples) == 2
    assert max(s.run_accepted or 0 for s in samples) > 0
    assert most_before_the_queues(tmp_path) < WAIT_MIN


def most_before_the_queues(sessions: Path) -> float:
    """The most messages the recorded run had sent and the broker not yet taken in, over
    its polls (``figures.pipeline`` on the session's figures)."""
    (session,) = (p for p in sessions.iterdir() if p.is_dir())
    figures = open_session(session).figures(latency=False)
    pipelines = [
        pipeline_of(poll) for poll in figures.polls if poll.get("run_accepted") is not None
    ]
    assert pipelines, "no poll said what the broker took in"
    return max(p.place(BEFORE_QUEUES).messages or 0.0 for p in pipelines)
