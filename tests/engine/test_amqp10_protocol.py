"""A run over AMQP 1.0 on a private node (rabbitmq_amqp1_0 on), to a quorum queue.

Two senders at 1,000 msg/s between them, the unsettled window (in-flight) and the receiver's
link credit (prefetch) steered while the run goes. What is checked: the window in force is
what each sender's unsettled deliveries show right after each of its sends, their high-water
mark (never more than the new window after the change, more before: a once-a-second tick
catches the count between sends and settlements, which on a machine whose settlements came
back within 6 ms held no more than the new window at any tick); the credit in force is
what the receiver's link holds right after each top-up (never more than 1 once the change
reached it, more before), and shows in the broker's count of the queue's messages growing;
nothing confirmed is lost (the credit is raised again for the last phase, so the queue
drains). How much of what was sent the receiver takes is not judged: with the suite beside
it the receiver, on the senders' loop, took 0.42 at credit 20 and 0.42 at credit 1, both
bound by the CPU rather than by the credit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flowdeck.collectors import Broker, LocalBroker
from flowdeck.engine.amqp10.clients import Amqp10Receiver, Amqp10Sender
from flowdeck.engine.controller import Controller
from flowdeck.engine.events import EventKind
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec, parse_schedule
from tests.engine.pending_marks import pending_after_sends
from tests.engine.updates import collect_updates
from tests.private_nodes import PrivateNodes

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    node = private_broker()
    yield node
    private_broker.discard(node)


async def _ready(
    node: LocalBroker, queue: str, seen: list[tuple[float, int]], stop: asyncio.Event
) -> None:
    """The queue's messages (ready and unacknowledged: 3.10's plugin takes them ahead of the
    receiver's credit) as the broker counts them, twice a second, until ``stop``."""
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(auth=("guest", "guest"), timeout=5) as http:
        while not stop.is_set():
            answer = await http.get(f"{node.management_url}/api/queues/%2F/{queue}")
            if answer.status_code == 200 and "messages" in answer.json():
                seen.append((loop.time(), int(answer.json()["messages"])))
            await asyncio.sleep(0.5)


def _credit(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, int]]:
    """The receiver link's credit right after each top-up, with the loop's time."""
    credits: list[tuple[float, int]] = []
    top_up = Amqp10Receiver._top_up

    def _top_up(self: Amqp10Receiver) -> None:
        top_up(self)
        credits.append((self.amqp.loop.time(), self.link.credit))

    monkeypatch.setattr(Amqp10Receiver, "_top_up", _top_up)
    return credits


async def test_amqp10_run_steered_live_loses_nothing(
    node: LocalBroker, tmp_path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = RunSpec(
        name="amqp10",
        protocol="amqp1.0",
        queue_type="quorum",
        queue_pattern=f"{unique_name}-%d",
        publishers=2,
        consumers=1,
        # between what the receiver takes at credit 20 and at credit 1 (one delivery per
        # round trip)
        rate=1000,
        inflight=40,
        prefetch=20,
        message_size=200,
        duration=14,
        workers=0,
        schedule=parse_schedule(
            [
                {"at": 6, "change": "inflight=3"},
                {"at": 6, "change": "prefetch=1"},
                # give the credit back so the queue drains
                {"at": 10, "change": "prefetch=50"},
            ]
        ),
    )
    controller = Controller(
        spec,
        broker=Broker.parse(node.uri, management_url=node.management_url),
        recording=RunRecording(tmp_path),
        drain_seconds=20,
    )
    events, ticks = collect_updates(controller)
    marks = pending_after_sends(monkeypatch, Amqp10Sender)
    credits = _credit(monkeypatch)
    ready: list[tuple[float, int]] = []
    stop = asyncio.Event()
    await controller.start()
    began = asyncio.get_running_loop().time()
    watching = asyncio.create_task(_ready(node, spec.queue_name(0), ready, stop))
    summary = await asyncio.wait_for(controller.wait(), spec.duration + 120)
    stop.set()
    await watching

    safety = summary.safety
    assert safety.published > 500
    assert safety.confirmed == safety.published
    assert safety.consumed == safety.published
    assert safety.lost == 0
    assert safety.duplicates == 0
    # The run says what AMQP 1.0 on this broker is.
    assert any(
        e.kind is EventKind.INFO and "translates every message to AMQP 0.9.1" in e.message
        for e in events
    )

    # The ticks' total never above the two senders' windows of 40. Each sender's high-water
    # mark above the new window of 3 while 40 was in force, and never above 3 once the change
    # reached it (a second after it was made; the ticks' settings say when it was in force).
    # The ticks' own count may stay above 3 a while after the change: deliveries sent under
    # the window of 40 wait for their settlement (80 for seconds with both cores busy).
    assert max(t.pending_confirms for t in ticks) <= 2 * 40
    before = [n for at, _, n in marks if 1 <= at - began < 6]
    after = [n for at, _, n in marks if 7 <= at - began < 14]
    assert before and after
    assert max(after) <= 3 < max(before) <= 40
    assert {t.settings.inflight for t in ticks if 7 <= t.elapsed < 14} == {3}
    assert {t.settings.prefetch for t in ticks if 7 <= t.elapsed < 10} == {1}

    # The credit: up to 20 before the change, never above 1 once it reached the receiver
    # (the credit given before the change is used first), and the broker's count of the
    # queue's messages grows while the receiver takes one delivery per round trip.
    credit_before = [n for at, n in credits if 1 <= at - began < 6]
    credit_after = [n for at, n in credits if 7 <= at - began < 9]
    assert credit_before and credit_after
    assert max(credit_after) <= 1 < max(credit_before) <= 20
    early = [n for at, n in ready if at - began < 6]
    late = [n for at, n in ready if 9 <= at - began < 10.5]
    assert early and late, [(round(at - began, 1), n) for at, n in ready]
    assert max(late) > max(early) + 100
    print(
        f"\nAMQP 1.0: published {safety.published:,}, consumed {safety.consumed:,}, lost "
        f"{safety.lost}; unsettled high-water a sender before {max(before)} after "
        f"{max(after)}; in the queue at credit 20 at most {max(early)}, at credit 1 "
        f"{max(late)}; link credit at most {max(credit_before)} before, "
        f"{max(credit_after)} after"
    )
