"""Consumers placed by their queue's leader (``consumer_node``): the order in which a client
tries the run's nodes, and the refusals that need no cluster. The live placement on a
private 3-node cluster is in tests/collectors/test_cluster_live.py."""

from __future__ import annotations

import pytest

from flowdeck.engine.errors import SpecError
from flowdeck.engine.spec import RunSpec
from flowdeck.engine.worker import node_order


def test_publishers_and_spread_consumers_go_round_robin_and_move_on_to_the_next_node() -> None:
    assert node_order("publisher", 0, 3) == [0, 1, 2]
    assert node_order("publisher", 4, 3) == [1, 2, 0]
    # leaders given, but the spec spreads consumers as publishers
    assert node_order("consumer", 4, 3, (0, 1, 2), "spread") == [1, 2, 0]
    assert node_order("publisher", 4, 3, (0, 1, 2), "off-leader") == [1, 2, 0]


def test_an_off_leader_consumer_tries_every_other_node_before_its_queues_leader() -> None:
    leaders = (0, 2)  # queue 0 led from node uri 0, queue 1 from node uri 2
    for consumer in range(12):
        leader = leaders[consumer % 2]
        order = node_order("consumer", consumer, 3, leaders, "off-leader")
        assert sorted(order) == [0, 1, 2]
        assert order[-1] == leader and leader not in order[:2]
    # the consumers of one queue take turns over the other nodes
    firsts = {node_order("consumer", c, 3, leaders, "off-leader")[0] for c in (0, 2, 4, 6)}
    assert firsts == {1, 2}


def test_a_leader_consumer_tries_its_queues_leader_first() -> None:
    assert node_order("consumer", 1, 3, (0, 2), "leader")[0] == 2
    assert node_order("consumer", 2, 3, (0, 2), "leader")[0] == 0


def test_a_single_node_has_nowhere_else_to_go() -> None:
    assert node_order("consumer", 3, 1, (0,), "off-leader") == [0]


def test_streams_take_no_consumer_placement() -> None:
    with pytest.raises(SpecError, match="consumer_node applies to classic and quorum"):
        RunSpec(queue_type="stream", consumer_node="off-leader", prefetch=10)
    with pytest.raises(SpecError, match="consumer_node must be one of spread, off-leader"):
        RunSpec(consumer_node="elsewhere")  # type: ignore[arg-type]
