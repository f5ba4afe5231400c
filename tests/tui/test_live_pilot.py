"""Pilot tests: keys steer the (fake) run, and the screen shows each change pending, then
in effect once the run reports it."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from flowdeck.engine.change import Change, Setting
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.widgets.alarm_banner import AlarmBanner
from flowdeck.tui.widgets.event_log import EventLog
from flowdeck.tui.widgets.gauges import BrokerGauges
from flowdeck.tui.widgets.queue_table import QueueTable
from flowdeck.tui.widgets.settings_bar import SettingsBar
from tests.tui.fakes import T0, FakeControl, make_sample


def text_of(widget: object) -> str:
    return str(widget.render())  # type: ignore[attr-defined]


def rich_text(renderable: object, width: int = 120) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def started(pilot: object, fake: FakeControl, seconds: int = 3) -> LiveScreen:
    app = pilot.app  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    screen = app.screen
    assert isinstance(screen, LiveScreen)
    screen.history.clock = T0 + seconds
    fake.emit_tick(seconds)
    await pilot.pause()  # type: ignore[attr-defined]
    return screen


async def test_inflight_key_sends_the_change_and_shows_it_pending_then_in_effect() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await started(pilot, fake)
        bar = screen.query_one(SettingsBar)
        assert "in-flight 100" in text_of(bar)

        await pilot.press("I")
        await pilot.pause()
        assert fake.requests == [Change(Setting.INFLIGHT, 200)]
        assert "in-flight 100 → 200 pending 0/2" in text_of(bar)

        fake.apply_pending()
        fake.emit_tick()
        await pilot.pause()
        shown = text_of(bar)
        assert "in-flight 200" in shown
        assert "pending" not in shown
        log = screen.query_one(EventLog)
        assert log.shown == 2  # requested, then in effect


async def test_every_steering_key_reaches_the_run() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 36)) as pilot:
        await started(pilot, fake)
        for key in ("i", "P", "r", "U", "c", "space", "n"):
            await pilot.press(key)
            await pilot.pause()
            fake.apply_pending()
        assert fake.requests == [
            Change(Setting.INFLIGHT, 50),
            Change(Setting.PREFETCH, 200),
            Change(Setting.RATE, 250),
            Change(Setting.PUBLISHERS, 5),  # +1 resolved against 4 by the controller
            Change(Setting.CONSUMERS, 3),
            Change(Setting.PAUSE),
        ]
        assert fake.skipped == 1
        fake.emit_tick()
        await pilot.pause()
        shown = text_of(app.screen.query_one(SettingsBar))
        assert "PAUSED" in shown
        assert "publishers 5" in shown and "consumers 3" in shown


@pytest.mark.slow
async def test_exact_value_prompt_validates_before_sending() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, fake)
        await pilot.press("equals_sign")
        await pilot.pause()
        await pilot.press(*"prefetch=70000")
        await pilot.pause()
        problem = app.screen.query_one("#problem")
        assert "prefetch must be 0..65535, got 70000" in text_of(problem)
        await pilot.press("enter")
        await pilot.pause()
        assert fake.requests == []  # refused in the prompt, nothing sent
        for _ in range(5):
            await pilot.press("backspace")
        await pilot.press(*"60", "enter")
        await pilot.pause()
        assert fake.requests == [Change(Setting.PREFETCH, 60)]


@pytest.mark.slow
async def test_change_the_run_refuses_is_shown_not_sent() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, fake)
        await pilot.press("equals_sign")
        await pilot.press(*"ack_every=500", "enter")
        await pilot.pause()
        assert fake.requests == []
        assert "ack_every (500) must not exceed prefetch (100)" in str(
            [n.message for n in app._notifications]
        )


async def test_mark_phase_sends_the_label() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, fake)
        await pilot.press("m")
        await pilot.press(*"after warm-up", "enter")
        await pilot.pause()
        assert fake.requests == [Change(Setting.MARK, label="after warm-up")]


async def test_memory_alarm_shows_the_banner_and_clears() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await started(pilot, fake)
        banner = screen.query_one(AlarmBanner)
        assert not banner.display
        fake.emit(make_sample(T0 + 3, mem_alarm=True))
        await pilot.pause()
        assert banner.display
        assert "MEMORY ALARM" in text_of(banner)
        fake.emit(make_sample(T0 + 4))
        await pilot.pause()
        assert not banner.display


async def test_stale_source_is_marked_with_its_reason() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await started(pilot, fake)
        fake.emit(make_sample(T0 + 3, stale_reason="management API timed out after 5 s"))
        await pilot.pause()
        gauges = screen.query_one(BrokerGauges)
        assert gauges.has_class("-stale")
        assert "STALE management: management API timed out after 5 s" in str(gauges.border_title)
        fake.emit(make_sample(T0 + 3))
        await pilot.pause()
        assert not gauges.has_class("-stale")
        assert "age 2.0s" in str(gauges.border_title)


@pytest.mark.slow
async def test_stop_asks_then_shows_the_summary() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, fake)
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("y")
        for _ in range(10):
            await pilot.pause()
        assert fake.stopped
        from flowdeck.tui.screens.summary import SummaryScreen, summary_renderable

        assert isinstance(app.screen, SummaryScreen)
        shown = rich_text(summary_renderable(app.screen.summary))
        assert "stopped by operator" in shown
        assert "never confirmed nor nacked" in shown
        assert "/tmp/flowdeck-sessions/20240101-000000-fake" in shown


@pytest.mark.slow
async def test_help_lists_every_key_of_the_table() -> None:
    from flowdeck.tui.keys import KEY_TABLE

    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await started(pilot, fake)
        await pilot.press("question_mark")
        await pilot.pause()
        from flowdeck.tui.screens.help import HelpScreen, help_table

        assert isinstance(app.screen, HelpScreen)
        text = rich_text(help_table(app.screen.rows))
        for row in KEY_TABLE:
            assert row.description in text


async def test_queue_table_sorts_a_thousand_queues_and_keeps_the_cursor_on_its_queue() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot, fake)
        fake.emit(make_sample(T0 + 3, queues=1000))
        await pilot.press("q")
        table = app.screen.query_one(QueueTable)
        table.focus()
        await pilot.pause()
        assert table.queue_names[:2] == ["fake-1000", "fake-999"]  # most ready first
        assert "ready▼" in rich_text(table.render_line(0).text)

        await pilot.press("down", "down")
        assert table.queue_names[table.cursor_row] == "fake-998"
        await pilot.press("O")  # fewest ready first: the cursor follows fake-998
        assert table.queue_names[0] == "fake-1"
        assert table.queue_names[table.cursor_row] == "fake-998"
        assert table.scroll_offset.y > 900  # scrolled to keep it on screen

        await pilot.click(QueueTable, offset=(3, 0))  # the "queue" header
        assert (table.sort_column, table.sort_reverse) == ("name", False)
        assert table.queue_names[:3] == ["fake-1", "fake-10", "fake-100"]

        fake.emit(make_sample(T0 + 4, queues=10))  # 990 queues gone
        await pilot.pause()
        assert len(table.queue_names) == 10
        assert table.cursor_row < 10


async def test_the_flow_tab_says_where_the_messages_wait() -> None:
    """Queue depth low, latency up: the flow tab (f) shows the messages sent and not yet
    taken in by the broker, the wait they explain and the publishers in credit flow."""
    from dataclasses import replace

    from flowdeck.tui.widgets.pipeline import PipelinePanel, render_pipeline

    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await started(pilot, fake, seconds=10)
        # The ticks' clients had sent 10 x 1,900 by 10 s; the broker took in 10,000 by the
        # poll's figures (1 s before 10 s: 17,100 sent then) at 1,000 msg/s.
        sample = replace(
            make_sample(T0 + 10, age=1.0, queues=1),
            run_accepted=10_000,
            run_accept_rate=1000.0,
            run_publishers=4,
            run_publishers_flow=3,
            connections_flow=3,
            channels_flow=3,
        )
        fake.emit(sample)
        await pilot.press("f")
        await pilot.pause()
        text = rich_text(render_pipeline(screen.history.pipeline(), screen.history))
        assert screen.query_one(PipelinePanel).display
        assert "before the queues" in text
        assert "most messages wait before the queues: 7,100 ≈ 7.1 s at 1,000 msg/s" in text
        assert "(3 of 4 publishers in credit flow)" in text
        assert "3 of 4 publishers · 3 connections, 3 channels in flow" in text
