"""The capacity search (``--autotune rate``) on a private node made to saturate.

One publisher without confirms into one queue whose one consumer takes a message at a time
(prefetch 1, an ack each) through a link that delays each way by 1 ms: the consumer waits
a round trip of at least 2 ms per message, so it takes at most a few hundred msg/s whatever
the machine. The search doubles the rate from 50 msg/s while the consumer keeps up; past
its pace the queue grows (the step is overloaded), the run goes back to a rate that held
until the queue is empty, and the search halves the interval. Its answer must be the
recorded session's own capacity (what the report computes), and the rate just above it
must be a step where the queue grew.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdeck.collectors import Broker, LocalBroker
from flowdeck.engine.autotune import Autopilot, State, SteadyRule
from flowdeck.engine.controller import Controller
from flowdeck.engine.events import EventKind
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec
from flowdeck.figures import Verdict
from tests.latency_link import DelayedLink
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(420)]

RULE = SteadyRule(min_hold_s=5, window=4, max_cv=0.15, max_trend=0.10, max_hold_s=10)


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    node = private_broker()
    yield node
    private_broker.discard(node)


async def search(spec: RunSpec, sessions: Path, node: LocalBroker) -> tuple[Controller, Autopilot]:
    direct = Broker.parse(node.uri)
    target = direct.nodes[0]
    async with DelayedLink(target.host, target.effective_port, 0.001) as link:
        far = Broker.parse(
            str(dataclasses.replace(target, host="127.0.0.1", port=link.port)),
            management_url=node.management_url,
        )
        controller = Controller(
            spec, broker=far, recording=RunRecording(sessions), drain_seconds=2, cleanup=True
        )
        autopilot = Autopilot(controller, "rate", rule=RULE)
        autopilot.attach()
        await controller.start()
        deadline = time.monotonic() + spec.duration
        while autopilot.active and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await controller.stop("the search is done")
        return controller, autopilot


def test_the_search_finds_where_the_consumer_falls_behind(
    node: LocalBroker, tmp_path: Path
) -> None:
    spec = RunSpec(
        name="capacity",
        queue_pattern="capacity-%d",
        queues=1,
        publishers=1,
        consumers=1,
        rate=50,
        confirms=False,
        prefetch=1,
        ack_every=1,
        message_size=100,
        duration=300,  # a bound: the search takes 1-3 minutes here
        workers=0,
    )
    controller, autopilot = asyncio.run(search(spec, tmp_path, node))
    said = [e.message for e in controller.events if e.kind is EventKind.INFO]
    assert autopilot.state is State.DONE, said
    found = autopilot.capacity
    assert found is not None and found.rate is not None and found.broke_at is not None, said
    print("\n".join(said), f"\ncapacity {found.rate} msg/s, broke at {found.broke_at}", sep="\n")
    assert 50 <= found.rate < found.broke_at <= 1.25 * found.rate + 50, found.reasoning
    # past the capacity the consumer fell behind: the queue grew. A step there whose figures
    # were a backlog's is inconclusive and taken again (beside a CPU hog: rate=240 first
    # read "draining a backlog", 1,552 consumed of 1,440 published after an overloaded
    # 250, then "overloaded" when retaken), so the last step at that rate decided it.
    above = [s for s in autopilot.search.steps if s.value == found.broke_at]
    assert above and above[-1].verdict is Verdict.OVERLOADED, above
    assert all(s.verdict.inconclusive for s in above[:-1]), above
    assert controller.settings.rate == found.per_publisher  # the run was left at it

    assert controller.session_dir is not None
    recorded = open_session(controller.session_dir).figures()
    assert recorded.capacity is not None
    assert (recorded.capacity.rate, recorded.capacity.broke_at) == (found.rate, found.broke_at)
    # each step was judged on its phase's final figures: the session's verdict is the step's
    for step in autopilot.search.steps:
        phase = recorded.phases[step.phase]
        assert (phase.verdict, phase.seconds) == (step.verdict, step.held_s), (step, phase)
