"""Keys typed ahead are never lost: a burst that opens a screen and types into it reaches
that screen's input, in order (``=inflight=1`` typed in one burst used to leave the change
prompt empty: the keys after ``=`` came before the prompt had its input focused).

In the Pilot the burst goes to the app's driver at once, as a terminal delivers it; the
tmux test types it into the real app against a real run on the shared broker."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from textual import events
from textual.app import App
from textual.keys import _character_to_key
from textual.widgets import Input

from flowdeck.engine.change import Change, Setting
from flowdeck.engine.spec import RunSpec
from flowdeck.tui.app import KEY_HOLD_LIMIT, FlowdeckApp
from flowdeck.tui.screens.launch import LaunchScreen, field_id
from flowdeck.tui.screens.prompt import ChangePrompt
from tests.tui.fakes import FakeControl
from tests.tui.test_live_pilot import started
from tests.tui.test_real_run import capture, small_spec, wait_screen


def burst(app: App[object], *keys: str) -> None:
    """Hand ``keys`` (characters, or key names such as ``enter``) to the app in one go,
    with no pause for the app to catch up between them."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        name = _character_to_key(key) if len(key) == 1 and not key.isalnum() else key
        char = key if len(key) == 1 else {"enter": "\r", "tab": "\t"}.get(key)
        event = events.Key(name, char)
        event.set_sender(app)
        driver.send_message(event)


async def settle(pilot: object, seconds: float = KEY_HOLD_LIMIT + 10.0) -> None:
    """Until every key of the burst has been handed on and handled. Bounded by the app's
    own progress, not by the burst's total time: with both cores busy the launch form took
    1-3 s a key (36 keys: 50 s and more), and a 30 s bound on the whole burst read a form
    whose keys were still being handed on. Each step (a key handed on or handled) must come
    within ``seconds``: longer than the app lets a key wait for a stuck screen."""
    app = pilot.app  # type: ignore[attr-defined]
    deadline = time.monotonic() + seconds
    quiet = 0
    state: tuple[int, object] = (-1, None)
    while quiet < 10 and time.monotonic() < deadline:
        await pilot.pause(0.05)  # type: ignore[attr-defined]
        busy = app._held_keys or app._key_in_flight is not None
        quiet = 0 if busy else quiet + 1
        step = (len(app._held_keys), app._key_in_flight)
        if step != state:
            state, deadline = step, time.monotonic() + seconds
    assert not busy, (
        f"{len(app._held_keys)} typed keys still held after {seconds:.0f} s: in flight "
        f"{app._key_in_flight!r}, handed on {len(app._released)}, timer "
        f"{app._release_timer!r}, screen ready {app.ready_for_keys()}, held for "
        f"{time.monotonic() - app._held_since:.1f} s, the screen's queue "
        f"{[type(m).__name__ for m in app.screen._message_queue.values][:20]}"
    )


async def test_change_typed_in_one_burst_reaches_the_prompt() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, fake)
        burst(app, "=", *"inflight=1", "enter")
        await settle(pilot)
        assert fake.requests == [Change(Setting.INFLIGHT, 1)]
        assert not isinstance(app.screen, ChangePrompt)


async def test_two_bursts_keep_their_order_across_screens() -> None:
    """A mark and a change typed back to back: each prompt gets its own keys."""
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, fake)
        burst(app, "m", *"warm", "enter", "=", *"prefetch=60", "enter", "I")
        await settle(pilot)
        assert fake.requests == [
            Change(Setting.MARK, label="warm"),
            Change(Setting.PREFETCH, 60),
            Change(Setting.INFLIGHT, 200),
        ]


async def test_a_key_handed_on_that_never_comes_back_holds_the_rest_only_so_long() -> None:
    """A key handed on whose message is lost must not hold the keys typed after it for
    good: past KEY_HOLD_LIMIT it is given up on and the next goes on (the rest of a burst
    once waited behind such a key until the operator gave up)."""
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, fake)
        lost = events.Key("x", "x")
        app._released[id(lost)] = time.monotonic() - 1.0  # handed on a second ago
        burst(app, "=", *"inflight=1", "enter")
        await pilot.pause(1.0)
        # "=" found nothing held and went on; the eleven after it wait behind the lost key
        assert len(app._held_keys) == 11 and fake.requests == []
        app._released[id(lost)] = time.monotonic() - KEY_HOLD_LIMIT - 1.0  # past it
        await settle(pilot)
        assert fake.requests == [Change(Setting.INFLIGHT, 1)]
        assert not app._released


@pytest.mark.slow
async def test_prompt_history_walks_back_with_up() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, fake)
        for text in ("inflight=50", "prefetch=60"):
            await pilot.press("equals_sign", *text, "enter")
            await pilot.pause()
        await pilot.press("equals_sign", *"rate=")
        await pilot.pause()
        field = app.screen.query_one("#change-input", Input)
        await pilot.press("up")
        assert field.value == "prefetch=60"
        await pilot.press("up", "up")  # stops at the oldest
        assert field.value == "inflight=50"
        await pilot.press("down", "down")  # back to what was being typed
        assert field.value == "rate="
        await pilot.press("up", "up", "enter")
        await pilot.pause()
        assert fake.requests[-1] == Change(Setting.INFLIGHT, 50)
        assert app.change_history == ["inflight=50", "prefetch=60", "inflight=50"]


@pytest.mark.slow
async def test_form_typed_ahead_while_the_launch_screen_opens() -> None:
    """Tab to the publishers field and type 500 before the screen is up: the form gets
    500 (it used to get nothing: "publishers must be a number, got ''")."""
    spec = RunSpec(name="typed-ahead", uri="amqp://guest:guest@127.0.0.1:9/%2F", publishers=2)
    app = FlowdeckApp(spec=spec)
    async with app.run_test(size=(100, 30)) as pilot:
        first = app.screen
        assert isinstance(first, LaunchScreen)
        await settle(pilot)
        chain = first.focus_chain
        target = first.query_one(f"#{field_id('publishers')}")
        tabs = chain.index(target) - chain.index(first.focused)  # type: ignore[arg-type]
        assert tabs > 0
        app.push_screen(LaunchScreen(spec))  # opening now: no widget has the focus yet
        burst(app, *(["tab"] * tabs), *"500")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LaunchScreen) and screen is not first
        assert screen.query_one(f"#{field_id('publishers')}", Input).value == "500"
        assert screen.validate() is not None
        assert screen.spec is not None and screen.spec.publishers == 500


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_burst_typed_in_tmux_applies_the_change(
    shared_uri: str, management_url: str, unique_name: str, tmp_path: Path
) -> None:
    import tomli_w

    spec = replace(small_spec(shared_uri, unique_name, 60.0), workers=1)
    values = {k: v for k, v in spec.to_mapping().items() if k not in ("schedule", "queue_args")}
    spec_file = tmp_path / "run.toml"
    spec_file.write_text(tomli_w.dumps(values))
    flowdeck = Path(sys.executable).parent / "flowdeck"
    session = f"flowdeck-{unique_name}"
    command = (
        f"env -u COLUMNS -u LINES {flowdeck} cockpit --spec {spec_file} --launch "
        f"--sessions-dir {tmp_path / 'sessions'}"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", command], check=True
    )
    try:
        running = wait_screen(session, lambda s: "phase 0" in s and "in-flight 10" in s, 90)
        assert "in-flight 10 " in running
        subprocess.run(["tmux", "send-keys", "-t", session, "=inflight=1", "Enter"], check=True)
        applied = wait_screen(
            session, lambda s: "in-flight 1 " in s and "pending" not in s.split("\n")[1], 30
        )
        assert "inflight=1" in applied  # the event log has the change
        assert "empty change" not in capture(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        httpx.delete(f"{management_url}/api/queues/%2F/{unique_name}-1", auth=("guest", "guest"))
