"""The answer past capacity, on a real broker: a rate=0 in-flight sweep that builds a backlog
and drains it must not recommend the phase that drained it, and the depth's trend reads
down while it drains.

A private node (statistics every second, so the queue's depth is polled each second): two
publishers with no rate limit at in-flight 100 fill the queue while no consumer runs; then
two consumers start and the in-flight limit drops to 1 in the same moment (two changes
0.2 s apart are one phase boundary), so that phase's consumers take the backlog at a rate
far above what its publishers bring; then in-flight 10. Under the rules before, with no
target rate nothing capped the drain's msg/s and it was "the best": the recommendation was
the draining phase's limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdeck.collectors import Broker, LocalBroker
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.controller import Controller
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec, ScheduleStep
from flowdeck.figures import Trend, Verdict, trend_of
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]

#: Seconds of each phase: the backlog builds, drains, then the last limit runs steady.
FILL_S, DRAIN_S, STEADY_S = 6.0, 9.0, 8.0


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    node = private_broker()
    yield node
    private_broker.discard(node)


async def test_a_backlog_drained_at_a_low_limit_is_not_the_recommendation(
    node: LocalBroker, tmp_path: Path
) -> None:
    spec = RunSpec(
        name="backlog-sweep",
        queue_pattern="right-answers-%d",
        queues=1,
        publishers=2,
        consumers=0,
        rate=0,
        inflight=100,
        prefetch=200,
        ack_every=10,
        message_size=100,
        duration=FILL_S + DRAIN_S + STEADY_S,
        schedule=(
            ScheduleStep(FILL_S, Change(Setting.CONSUMERS, 2)),
            ScheduleStep(FILL_S + 0.2, Change(Setting.INFLIGHT, 1)),
            ScheduleStep(FILL_S + DRAIN_S, Change(Setting.INFLIGHT, 10)),
        ),
        workers=0,
    )
    controller = Controller(
        spec,
        broker=Broker.parse(node.uri, management_url=node.management_url),
        recording=RunRecording(tmp_path),
        drain_seconds=5,
        cleanup=True,
    )
    await controller.start()
    summary = await controller.wait()
    assert summary.safety.lost == 0 and summary.safety.published > 0

    live = controller.phase_table.figures()
    assert summary.session_dir is not None
    recorded = open_session(Path(summary.session_dir)).figures()
    assert live is not None
    for figures in (live, recorded):
        load = [p for p in figures.phases if not p.is_drain]
        assert [p.setting("inflight") for p in load] == [100, 1, 10], figures.phases
        fill, drain, steady = load
        assert fill.verdict is Verdict.OVERLOADED, fill.reason  # no consumer: depth grows
        # the drain phase moved the backlog: consumers took far more than was published
        assert drain.verdict is Verdict.DRAINING, (drain.reason, drain.client, drain.broker)
        assert drain.figure("consume_rate_mean") > 2 * drain.figure("publish_rate_mean")
        assert drain.broker["depth_start"] > 1000
        through = drain.figure("consume_rate_mean")
        assert trend_of(drain.broker["depth_slope"], through) is Trend.DOWN, drain.broker
        assert steady.verdict is not None and steady.verdict.judged_capacity, steady.reason
        (sweep,) = figures.sweeps
        reasoning = sweep.recommendation.reasoning
        assert sweep.recommendation.value == 10, reasoning
        assert "inflight=1: excluded (draining a backlog)" in reasoning
    # one answer: the live table and the recorded session say the same, to the digit
    assert [p.reason for p in live.phases] == [p.reason for p in recorded.phases]
    assert live.sweeps[0].recommendation == recorded.sweeps[0].recommendation
