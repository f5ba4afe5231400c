"""The per-setting table readable where the answer lives: p50 and p99 never cut (in the
dashboard's tab at any width), the full-screen view on ``T`` with every verdict's reason and
the recommendation's whole reasoning, the run summary's per-phase table and recommendation,
and the chart of msg/s and p99 against the swept setting with the phases that are not
candidates marked."""

from __future__ import annotations

from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.widgets import Static

from flowdeck.figures import Verdict
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.model import SettingVerdicts, setting_verdicts
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.screens.per_setting import PerSettingScreen, PerSettingView
from flowdeck.tui.screens.summary import SummaryScreen
from flowdeck.tui.widgets.latency_chart import milliseconds
from flowdeck.tui.widgets.setting_table import SettingTable
from flowdeck.tui.widgets.sweep_chart import (
    EXCLUDED_MARK,
    RECOMMENDED_MARK,
    chart_rows,
    sweep_chart,
)
from tests.tui.fakes import T0, FakeControl
from tests.tui.sweep_fakes import SweepPhase, knee_sweep, sweep_updates
from tests.tui.test_live_pilot import rich_text
from tests.tui.test_setting_table import fed


def backlog_sweep() -> tuple[SweepPhase, ...]:
    """No limit overloads the consumers (a backlog builds); in-flight 5 then drains it
    (consumers take twice what comes in: the backlog's throughput, at its latency); 50 and
    100 hold the target with millisecond p99s: the answer is 50, never the drain."""
    return (
        SweepPhase("start", 200, 2000.0, 1500.0, 900.0, 4000.0, 400),
        SweepPhase("inflight=5", 5, 900.0, 4000.0, 1500.0, 6500.0, 19),
        SweepPhase("inflight=50", 50, 1990.0, 1990.0, 3.0, 9.0, 120),
        SweepPhase("inflight=100", 100, 2000.0, 2000.0, 6.0, 21.0, 240),
    )


def backlog_verdicts() -> SettingVerdicts:
    return setting_verdicts(fed(sweep_updates(backlog_sweep(), transition=1)))


async def backlog_run(pilot: Any, fake: FakeControl) -> LiveScreen:
    """The live screen once the fake run has played the backlog sweep."""
    await pilot.pause()
    live = pilot.app.screen
    assert isinstance(live, LiveScreen)
    live.history.clock = T0 + 60
    for update in sweep_updates(backlog_sweep(), transition=1):
        fake.emit(update)
    await pilot.pause()
    return live


def test_the_backlog_sweep_is_judged_as_the_overload_regime() -> None:
    verdicts = backlog_verdicts()
    assert [row.verdict for row in verdicts.rows] == [
        Verdict.OVERLOADED,
        Verdict.DRAINING,
        Verdict.SUSTAINABLE,
        Verdict.SUSTAINABLE,
    ]
    assert verdicts.lines[0].startswith("recommended inflight=50:")


@pytest.mark.parametrize("sweep", [knee_sweep, backlog_sweep], ids=["knee", "backlog"])
def test_p50_and_p99_are_never_cut_at_any_width(sweep: object) -> None:
    """From the narrowest side column to a wide terminal, every row shows its p50 and p99
    whole (the setting and the verdict give up cells instead, with an ellipsis)."""
    verdicts = setting_verdicts(fed(sweep_updates(sweep(), transition=1)))  # type: ignore[operator]
    for width in range(38, 161, 3):
        text = rich_text(SettingTable.render_verdicts(verdicts, width=width), width=width)
        lines = text.splitlines()
        assert {"p50", "p99"} <= set(lines[0].split()), (width, lines[0])
        for n, row in enumerate(verdicts.rows, start=1):
            cells = lines[n].split()
            assert row.p50 is not None and row.p99 is not None
            assert milliseconds(row.p50) in cells and milliseconds(row.p99) in cells, (
                width,
                lines[n],
            )
            assert len(lines[n].rstrip()) <= width


def test_the_chart_marks_what_is_not_a_candidate() -> None:
    verdicts = backlog_verdicts()
    (swept,) = verdicts.sweeps
    rows = chart_rows(verdicts, swept)
    assert [(row.value, row.candidate, row.recommended) for row in rows] == [
        (5, False, False),
        (50, True, True),
        (100, True, False),
        (200, False, False),
    ]
    assert rows[0].verdict == "draining a backlog" and rows[-1].verdict == "overloaded"
    for width in (60, 78, 120):
        text = rich_text(sweep_chart(verdicts, swept, width), width=width)
        lines = {
            cells[0]: line
            for line in text.splitlines()
            if (cells := line.split()) and cells[0].isdigit()
        }
        assert EXCLUDED_MARK in lines["5"] and "draining a backlog" in text
        assert EXCLUDED_MARK in lines["200"] and "overloaded" in text
        assert RECOMMENDED_MARK in lines["50"]
        # the drain's msg/s and p99 run past the candidates' axes: drawn clipped
        assert lines["5"].count("»") == 2 and lines["200"].count("»") == 1
        assert "6.52 s" in lines["5"] and "9.02 ms" in lines["50"]


@pytest.mark.slow
async def test_full_screen_view_has_every_reason_and_the_whole_reasoning() -> None:
    """``T`` at 80x24: the per-setting table full screen with each row's verdict and its
    reason, the chart, and every line of the recommendation's reasoning; it scrolls, and
    follows the run."""
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(80, 24)) as pilot:
        live = await backlog_run(pilot, fake)
        await pilot.press("T")
        await pilot.pause()
        view = app.screen
        assert isinstance(view, PerSettingScreen)
        shown = view.query_one("#per-setting", Static).content
        assert isinstance(shown, PerSettingView)
        text = " ".join(rich_text(shown, width=78).split())
        verdicts = setting_verdicts(live.history)
        for row in verdicts.rows:
            assert " ".join(f"{row.verdict.value}: {row.reason}".split()) in text
        (swept,) = verdicts.sweeps
        for line in swept.recommendation.reasoning:
            assert " ".join(line.split()) in text
        assert "msg/s consumed and e2e p99 against inflight" in text
        scroll = view.query_one(VerticalScroll)
        assert scroll.max_scroll_y > 0  # more than a screen: it scrolls
        await pilot.press("end")
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is live


async def test_the_run_summary_shows_the_phases_and_the_recommendation() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(80, 24)) as pilot:
        await backlog_run(pilot, fake)
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("y")
        for _ in range(20):
            await pilot.pause(0.05)
            if isinstance(app.screen, SummaryScreen):
                break
        summary = app.screen
        assert isinstance(summary, SummaryScreen) and summary.verdicts is not None
        text = rich_text(summary.query_one("#summary", Static).content, width=78)
        assert "per phase" in text
        for row in summary.verdicts.rows:
            assert row.verdict.value in text
        (line,) = summary.verdicts.lines
        assert line.startswith("recommended inflight=50:")
        assert " ".join(line.split()) in " ".join(text.split())
        assert "msg/s consumed and e2e p99 against inflight" in text
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, PerSettingScreen) and not app.screen.follow


def test_per_setting_view_80x24(snap_compare: object) -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)

    async def run_before(pilot: object) -> None:
        await backlog_run(pilot, fake)
        await pilot.press("T")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)  # type: ignore[operator]


async def test_a_run_that_ends_under_the_full_view_shows_its_summary() -> None:
    """The view over a live run closes when the run ends: the summary takes the run's
    place (with the same figures, final), not the view's, so Escape goes back to launch."""
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(80, 24)) as pilot:
        await backlog_run(pilot, fake)
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(app.screen, PerSettingScreen)
        await fake.stop("duration reached")
        for _ in range(20):
            await pilot.pause(0.05)
            if isinstance(app.screen, SummaryScreen):
                break
        assert isinstance(app.screen, SummaryScreen)
        names = [type(screen).__name__ for screen in app.screen_stack]
        assert "PerSettingScreen" not in names and "LiveScreen" not in names
