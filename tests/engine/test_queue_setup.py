"""The seed's queue set-ups: mirrored classic queues by policy, quorum group size, leader
placement, and the combinations a broker's nodes cannot give refused in one line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from flowdeck.engine.errors import SpecError
from flowdeck.engine.spec import RunSpec
from flowdeck.engine.topology import check_queue_setup, mirroring_policy, queue_arguments


def test_quorum_queues_get_the_seed_arguments() -> None:
    spec = RunSpec(
        queue_type="quorum",
        quorum_size=3,
        leader_locator="balanced",
        queue_args={"x-max-in-memory-length": 0},
    )
    assert queue_arguments(spec) == {
        "x-queue-type": "quorum",
        "x-quorum-initial-group-size": 3,
        "x-queue-leader-locator": "balanced",
        "x-max-in-memory-length": 0,
    }
    classic = RunSpec(leader_locator="balanced")
    assert queue_arguments(classic) == {"x-queue-master-locator": "min-masters"}


def test_the_mirroring_policy_matches_exactly_the_runs_queues() -> None:
    spec = RunSpec(name="bench2", queues=3, queue_pattern="q.%d", mirroring=2)
    policy = mirroring_policy(spec)
    assert policy is not None
    name, body = policy
    assert name == "flowdeck-bench2-mirroring"
    assert body["definition"] == {"ha-mode": "exactly", "ha-params": 2, "ha-sync-mode": "automatic"}
    assert body["apply-to"] == "queues"
    pattern = re.compile(body["pattern"])
    assert [bool(pattern.match(q)) for q in ("q.1", "q.2", "q.3", "q.10", "qx1")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    assert mirroring_policy(RunSpec()) is None


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"mirroring": 2, "queue_type": "quorum"}, "mirroring applies to classic queues"),
        ({"mirroring": 1}, "mirroring = 1 is one copy"),
        ({"quorum_size": 3}, "quorum_size applies to quorum queues"),
        ({"leader_locator": "random"}, "leader_locator must be one of"),
    ],
)
def test_set_ups_that_make_no_sense_are_refused_by_the_spec(
    fields: dict[str, object], says: str
) -> None:
    with pytest.raises(SpecError, match=says):
        RunSpec(**fields)  # type: ignore[arg-type]


def test_replication_beyond_the_running_nodes_is_refused() -> None:
    check_queue_setup(RunSpec(mirroring=2), 3)
    check_queue_setup(RunSpec(queue_type="quorum", quorum_size=3), 3)
    with pytest.raises(SpecError, match="mirroring needs a cluster"):
        check_queue_setup(RunSpec(mirroring=2), 1)
    with pytest.raises(SpecError, match="mirroring = 3 copies needs as many nodes"):
        check_queue_setup(RunSpec(mirroring=3), 2)
    with pytest.raises(SpecError, match="quorum_size = 5 members needs as many nodes"):
        check_queue_setup(RunSpec(queue_type="quorum", quorum_size=5), 3)


@pytest.mark.broker
def test_mirroring_on_one_node_exits_2_in_one_line_before_anything_runs(shared_uri: str) -> None:
    result = subprocess.run(
        [
            *(sys.executable, "-m", "flowdeck.cli", "run", "--uri", shared_uri),
            *("--mirroring", "2", "--duration", "2", "--no-record", "--name", "mirror-refused"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "flowdeck: mirroring needs a cluster, and the broker runs 1 node: start one with "
        "`flowdeck broker start --nodes 3` or set mirroring = 0"
    ]
    assert "publishers" not in result.stdout.split("\n", 1)[-1]  # no progress line followed
