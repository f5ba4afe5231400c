"""What the connected broker honours of a spec (engine/honoured.py): one line per setting
its version ignores or rejects, by RabbitMQ's release notes; a rejected setting refuses the
run before anything is declared."""

from __future__ import annotations

import httpx
import pytest

from flowdeck.collectors import Broker
from flowdeck.engine import topology
from flowdeck.engine.controller import Controller
from flowdeck.engine.errors import SpecError
from flowdeck.engine.honoured import broker_version_tuple, unhonoured
from flowdeck.engine.presets import PRESETS
from flowdeck.engine.spec import RunSpec

QUORUM_IN_MEMORY = RunSpec(queue_type="quorum", queue_args={"x-max-in-memory-length": 0})
LAZY = RunSpec(lazy=True)
MIRRORED = RunSpec(mirroring=2)
TRANSIENT = RunSpec(durable=False)
MASTER_LOCATOR = RunSpec(leader_locator="balanced")


def said(spec: RunSpec, version: str) -> list[tuple[str, str]]:
    return [(line.verdict, line.setting) for line in unhonoured(spec, version)]


@pytest.mark.parametrize(
    ("spec", "version", "expected"),
    [
        (QUORUM_IN_MEMORY, "3.8.3", []),  # the seed's broker acts on it
        (QUORUM_IN_MEMORY, "3.10.8", [("ignores", "x-max-in-memory-length = 0")]),
        (QUORUM_IN_MEMORY, "4.1.0", [("ignores", "x-max-in-memory-length = 0")]),
        (LAZY, "3.11.20", []),
        (LAZY, "3.12.0", [("ignores", "lazy mode (x-queue-mode = lazy)")]),
        (LAZY, "4.3.0", [("rejects", "x-queue-mode = lazy")]),
        (MIRRORED, "3.13.7", []),
        (MIRRORED, "4.0.2", [("rejects", "classic queue mirroring (mirroring = 2)")]),
        (TRANSIENT, "4.2.1", []),
        (TRANSIENT, "4.3.0", [("rejects", "transient non-exclusive queues (durable = false)")]),
        (MASTER_LOCATOR, "4.3.0", [("rejects", "x-queue-master-locator = min-masters")]),
        (RunSpec(), "4.3.0", []),  # a plain durable classic queue acts everywhere
        (QUORUM_IN_MEMORY, "", []),  # a version that does not read: nothing guessed
    ],
)
def test_each_rule_by_version(spec: RunSpec, version: str, expected: list[tuple[str, str]]) -> None:
    assert said(spec, version) == expected


def test_a_line_says_the_version_the_setting_and_why() -> None:
    (line,) = unhonoured(PRESETS["bench2"], "3.10.8")
    assert line.describe("3.10.8") == (
        "RabbitMQ 3.10.8 ignores x-max-in-memory-length = 0 (since 3.10): quorum queues keep "
        "every message body on disk; the seed's 3.8 setting is kept in the spec for the "
        "record and changes nothing here"
    )
    assert line.detail("3.10.8")["verdict"] == "ignores"
    assert broker_version_tuple("4.3.0-rc.1") == (4, 3, 0)


@pytest.mark.broker
@pytest.mark.timeout(60)
async def test_a_rejected_setting_refuses_the_run_before_anything_is_declared(
    shared_uri: str, management_url: str, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared broker is 3.10.8: its version is given as 4.3.0 (no such broker here)."""

    async def version_43(uri: str) -> str:
        return "4.3.0"

    monkeypatch.setattr(topology, "broker_version", version_43)
    spec = RunSpec(
        name="honoured",
        queue_pattern=f"{unique_name}-%d",
        durable=False,
        lazy=True,
        duration=5,
        workers=0,
    )
    controller = Controller(spec, broker=Broker.parse(shared_uri, management_url=management_url))
    with pytest.raises(SpecError) as caught:
        await controller.start()
    message = caught.value.message
    assert message.startswith("RabbitMQ 4.3.0 rejects x-queue-mode = lazy (since 4.3)")
    assert "; RabbitMQ 4.3.0 rejects transient non-exclusive queues" in message
    queue = httpx.get(
        f"{management_url}/api/queues/%2F/{spec.queue_name(0)}", auth=("guest", "guest")
    )
    assert queue.status_code == 404  # nothing declared
