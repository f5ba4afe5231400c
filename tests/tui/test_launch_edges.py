"""The cockpit's edges: the launch screen boots the run's worker processes while the
operator reads the form, a launch takes them, and the footer shows whole hints only."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from flowdeck.engine.recording.reader import list_sessions, open_session
from flowdeck.engine.spec import RunSpec
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.keys import HELP_BINDING
from flowdeck.tui.screens.launch import LaunchScreen
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.widgets.footer import FittingFooter

#: Longest a test waits for a worker to boot, a run to show data or stop.
LIMIT = 40.0


async def wait_for(pilot: object, condition: Callable[[], bool], seconds: float = LIMIT) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {seconds} s")
        await pilot.pause(0.05)  # type: ignore[attr-defined]


def one_worker_spec(uri: str, name: str) -> RunSpec:
    return RunSpec(
        name="tui-pooled",
        uri=uri,
        queues=1,
        queue_pattern=f"{name}-%d",
        durable=False,
        publishers=1,
        rate=100.0,
        consumers=1,
        duration=20,
        workers=1,
    )


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
async def test_a_launch_takes_the_workers_the_launch_screen_booted(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    app = FlowdeckApp(spec=one_worker_spec(shared_uri, unique_name), sessions_root=tmp_path)
    pool = app.worker_pool
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: pool.booted == 1)
        await pilot.press("ctrl+r")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, LiveScreen) and bool(app.screen.history.throughput),
        )
        assert (pool.taken, pool.missed) == (1, 0)
        live = app.screen
        assert isinstance(live, LiveScreen)
        summary = await live.control.stop("test: back to the launch screen")
        assert summary.safety.lost == 0
        await wait_for(pilot, lambda: live.finished)
        while not isinstance(app.screen, LaunchScreen):
            app.pop_screen()
            await pilot.pause(0.05)
        # Back on the launch screen: the next launch finds a worker booted again.
        await wait_for(pilot, lambda: pool.booted == 1)
        children = list(pool._idle)
        await pilot.press("ctrl+q")
    for child in children:
        child.process.join(10)
        assert not child.process.is_alive()


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
async def test_quit_with_a_run_going_records_the_run_as_stopped(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    spec = replace(one_worker_spec(shared_uri, unique_name), workers=0)
    app = FlowdeckApp(spec=spec, sessions_root=tmp_path)
    app.worker_pool.close()  # an in-process run: no worker processes to boot
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+r")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, LiveScreen) and bool(app.screen.history.throughput),
        )
        await pilot.press("ctrl+q")
    (session,) = list_sessions(tmp_path)
    # A quit used to leave the session "incomplete", as a crash does.
    assert session.outcome == "stopped", session
    assert open_session(session.path).manifest.stop_reason == "the cockpit was quit"


def footer_hints_fit(app: FlowdeckApp) -> list[str]:
    """The keys the footer shows; fails when a shown hint does not end inside it."""
    footer = app.screen.query_one(FittingFooter)
    for key in footer._hints():
        if key.display:
            assert footer.region.x <= key.region.x
            assert key.region.right <= footer.region.right, footer.shown
    return footer.shown


async def settled_hints(pilot: object, app: FlowdeckApp) -> list[str]:
    """The footer's hints once the footer has laid them out and stopped changing (it is
    composed again whenever the focus changes the screen's bindings)."""
    deadline = time.monotonic() + 10
    last: list[str] = []
    while time.monotonic() < deadline:
        await pilot.pause(0.2)  # type: ignore[attr-defined]
        shown = app.screen.query_one(FittingFooter).shown
        if shown and shown == last:
            return footer_hints_fit(app)
        last = shown
    footer = app.screen.query_one(FittingFooter)
    raise AssertionError(
        f"the footer did not settle: {last} focus={app.app_focus} ready={footer._bindings_ready} "
        f"children={list(footer.children)} screen={app.screen}"
    )


@pytest.mark.slow
async def test_the_footer_drops_whole_hints_from_the_end_at_80_columns() -> None:
    app = FlowdeckApp()
    app.worker_pool.close()  # nothing is launched here
    async with app.run_test(size=(160, 24)) as pilot:
        wide = await settled_hints(pilot, app)
        await pilot.resize_terminal(80, 24)
        narrow = await settled_hints(pilot, app)
        await pilot.resize_terminal(50, 24)
        narrowest = await settled_hints(pilot, app)
        await pilot.resize_terminal(160, 24)
        wide_again = await settled_hints(pilot, app)
    # Ranked: the hints shown are the first ones, ``?`` first of all.
    assert narrowest[0] == HELP_BINDING.key.split(",")[0]
    assert narrowest == narrow[: len(narrowest)] and narrow == wide[: len(narrow)]
    assert len(narrowest) < len(narrow) < len(wide)
    assert wide_again == wide
