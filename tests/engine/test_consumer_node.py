"""Consumers placed by their queue's leader (``consumer_node``) and clients placed at random
(``connection_allocation``): the order in which a client tries the run's nodes, and the
refusals that need no cluster. The live placement on a private 3-node cluster is in
tests/collectors/test_cluster_live.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flowdeck.cli.run import clients_line
from flowdeck.collectors import Broker
from flowdeck.engine.controller import Controller
from flowdeck.engine.errors import SpecError
from flowdeck.engine.perftest import spec_from_perftest
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


def test_random_allocation_draws_each_clients_node_from_the_seed_alone() -> None:
    # The same seed, role and client number draw the same node in any worker or rerun;
    # every node is drawn, and the client still moves on to the next one after it.
    orders = {c: node_order("publisher", c, 3, allocation_seed=42) for c in range(300)}
    assert orders == {c: node_order("publisher", c, 3, allocation_seed=42) for c in range(300)}
    for order in orders.values():
        assert order == [(order[0] + i) % 3 for i in range(3)]
    firsts = [order[0] for order in orders.values()]
    assert all(60 <= firsts.count(node) <= 140 for node in range(3)), firsts
    assert firsts != [c % 3 for c in range(300)]  # not the round-robin
    other = [node_order("publisher", c, 3, allocation_seed=43)[0] for c in range(300)]
    assert other != firsts
    consumers = [node_order("consumer", c, 3, allocation_seed=42)[0] for c in range(300)]
    assert consumers != firsts  # a role draws its own
    # A consumer placed by its queue's leader still goes by the leader.
    assert node_order("consumer", 1, 3, (0, 2), "leader", allocation_seed=42)[0] == 2


def test_a_random_allocation_run_picks_its_seed_and_keeps_it_in_its_spec() -> None:
    uri = "amqp://guest:guest@127.0.0.1:5672/%2F,amqp://guest:guest@127.0.0.1:5673/%2F"
    spec = RunSpec(uri=uri, connection_allocation="random")
    controller = Controller(spec, broker=Broker.parse(uri))
    assert controller.spec.allocation_seed > 0
    assert controller.spec.redacted()["allocation_seed"] == controller.spec.allocation_seed
    given = Controller(replace(spec, allocation_seed=7), broker=Broker.parse(uri))
    assert given.spec.allocation_seed == 7  # a rerun of the recorded spec draws alike
    assert "connections to random nodes (allocation_seed 7)" in clients_line(given.spec)
    plain = Controller(RunSpec(uri=uri), broker=Broker.parse(uri))
    assert plain.spec.allocation_seed == 0
    with pytest.raises(SpecError, match="set connection_allocation = random"):
        RunSpec(allocation_seed=3)


def test_perftest_connection_allocation_is_random_unless_the_line_says_round_robin() -> None:
    two = "-H amqp://u:p@one:5672,amqp://u:p@two:5673"
    assert spec_from_perftest(two).connection_allocation == "random"
    spec = spec_from_perftest(f"{two} -cal round-robin")
    assert spec.connection_allocation == "round-robin"
    with pytest.raises(SpecError, match="-cal sideways"):
        spec_from_perftest(f"{two} -cal sideways")
