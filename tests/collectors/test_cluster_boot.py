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
    """A node whose first start fails with ``fails_with`` (when given) and leaves its data."""

    nodename: str
    base_dir: Path
    fails_with: str = ""
    running: bool = False
    starts: list[bool] = field(default_factory=list)  # each start: was its data there?

    def start(self, timeout: float) -> None:
        data = self.base_dir / "mnesia"
        self.starts.append(data.exists())
        data.mkdir(parents=True, exist_ok=True)
        if self.fails_with and len(self.starts) == 1:
            raise SourceError(
                f"private RabbitMQ node {self.nodename} exited while starting: "
                f"BOOT FAILED {self.fails_with}"
            )
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


def test_any_other_failure_is_raised(tmp_path: Path) -> None:
    nodes = stand_ins(tmp_path, {2: SCHEMA, 3: "{eaddrinuse}"})
    with pytest.raises(SourceError, match="exited while starting"):
        start(tmp_path, nodes)
    assert [len(node.starts) for node in nodes] == [1, 1, 1]  # not started again
