"""The node strip and the node key: one line per cluster node from the broker's per-node
figures (hidden for a single node), and ``k`` asking which node, confirming, and handing
the fault to the run (the same ``fault`` a schedule step calls).

Samples are synthetic (a real three-node cluster costs tens of seconds; the collector's
side is tests/collectors/test_cluster_live.py). The run is the cockpit's FakeControl with
the two members a run on a private cluster has: ``local_nodes`` and ``fault``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
from flowdeck.engine.change import NodeFault
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens.node_fault import NodeFaultPrompt
from flowdeck.tui.widgets.node_strip import NodeStrip, short_names
from tests.tui.fakes import T0, FakeControl, make_sample
from tests.tui.test_live_pilot import rich_text, started

NAMES = [f"flowdeck-run-4242-1-n{n}@localhost" for n in (1, 2, 3)]


def cluster_sample(taken_at: float, *, down: str = "", alarm: str = "") -> BrokerSample:
    """Three nodes, n1 leading two queues and n2 one; ``down`` and ``alarm`` name a node."""
    nodes = tuple(
        NodeSample(name=name, running=False)
        if name == down
        else NodeSample(
            name=name,
            mem_used=200_000_000 * n,
            mem_limit=1_000_000_000,
            mem_alarm=name == alarm,
            disk_free=40_000_000_000,
            disk_free_limit=50_000_000,
            sockets_used=2 * n,
            sockets_total=900,
        )
        for n, name in enumerate(NAMES, 1)
    )
    leaders = [NAMES[0], NAMES[0], NAMES[1]]
    queues = tuple(
        QueueSample(f"q{i}", "/", "quorum", 0, 0, 1, leader=leader, members=tuple(NAMES))
        for i, leader in enumerate(leaders)
    )
    return BrokerSample(
        source="management",
        taken_at=taken_at,
        figures_at=taken_at - 0.5,
        statistics_interval=1.0,
        nodes=nodes,
        queues=queues,
    )


@dataclass
class ClusterRun(FakeControl):
    """FakeControl on a private cluster: its nodes (up or not) and the faults asked."""

    running: dict[str, bool] = field(default_factory=dict)
    faults: list[tuple[NodeFault, str]] = field(default_factory=list)
    #: The nodes run in network namespaces (a partition can be asked), and which are cut.
    partitionable: bool = False
    cut: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        super().__init__()
        self.running = dict.fromkeys(NAMES, True)

    @property
    def local_nodes(self) -> object:
        return SimpleNamespace(
            nodes=[SimpleNamespace(nodename=n, running=up) for n, up in self.running.items()],
            can_partition=self.partitionable,
            cut_off=lambda: self.cut,
        )

    def fault(self, fault: NodeFault, source: str = "operator") -> int:
        self.faults.append((fault, source))
        return 1


def strip_text(strip: NodeStrip) -> str:
    return rich_text(strip.content, width=100)


def test_short_names_drop_what_every_node_shares() -> None:
    assert list(short_names(NAMES).values()) == ["n1", "n2", "n3"]
    assert short_names(["rabbit@host1", "rabbit@host2"]) == {
        "rabbit@host1": "host1",
        "rabbit@host2": "host2",
    }
    assert short_names(["rabbit@only"]) == {"rabbit@only": "rabbit"}


async def test_the_strip_shows_each_node_and_hides_for_one_node() -> None:
    fake = ClusterRun()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await started(pilot, fake)
        strip = screen.query_one(NodeStrip)
        fake.emit(make_sample(T0 + 3))  # one node: the broker panel says it all
        await pilot.pause()
        assert not strip.has_class("-cluster") and strip.region.height == 0

        fake.emit(cluster_sample(T0 + 3, alarm=NAMES[2]))
        await pilot.pause()
        assert strip.has_class("-cluster") and strip.region.height == 3
        lines = strip_text(strip).splitlines()
        assert " ".join(lines[0].split()) == "n1 ● up mem 20% of 1.0 GB disk ok sockets 2 leaders 2"
        assert " ".join(lines[1].split()) == "n2 ● up mem 40% of 1.0 GB disk ok sockets 4 leaders 1"
        assert " ".join(lines[2].split()) == "n3 ● up MEMORY ALARM disk ok sockets 6 leaders 0"

        fake.emit(cluster_sample(T0 + 4, down=NAMES[1]))
        await pilot.pause()
        lines = strip_text(strip).splitlines()
        assert lines[1].split() == ["n2", "✖", "DOWN"]
        assert lines[3].strip() == "1 of 3 nodes down"
        assert "MEMORY ALARM" not in strip_text(strip)


@pytest.mark.slow
async def test_the_node_key_asks_which_node_confirms_and_hands_on_the_fault() -> None:
    fake = ClusterRun()
    fake.running[NAMES[2]] = False
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot, fake)
        await pilot.press("k")
        await pilot.pause()
        prompt = app.screen
        assert isinstance(prompt, NodeFaultPrompt)
        question = str(prompt.query_one("#question").content)
        assert "1  n1  up" in question and "3  n3  DOWN" in question

        await pilot.press("2")
        await pilot.pause()
        question = str(prompt.query_one("#question").content)
        assert question.startswith(f"Kill n2 ({NAMES[1]}) with SIGKILL")
        assert fake.faults == []  # nothing before the confirmation
        await pilot.press("y")
        await pilot.pause()
        assert fake.faults == [(NodeFault("kill", "2"), "operator")]

        await pilot.press("k", "3")  # a node that is down is started again
        await pilot.pause()
        assert "Start n3" in str(app.screen.query_one("#question").content)
        await pilot.press("y")
        await pilot.pause()
        assert fake.faults[-1] == (NodeFault("start", "3"), "operator")

        await pilot.press("k", "1", "n")  # no: nothing happens
        await pilot.pause()
        assert len(fake.faults) == 2 and not isinstance(app.screen, NodeFaultPrompt)


@pytest.mark.slow
async def test_on_a_namespace_cluster_the_node_key_also_cuts_a_node_off_and_heals_it() -> None:
    fake = ClusterRun(partitionable=True)
    fake.cut = frozenset({NAMES[0]})
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot, fake)
        await pilot.press("k")
        await pilot.pause()
        question = str(app.screen.query_one("#question").content)
        assert "cut off the network (a partition)" in question
        assert "1  n1  CUT OFF" in question and "2  n2  up" in question

        await pilot.press("2")
        await pilot.pause()
        question = str(app.screen.query_one("#question").content)
        assert question.startswith(f"n2 ({NAMES[1]}): k kills it with SIGKILL")
        assert "p cuts it off the network" in question
        await pilot.press("y")  # neither k nor p: nothing yet
        await pilot.pause()
        assert fake.faults == [] and isinstance(app.screen, NodeFaultPrompt)
        await pilot.press("p")
        await pilot.pause()
        assert fake.faults == [(NodeFault("partition", "2"), "operator")]

        await pilot.press("k", "3", "k")  # k on a running node: killed, as before
        await pilot.pause()
        assert fake.faults[-1] == (NodeFault("kill", "3"), "operator")

        await pilot.press("k", "1")  # a cut node is healed, once confirmed
        await pilot.pause()
        assert str(app.screen.query_one("#question").content).startswith(f"Heal n1 ({NAMES[0]})")
        await pilot.press("y")
        await pilot.pause()
        assert fake.faults[-1] == (NodeFault("heal", "1"), "operator")
        assert not isinstance(app.screen, NodeFaultPrompt)


async def test_the_node_key_says_why_not_on_a_broker_flowdeck_does_not_run() -> None:
    fake = FakeControl()  # a run without local nodes (a remote broker, an attached run)
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot, fake)
        await pilot.press("k")
        await pilot.pause()
        assert not isinstance(app.screen, NodeFaultPrompt)
        said = [n.message for n in app._notifications]
        assert any("not a node or cluster flowdeck runs" in m for m in said), said
