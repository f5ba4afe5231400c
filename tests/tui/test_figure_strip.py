"""The figure strip and the state word: current figures with their ages, and a state that
says BLOCKED while the broker blocks the publishers, never ``publishing``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.progress import Tick
from flowdeck.figures.trend import sustained_peak
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.model import RunHistory, run_state
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.widgets.figure_strip import FigureStrip, figures
from flowdeck.tui.widgets.settings_bar import SettingsBar
from tests.tui.fakes import T0, FakeControl
from tests.tui.sweep_fakes import SETTINGS, sample_at, sweep_updates
from tests.tui.test_live_pilot import text_of


def ticks_until(second: float, *, stall_at: float | None = None) -> RunHistory:
    history = RunHistory()
    for update in sweep_updates(stall_at=stall_at):
        if isinstance(update, Tick):
            if update.elapsed > second:
                break
            history.add_tick(update)
        elif isinstance(update, RunEvent):
            history.add_event(update)
        elif update.taken_at - T0 <= second:
            history.add_broker(update)
    return history


def test_each_figure_carries_the_age_of_its_data() -> None:
    history = ticks_until(30)
    history.clock = T0 + 31.5  # the last tick and the last broker poll were at 30 s
    cells = {cell.name: cell for cell in figures(history)}
    assert cells["publish"].value == "2000/s"
    assert cells["consume"].value == "1999/s"
    assert cells["e2e p50"].value == "3.00 ms"
    assert cells["e2e p99"].value == "9.00 ms"
    assert cells["pending"].value == "120"
    assert cells["queue depth"].value == "124 →"
    assert cells["blocked"].value == "0/8"
    assert cells["publish"].age == pytest.approx(1.5)
    # The broker computed its figures a second before that poll.
    assert cells["queue depth"].age == pytest.approx(2.5)
    assert cells["queue depth"].age_text(wide=True) == "2.5s"
    assert cells["queue depth"].age_text(wide=False) == "2s"


def test_the_state_word_is_true() -> None:
    history = ticks_until(20)
    assert run_state(history, SETTINGS).word == "publishing"
    blocked = ticks_until(42, stall_at=41)
    state = run_state(blocked, SETTINGS)
    assert state.word == "BLOCKED by memory alarm on rabbit@sweep (4 of 8 connections)"
    assert state.severity == "error"
    assert run_state(history, replace(SETTINGS, paused=True)).word == "paused"
    history.add_event(RunEvent(T0 + 21, EventKind.DRAIN, "publishing stopped"))
    assert run_state(history, SETTINGS).word == "draining"


def test_sustained_peak_is_a_held_rate_not_a_burst() -> None:
    steady = [3000.0] * 20
    burst = [*steady[:10], 0.0, 0.0, 15000.0, 3100.0, *steady[:6]]
    assert sustained_peak(burst) == 3000.0  # not 15000: one second is a burst
    assert sustained_peak(steady) == 3000.0
    assert sustained_peak([*steady[:4], 3500.0, 3400.0, 3600.0, 3300.0, 3450.0]) == 3300.0
    assert sustained_peak([10.0, 20.0]) == 10.0
    assert sustained_peak([]) is None


async def test_strip_and_settings_bar_during_an_alarm() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        screen.history.clock = T0 + 42
        for update in sweep_updates(stall_at=41):
            if isinstance(update, Tick) and update.elapsed > 42:
                break
            fake.emit(update)
        fake.emit(sample_at(T0 + 42, mem_alarm=True))
        await pilot.pause()
        await pilot.pause()
        bar = text_of(screen.query_one(SettingsBar))
        assert "BLOCKED by memory alarm on rabbit@sweep" in bar
        assert "publishing" not in bar
        strip = screen.query_one(FigureStrip)
        cells = {cell.name: cell for cell in figures(screen.history)}
        assert cells["blocked"].value == "4/8"
        assert cells["publish"].value == "0/s"
        assert strip.size.height == 2


# -- snapshots -----------------------------------------------------------------------------


def alarm_app() -> tuple[FlowdeckApp, FakeControl]:
    fake = FakeControl()
    return FlowdeckApp(control=fake), fake


async def show_alarm(pilot: object, fake: FakeControl) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    app.screen.history.clock = T0 + 42.4
    for update in sweep_updates(stall_at=41):
        if isinstance(update, Tick) and update.elapsed > 42:
            break
        fake.emit(update)
    fake.emit(sample_at(T0 + 42, mem_alarm=True))
    await pilot.pause()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


def test_figure_strip_blocked_160x48(snap_compare: object) -> None:
    app, fake = alarm_app()

    async def run_before(pilot: object) -> None:
        await show_alarm(pilot, fake)

    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)  # type: ignore[operator]


def test_figure_strip_blocked_80x24(snap_compare: object) -> None:
    app, fake = alarm_app()

    async def run_before(pilot: object) -> None:
        await show_alarm(pilot, fake)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)  # type: ignore[operator]
