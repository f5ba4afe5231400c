"""A new private cluster's nodes boot at once, and one can lose a race with the others and
exit: the cluster starts it again, afresh when it joined nothing and on its own data when
it is in the cluster already. Stand-in nodes; the real boots are in test_cluster_live.py."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flowdeck.collectors import LocalCluster
from flowdeck.collectors.errors import SourceError

SCHEMA = "{schema_integrity_check_failed,[{table_attributes_mismatch,rabbit_queue}]}"
FLAGS = (
    '{incompatible_feature_flags,{not_active,"All replicas on diskfull nodes are not active '
    'yet",rabbit_queue,[n3]}}'
)


@dataclass
class StandIn:
    """A node whose first ``failing`` starts fail with ``fails_with`` (when given), leaving
    its data."""

    nodename: str
    base_dir: Path
    fails_with: str = ""
    failing: int = 1
    running: bool = False
    starts: list[bool] = field(default_factory=list)  # each start: was its data there?
    #: A node whose tables this one waits for while it boots (a joiner waits for the first).
    waits_for: StandIn | None = None

    def start(self, timeout: float) -> None:
        data = self.base_dir / "mnesia"
        self.starts.append(data.exists())
        data.mkdir(parents=True, exist_ok=True)
        if self.fails_with and len(self.starts) <= self.failing:
            time.sleep(0.05)
            raise SourceError(
                f"private RabbitMQ node {self.nodename} exited while starting: "
                f"BOOT FAILED {self.fails_with}"
            )
        if self.waits_for is not None:
            # a bound far inside the boot's own 10 s: its peer must be up again by then
            until = time.monotonic() + 3
            while not self.waits_for.running:
                if time.monotonic() > until:
                    raise SourceError(
                        f"private RabbitMQ node {self.nodename} did not start: "
                        "{timeout_waiting_for_tables,[rabbit_queue]}"
                    )
                time.sleep(0.01)
        self.running = True


def stand_ins(tmp_path: Path, fails: dict[int, str]) -> list[StandIn]:
    return [StandIn(f"n{n}@host", tmp_path / f"n{n}", fails.get(n, "")) for n in (1, 2, 3)]


def start(tmp_path: Path, nodes: list[StandIn]) -> None:
    cluster = LocalCluster(3, base_dir=tmp_path / "cluster")
    cluster._start_nodes(nodes, time.monotonic() + 10)  # type: ignore[arg-type]


def test_a_joiner_that_lost_the_schema_race_starts_again_afresh(tmp_path: Path) -> None:
    nodes = stand_ins(tmp_path, {2: SCHEMA})
    start(tmp_path, nodes)
    assert all(node.running for node in nodes)
    assert nodes[1].starts == [False, False]  # its tables removed before the second start
    assert nodes[0].starts == nodes[2].starts == [False]


def test_a_first_node_that_lost_the_feature_flags_race_starts_again_on_its_data(
    tmp_path: Path,
) -> None:
    nodes = stand_ins(tmp_path, {1: FLAGS})
    start(tmp_path, nodes)
    assert all(node.running for node in nodes)
    assert nodes[0].starts == [False, True]  # its data kept: the joiners are in its cluster


def test_the_first_node_starts_again_while_the_joiners_wait_for_its_tables(
    tmp_path: Path,
) -> None:
    """Seen on a slow 2-core machine: the first node lost the flags race, and its joiners
    waited for its tables until they gave up, because it was started again only once every
    node's boot had ended."""
    nodes = stand_ins(tmp_path, {1: FLAGS})
    for joiner in nodes[1:]:
        joiner.waits_for = nodes[0]
    start(tmp_path, nodes)
    assert all(node.running for node in nodes)
    assert [len(node.starts) for node in nodes] == [2, 1, 1]


def test_a_node_that_loses_a_race_each_time_is_given_up(tmp_path: Path) -> None:
    nodes = stand_ins(tmp_path, {2: SCHEMA})
    nodes[1].failing = 99
    with pytest.raises(SourceError, match="schema_integrity_check_failed"):
        start(tmp_path, nodes)
    assert len(nodes[1].starts) == 3  # the first start and two more


def test_any_other_failure_is_raised(tmp_path: Path) -> None:
    nodes = stand_ins(tmp_path, {2: SCHEMA, 3: "{eaddrinuse}"})
    with pytest.raises(SourceError, match="eaddrinuse"):
        start(tmp_path, nodes)
    assert len(nodes[2].starts) == 1  # not started again
    assert nodes[1].running  # the one that lost a race was, at once
