"""Replaying a recorded session: the frames hold what was recorded, and the replay screen
plays, pauses and seeks through them with the live dashboard's panels."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis, encode, new_histogram, record
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.recording.recorder import Recorder
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.replay import load_replay
from flowdeck.tui.screens.replay import ReplayScreen
from flowdeck.tui.widgets.alarm_banner import AlarmBanner
from flowdeck.tui.widgets.settings_bar import SettingsBar
from tests.tui.fakes import T0, make_sample

SECONDS = 20
RATE = 400  # messages each second before the change, per worker


def latency_blob(base_us: int) -> bytes:
    histogram = new_histogram()
    for i in range(100):
        record(histogram, base_us + i * 10)
    return encode(histogram)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A 20 s two-worker session: in-flight 100 → 200 at 10 s, a memory alarm 14-16 s."""
    spec = RunSpec(
        name="replay-me",
        inflight=100,
        prefetch=100,
        publishers=2,
        consumers=2,
        rate=400.0,
        duration=float(SECONDS),
    )
    recorder = Recorder(tmp_path, spec, flush_seconds=0.0)
    recorder.start(T0)
    recorder.event(RunEvent(T0, EventKind.RUN_STARTED, "run started", detail={"workers": 2}))
    recorder.event(
        RunEvent(T0, EventKind.PHASE, "phase 0: start", detail={"index": 0, "label": "start"})
    )
    totals = {0: Counters(), 1: Counters()}
    for second in range(1, SECONDS + 1):
        inflight = 100 if second <= 10 else 200
        for worker in (0, 1):
            step = RATE if second <= 10 else RATE * 2
            totals[worker] = totals[worker] + Counters(
                published=step, confirmed=step, consumed=step, acked=step
            )
            recorder.snapshot(
                ClientSnapshot(
                    worker=worker,
                    at=T0 + second - 0.5,
                    interval=1.0,
                    counters=totals[worker],
                    pending_confirms=inflight // 2,
                    unacked=10,
                    connections=2,
                    blocked=0,
                    settings=Settings.of(
                        inflight=inflight,
                        prefetch=100,
                        ack_every=1,
                        rate=400.0,
                        publishers=1,
                        consumers=1,
                    ),
                    target_rate=400.0,
                    latency={(LatencyKind.END_TO_END, SendBasis.ACTUAL): latency_blob(1000)},
                )
            )
        if second == 10:
            # As the controller records a change: what it sets, in the event's detail.
            change = {"setting": "inflight", "value": 200, "label": "", "source": "operator"}
            recorder.event(
                RunEvent(T0 + 9.9, EventKind.CHANGE_REQUESTED, "change #1", 1, detail=change)
            )
            recorder.event(
                RunEvent(
                    T0 + 10.2,
                    EventKind.CHANGE_APPLIED,
                    "change #1 in effect: inflight=200",
                    1,
                    detail=change,
                )
            )
            recorder.event(
                RunEvent(
                    T0 + 10.2,
                    EventKind.PHASE,
                    "phase 1: inflight=200",
                    1,
                    detail={"index": 1, "label": "inflight=200"},
                )
            )
        if second % 2 == 0:
            recorder.broker(make_sample(T0 + second - 0.2, mem_alarm=14 <= second <= 16))
    recorder.close("completed", {}, T0 + SECONDS, "duration reached")
    return recorder.session_dir


def test_frames_hold_what_was_recorded(recorded: Path) -> None:
    replay = load_replay(open_session(recorded))
    assert replay.name == "replay-me"
    assert len(replay.frames) == SECONDS
    ticks = [f.tick for f in replay.frames]
    assert all(t is not None for t in ticks)
    assert ticks[4].publish_rate == pytest.approx(2 * RATE)  # type: ignore[union-attr]
    assert ticks[15].publish_rate == pytest.approx(4 * RATE)  # type: ignore[union-attr]
    assert ticks[4].settings.inflight == 100  # type: ignore[union-attr]
    assert ticks[15].settings.inflight == 200  # type: ignore[union-attr]
    assert ticks[15].phase_index == 1 and ticks[15].phase == "inflight=200"  # type: ignore[union-attr]
    e2e = ticks[5].latency[(LatencyKind.END_TO_END, SendBasis.ACTUAL)]  # type: ignore[union-attr]
    assert e2e.count == 200 and 1.4 < e2e.p50 < 1.6
    assert sum(len(f.samples) for f in replay.frames) == SECONDS // 2
    assert [e.message for f in replay.frames for e in f.events][-1] == "phase 1: inflight=200"


@pytest.mark.slow
async def test_replay_screen_plays_pauses_and_seeks(recorded: Path) -> None:
    replay = load_replay(open_session(recorded))
    app = FlowdeckApp()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = ReplayScreen(replay, autoplay=False)
        await app.push_screen(screen)
        await pilot.pause()
        assert screen.position == 0
        await pilot.press("right")  # +10 s
        await pilot.pause()
        assert screen.position == 10
        bar = str(screen.query_one(SettingsBar).render())
        assert "in-flight 200" in bar
        assert not screen.query_one(AlarmBanner).display
        await pilot.press("right", "left")  # to the end (19), then back 10 s
        await pilot.pause()
        assert screen.position == 9
        screen.seek_to(14)
        await pilot.pause()
        assert screen.query_one(AlarmBanner).display  # the alarm replays too
        await pilot.press("home", "space")  # play from the start
        assert screen.playing
        await pilot.press("plus", "plus")  # x5: a frame every 200 ms
        for _ in range(100):
            await pilot.pause(0.05)
            if screen.position >= 2:
                break
        assert 2 <= screen.position < SECONDS - 1
        await pilot.press("space")  # pause
        paused_at = screen.position
        await pilot.pause(0.3)
        assert screen.position == paused_at
        await pilot.press("end")
        await pilot.pause()
        assert screen.position == SECONDS - 1
        header = str(screen.query_one("#run-header").render())
        assert "phase 1" in header
        # One clock: at the last frame it has reached the recording's length.
        assert "0:20 / 0:20" in header and header.count(" / ") == 1, header
        assert " at " not in header, header


@pytest.mark.slow
async def test_replay_shows_the_per_host_and_per_setting_tabs(recorded: Path) -> None:
    """The recording's two workers are two host rows at the replay's position, and the
    per-setting table judges the phases replayed so far, as they were live."""
    from textual.widgets import TabbedContent

    from flowdeck.tui.widgets.host_table import HostPanel
    from flowdeck.tui.widgets.setting_table import SettingTable, row_setting, varying_settings

    replay = load_replay(open_session(recorded))
    app = FlowdeckApp()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = ReplayScreen(replay, autoplay=False)
        await app.push_screen(screen)
        await pilot.pause()
        await pilot.press("end")
        await pilot.press("h")
        await pilot.pause()
        assert screen.query_one(TabbedContent).active == "hosts"
        rows = screen.query_one(HostPanel).rows
        assert [row.worker for row in rows] == [0, 1]
        assert all(row.publish_rate == 2 * RATE for row in rows), rows  # the last second
        await pilot.press("t")
        await pilot.pause()
        assert screen.query_one(TabbedContent).active == "verdicts"
        verdicts = screen.query_one(SettingTable).verdicts
        assert verdicts is not None
        varying = varying_settings(verdicts.rows)
        names = [row_setting(row, varying) for row in verdicts.rows]
        assert len(names) == 2 and "200" in names[1], names


@pytest.mark.slow
async def test_sessions_screen_lists_and_opens_a_replay(recorded: Path) -> None:
    from flowdeck.tui.screens.sessions import SessionsScreen

    app = FlowdeckApp(sessions_root=recorded.parent)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = SessionsScreen()
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert recorded.name in screen.infos
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        for _ in range(5):
            await pilot.pause()
        assert isinstance(app.screen, ReplayScreen)
        assert app.screen.replay.name == "replay-me"
