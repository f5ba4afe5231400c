"""Snapshot tests of the dashboard with fixed data (pytest-textual-snapshot).

Update the stored snapshots after a deliberate change with ``pytest --snapshot-update``
and look at the SVGs it writes before committing them.
"""

from __future__ import annotations

from flowdeck.engine.change import Change, Setting
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens.live import LiveScreen
from tests.tui.fakes import T0, FakeControl, make_sample


def scripted_run(fake: FakeControl, *, alarm: bool) -> None:
    """90 seconds: a sweep step at 30 s, an operator change at 60 s, broker samples."""
    for second in range(1, 91):
        if second == 30:
            fake.request(Change(Setting.INFLIGHT, 50), "schedule")
            fake.apply_pending()
        if second == 60:
            fake.request(Change(Setting.INFLIGHT, 200))
            fake.apply_pending()
        fake.emit_tick()
        if second % 5 == 0:
            fake.emit(make_sample(T0 + second, queues=12, mem_alarm=alarm and second >= 85))
    fake.request(Change(Setting.PREFETCH, 50))  # left pending on purpose


def snapshot_app(alarm: bool) -> tuple[FlowdeckApp, FakeControl]:
    fake = FakeControl()
    return FlowdeckApp(control=fake), fake


async def settle(pilot: object, fake: FakeControl, alarm: bool) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    screen = app.screen
    assert isinstance(screen, LiveScreen)
    screen.history.clock = T0 + 90
    scripted_run(fake, alarm=alarm)
    await charts_drawn(pilot)


async def charts_drawn(pilot: object) -> None:
    """Let the queued ticks and redraws run; charts paint as they are drawn, no threads."""
    await pilot.pause()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


def test_dashboard_80x24_with_memory_alarm(snap_compare: object) -> None:
    app, fake = snapshot_app(alarm=True)

    async def run_before(pilot: object) -> None:
        await settle(pilot, fake, alarm=True)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)  # type: ignore[operator]


def test_dashboard_160x48_queues_tab(snap_compare: object) -> None:
    app, fake = snapshot_app(alarm=False)

    async def run_before(pilot: object) -> None:
        await settle(pilot, fake, alarm=False)
        await pilot.press("q")  # type: ignore[attr-defined]
        await charts_drawn(pilot)

    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)  # type: ignore[operator]


def test_dashboard_intended_latency_basis(snap_compare: object) -> None:
    app, fake = snapshot_app(alarm=False)

    async def run_before(pilot: object) -> None:
        await settle(pilot, fake, alarm=False)
        await pilot.press("l")  # type: ignore[attr-defined]
        await charts_drawn(pilot)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)  # type: ignore[operator]
