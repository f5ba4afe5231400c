"""Broker changes (``broker.KEY=VALUE``, ``broker.reconnect``): the grammar, the refusal on
a broker flowdeck does not run, and on a private node the change taking effect, read back
from the node, with a phase of its own.

The live test also repeats the experiment that says who takes a live change: the run's
publishing channel keeps the quorum queue soft limit it started with until
``broker.reconnect`` closes its connection, and its new channel has the new one (read from
the channel's own state with ``sys:get_state``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flowdeck.collectors import Broker, LocalBroker, LocalNodes
from flowdeck.engine.change import Change, Setting, parse_change
from flowdeck.engine.controller import Controller
from flowdeck.engine.errors import SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec, schedule_step
from tests.engine.updates import collect_updates
from tests.private_nodes import PrivateNodes

#: Every publishing channel's quorum queue soft limit, from the channel's own state (the
#: ``cfg`` record of its rabbit_fifo_client: tag, queue, servers, soft limit, ...).
SOFT_LIMITS = (
    "W = fun Walk(T) when is_tuple(T), tuple_size(T) =:= 8, element(1, T) =:= cfg, "
    "is_integer(element(4, T)) -> [element(4, T)]; "
    "Walk(T) when is_tuple(T) -> lists:append([Walk(E) || E <- tuple_to_list(T)]); "
    "Walk(T) when is_map(T) -> lists:append([Walk(V) || V <- maps:values(T)]); "
    "Walk([H | R]) -> Walk(H) ++ Walk(R); Walk(_) -> [] end, "
    # ~w: a list of small numbers would print as text
    'lists:flatten(io_lib:format("~w", '
    "[lists:append([W(sys:get_state(P)) || P <- rabbit_channel:list_local()])]))."
)


@pytest.mark.parametrize(
    ("typed", "described"),
    [
        (
            "broker.credit_flow_default_credit={100,50}",
            "broker.credit_flow_default_credit={100,50}",
        ),
        (
            "broker.rabbit.credit_flow_default_credit= 20, 10",
            "broker.credit_flow_default_credit={20,10}",
        ),
        ("Broker.quorum_commands_soft_limit=256", "broker.quorum_commands_soft_limit=256"),
        ("broker.collect_statistics_interval=5000", "broker.collect_statistics_interval=5000"),
        ("broker.reconnect", "broker.reconnect"),
    ],
)
def test_a_broker_change_parses_to_its_canonical_words(typed: str, described: str) -> None:
    change = parse_change(typed)
    assert change.setting is Setting.BROKER and change.value is None
    assert change.describe() == described
    assert parse_change(change.describe()) == change  # the words travel and read back
    assert schedule_step(30, typed).change == change


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("broker", "a broker change is broker.KEY=VALUE"),
        ("broker.", "a broker change is broker.KEY=VALUE"),
        ("broker.heartbeat=10", "unknown broker setting 'heartbeat'; flowdeck sets: credit_flow"),
        ("broker.credit_flow_default_credit=100", "credit_flow_default_credit is {InitialCredit"),
        ("broker.credit_flow_default_credit={50,100}", "must be 1..InitialCredit"),
        ("broker.quorum_commands_soft_limit=0", "a whole number 1..1000000, got '0'"),
        ("broker.collect_statistics_interval=5s", "a whole number 100..3600000 ms, got '5s'"),
    ],
)
def test_a_bad_broker_change_says_what_is_wanted(typed: str, said: str) -> None:
    with pytest.raises(SpecError, match=re.escape(said)) as caught:
        parse_change(typed)
    assert caught.value.field == "broker"
    with pytest.raises(SpecError):
        Change(Setting.BROKER)


def _spec(name: str, **fields: object) -> RunSpec:
    values: dict[str, object] = {
        "name": "broker-change",
        "queue_pattern": f"{name}-%d",
        "publishers": 1,
        "consumers": 1,
        "rate": 50,
        "prefetch": 50,
        "duration": 8,
        "workers": 0,
    }
    values.update(fields)
    return RunSpec(**values)  # type: ignore[arg-type]


@pytest.mark.broker
@pytest.mark.timeout(120)
async def test_refused_on_the_shared_broker_and_nothing_changes(
    shared_uri: str, management_url: str, unique_name: str
) -> None:
    broker = Broker.parse(shared_uri, management_url=management_url)
    with pytest.raises(SpecError, match=r"schedule step at 3 s: broker\.reconnect refused"):
        Controller(
            _spec(unique_name, schedule=(schedule_step(3, "broker.reconnect"),)), broker=broker
        )
    controller = Controller(_spec(unique_name), broker=broker, drain_seconds=1, cleanup=True)
    events, _ = collect_updates(controller)
    await controller.start()
    try:
        with pytest.raises(SpecError) as caught:
            controller.request(parse_change("broker.quorum_commands_soft_limit=7"))
        said = caught.value.message
        assert "\n" not in said and "is not a node flowdeck runs, so nothing was changed" in said
        assert said.startswith("broker.quorum_commands_soft_limit=7 refused: ")
        # nothing asked, nothing pending, no phase
        assert not [e for e in events if e.kind is EventKind.CHANGE_REQUESTED]
        assert controller.pending == () and controller.summary is None
    finally:
        summary = await controller.stop()
    assert summary.phases == 2  # the start and the drain: the refused change opened none


@pytest.fixture(scope="module")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    """A private node started with a broker setting, as `broker start --set` starts one."""
    started = private_broker(rabbit_settings={"credit_flow_default_credit": "100, 50"})
    yield started
    private_broker.discard(started)


def _env(node: LocalBroker, key: str) -> str:
    return "".join(node.rabbitmqctl("eval", f"application:get_env(rabbit, {key}).").split())


def _soft_limits(node: LocalBroker) -> set[int]:
    """The soft limits the node's channels to quorum queues have (the run's publisher's and
    consumer's)."""
    return {int(n) for n in re.findall(r"\d+", node.rabbitmqctl("eval", SOFT_LIMITS))}


async def _until(what: Callable[[], object], limit: float = 120.0) -> None:
    """Until ``what()`` holds, or ``limit`` seconds: a bound, not a speed. A look through
    rabbitmqctl boots an Erlang VM (~1 s quiet, up to 10 s with both cores busy, where 30 s
    was three looks and the run's channels had not yet been seen)."""
    began = time.monotonic()
    # asked off the loop: the run's own clients and collectors share it (workers=0)
    while not await asyncio.to_thread(what) and time.monotonic() - began < limit:
        await asyncio.sleep(0.2)


@pytest.mark.slow
@pytest.mark.private_broker
@pytest.mark.timeout(420)
async def test_a_live_change_takes_effect_on_the_node_and_opens_its_phase(
    node: LocalBroker, unique_name: str, tmp_path: Path
) -> None:
    # set at its start
    assert await asyncio.to_thread(_env, node, "credit_flow_default_credit") == "{ok,{100,50}}"
    broker = Broker.parse(
        node.uri,
        management_url=node.management_url,
        statistics_interval=node.stats_interval_ms / 1000,
        private=True,
        local=LocalNodes(node),
    )
    # A bound, not the run's length: the test stops the run when its changes are read back.
    # Each read back is a rabbitmqctl call that boots an Erlang VM (~1 s quiet, up to 10 s
    # with both cores busy); a fixed 40 s run could end before the last change was made.
    spec = _spec(unique_name, queue_type="quorum", confirms=True, inflight=20, duration=300)
    controller = Controller(
        spec, broker=broker, drain_seconds=2, cleanup=True, recording=RunRecording(tmp_path)
    )
    events, _ = collect_updates(controller)

    def said(kind: EventKind, text: str) -> list[RunEvent]:
        return [e for e in events if e.kind is kind and text in e.message]

    await controller.start()
    try:
        await _until(lambda: _soft_limits(node))
        # the run's channels, at RabbitMQ's default
        assert await asyncio.to_thread(_soft_limits, node) == {32}
        asked = controller.request(parse_change("broker.quorum_commands_soft_limit=7"))
        await _until(lambda: said(EventKind.PHASE, "broker.quorum_commands_soft_limit=7"))
        # read back from the node
        assert await asyncio.to_thread(_env, node, "quorum_commands_soft_limit") == "{ok,7}"
        (done,) = [e for e in events if e.change_id == asked and e.kind is EventKind.INFO]
        assert "set on 1 node (was 32)" in done.message and "broker.reconnect" in done.message
        assert done.detail["before"] == {node.nodename: "32"}
        assert done.detail["after"] == {node.nodename: "7"}
        assert done.detail["offer"] == "broker.reconnect"
        applied = said(EventKind.CHANGE_APPLIED, "broker.quorum_commands_soft_limit=7")
        assert applied and applied[0].change_id == asked
        # the run's open channels keep their limit until they reconnect
        assert await asyncio.to_thread(_soft_limits, node) == {32}
        controller.request(parse_change("broker.reconnect"))
        await _until(lambda: said(EventKind.INFO, "broker.reconnect: closed"))
        (closed,) = said(EventKind.INFO, "broker.reconnect: closed")
        assert "closed 2 of the run's connections on 1 node" in closed.message
        await _until(lambda: _soft_limits(node) == {7})
        # their new channels took the new limit
        assert await asyncio.to_thread(_soft_limits, node) == {7}
        assert said(EventKind.PHASE, "broker.reconnect")

        # the credit flow credit: set, read back, and the restart it needs is offered
        controller.request(parse_change("broker.credit_flow_default_credit={20,10}"))
        await _until(lambda: said(EventKind.PHASE, "broker.credit_flow_default_credit"))
        assert await asyncio.to_thread(_env, node, "credit_flow_default_credit") == "{ok,{20,10}}"
        (credit,) = said(EventKind.INFO, "broker.credit_flow_default_credit={20,10} set")
        assert "(was {100,50})" in credit.message and "restart" in credit.message
        assert "stalls in flow" in credit.message  # 20 < the queues' more-credit-after 50
        assert credit.detail["offer"] == "fault restart 1"
        assert node.rabbit_settings["credit_flow_default_credit"] == "{20,10}"  # kept
    finally:
        summary = await controller.stop()
    assert summary.outcome == "stopped", summary.errors
    # recorded as phases, which read back (replay) like any change's
    assert summary.session_dir is not None
    session = open_session(Path(summary.session_dir))
    assert session.phases == 5  # start, the soft limit, the reconnect, the credit, the drain
    phases = [e.message for e in session.events if e.kind is EventKind.PHASE]
    assert phases[1:] == [
        "phase 1: broker.quorum_commands_soft_limit=7",
        "phase 2: broker.reconnect",
        "phase 3: broker.credit_flow_default_credit={20,10}",
    ]
    assert session.ticks()[-1].phase == "broker.credit_flow_default_credit={20,10}"
