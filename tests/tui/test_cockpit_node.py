"""One cockpit session, one private node: every launch reuses the node the first started,
and quitting the app stops it (no node is left behind, none is registered)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from flowdeck.collectors import registered_nodes
from flowdeck.engine.presets import DEFAULT_PRESET, preset
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.launcher import prepare_run

pytestmark = [pytest.mark.private_broker, pytest.mark.slow, pytest.mark.timeout(240)]


async def test_three_launches_share_one_node_stopped_on_quit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "runtime"
    monkeypatch.setenv("FLOWDECK_RUNTIME_DIR", str(runtime))
    spec = replace(preset(DEFAULT_PRESET, 0.1), uri="", workers=0)
    app = FlowdeckApp(spec=spec, sessions_root=tmp_path / "sessions")
    async with app.run_test(size=(160, 48)):
        launches = [
            await asyncio.to_thread(
                prepare_run, spec, tmp_path / "sessions", provisioner=app.provisioner
            )
            for _ in range(3)
        ]
        nodes = {id(launch.broker) for launch in launches}
        node = launches[0].broker
        assert node is not None and node.running
        assert len(nodes) == 1, "each launch started a node of its own"
        assert app.provisioner.reused == 2
        uris = {launch.control.uri for launch in launches}  # type: ignore[attr-defined]
        assert uris == {node.uri}
        listed = registered_nodes()
        assert [entry.nodename for entry in listed] == [node.nodename]
        entry = json.loads(next(runtime.glob("*.json")).read_text())
        assert entry["owner_pid"] == psutil.Process().pid
        beam = node.beam_pid()
        assert beam is not None
    # quitting the app stopped the node and its registration
    assert not node.running
    assert not psutil.pid_exists(beam) or psutil.Process(beam).status() == psutil.STATUS_ZOMBIE
    assert registered_nodes() == []
    assert list(runtime.glob("*.json")) == []
