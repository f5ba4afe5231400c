"""The cockpit against the real controller on the shared broker: in the Pilot, and the real
app in tmux read back with ``capture-pane``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.recording.reader import list_sessions, open_session
from flowdeck.engine.spec import RunSpec
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.screens.summary import SummaryScreen
from flowdeck.tui.widgets.settings_bar import SettingsBar

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def small_spec(uri: str, name: str, duration: float = 40.0) -> RunSpec:
    return RunSpec(
        name="tui-real",
        uri=uri,
        queues=1,
        queue_pattern=f"{name}-%d",
        durable=False,
        publishers=1,
        rate=200.0,
        consumers=1,
        inflight=10,
        prefetch=50,
        duration=duration,
        workers=0,
    )


async def wait_for(pilot: object, condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {seconds} s")
        await pilot.pause(0.2)  # type: ignore[attr-defined]


async def test_inflight_key_reaches_the_real_engine(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    from flowdeck.engine.controller import Controller
    from flowdeck.engine.run_recording import RunRecording

    spec = small_spec(shared_uri, unique_name)
    control = Controller(
        spec, broker=Broker.parse(shared_uri), recording=RunRecording(tmp_path), cleanup=True
    )
    requested: list[Change] = []
    original = control.request

    def spy(change: Change, source: str = "operator") -> int:
        requested.append(change)
        return original(change, source)

    control.request = spy  # type: ignore[method-assign]
    app = FlowdeckApp(control=control)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        await wait_for(pilot, lambda: screen.history.last_tick is not None)
        await pilot.press("I")
        assert requested == [Change(Setting.INFLIGHT, 20)]
        bar = screen.query_one(SettingsBar)
        await wait_for(
            pilot,
            lambda: "in-flight 20" in str(bar.render()) and "pending" not in str(bar.render()),
        )
        tick = screen.history.last_tick
        assert tick is not None
        await wait_for(pilot, lambda: (screen.history.last_tick or tick).settings.inflight == 20)
        await pilot.press("s", "y")
        await wait_for(pilot, lambda: isinstance(app.screen, SummaryScreen), 60)
        summary = app.screen.summary  # type: ignore[attr-defined]
        assert summary.safety.published > 0
        assert summary.safety.lost == 0
        assert summary.session_dir and Path(summary.session_dir).is_dir()


class SharedBrokerAsPrivateNode:
    """Stands in for the private node the launcher starts when the spec has no uri: the
    shared broker, said to collect statistics every second as flowdeck's own nodes do."""

    stats_interval_ms = 1000
    running = True
    pid = None  # not a process flowdeck started: the provisioner registers nothing
    prometheus_port = 15692

    def __init__(self, name: str) -> None:
        from tests.conftest import SHARED_MANAGEMENT_URL, SHARED_URI

        self.uri = SHARED_URI
        self.management_url = SHARED_MANAGEMENT_URL

    def start(self) -> SharedBrokerAsPrivateNode:
        return self

    def stop(self) -> None:
        pass


async def test_private_node_statistics_interval_is_shown(
    unique_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard says the interval the node really collects at, not the 5 s default."""
    from flowdeck.collectors import provisioner as provisioner_module
    from flowdeck.tui import launcher
    from flowdeck.tui.widgets.gauges import BrokerGauges

    monkeypatch.setattr(provisioner_module, "LocalBroker", SharedBrokerAsPrivateNode)
    spec = replace(small_spec("", unique_name), workers=0)
    provisioner = provisioner_module.Provisioner()
    prepared = launcher.prepare_run(spec, tmp_path, provisioner=provisioner)
    app = FlowdeckApp(control=prepared.control)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        gauges = screen.query_one(BrokerGauges)
        await wait_for(pilot, lambda: "(management, age" in str(gauges.border_title))
        assert "stats every 1s" in str(gauges.border_title)
        await screen.control.stop("test done")


def capture(session: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True
    ).stdout


def wait_screen(session: str, condition: Callable[[str], bool], seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while True:
        screen = capture(session)
        if condition(screen):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"screen never showed it within {seconds} s:\n{screen}")
        time.sleep(0.5)


@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_real_app_in_tmux(
    shared_uri: str, management_url: str, unique_name: str, tmp_path: Path
) -> None:
    spec_file = tmp_path / "run.toml"
    spec = replace(small_spec(shared_uri, unique_name, 60.0), workers=1)
    import tomli_w

    values = {k: v for k, v in spec.to_mapping().items() if k not in ("schedule", "queue_args")}
    spec_file.write_text(tomli_w.dumps(values))
    flowdeck = Path(sys.executable).parent / "flowdeck"
    session = f"flowdeck-{unique_name}"
    # The tmux server inherits the test process's C environment, where curses may have set
    # COLUMNS=80 LINES=24; Textual would believe them over the 160x48 pane.
    # No --sessions-dir: the cockpit records where `flowdeck run` does by default.
    sessions = tmp_path / "sessions"
    command = (
        f"env -u COLUMNS -u LINES FLOWDECK_SESSIONS_DIR={sessions} "
        f"{flowdeck} cockpit --spec {spec_file} --launch"
    )
    # remain-on-exit: should the cockpit end early (one fresh-clone run saw its pane close
    # after the stop, and the tmux server with it), its last screen stays to be read
    subprocess.run(
        [
            *("tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command),
            *(";", "set-option", "-t", session, "remain-on-exit", "on"),
        ],
        check=True,
    )
    try:
        running = wait_screen(session, lambda s: "phase 0" in s and "msg/s" in s, 90)
        assert "in-flight 10" in running
        subprocess.run(["tmux", "send-keys", "-t", session, "I"], check=True)
        applied = wait_screen(
            session, lambda s: "in-flight 20 " in s and "pending" not in s.split("\n")[1], 30
        )
        assert "inflight=20" in applied  # the event log shows the change
        subprocess.run(["tmux", "send-keys", "-t", session, "s"], check=True)
        wait_screen(session, lambda s: "Stop the run now?" in s, 10)
        subprocess.run(["tmux", "send-keys", "-t", session, "y"], check=True)
        summary = wait_screen(session, lambda s: "session recorded in" in s, 60)
        assert "stopped by operator" in summary
        (recorded,) = list_sessions(sessions)
        assert "session recorded in" in summary and recorded.path.name in summary
        assert recorded.outcome == "stopped"
        assert open_session(recorded.path).totals().published > 0
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        httpx.delete(f"{management_url}/api/queues/%2F/{unique_name}-1", auth=("guest", "guest"))
