"""The per-setting table: phases judged live by the report's own verdict rules.

The same phases go to the cockpit (as the ticks, snapshots and broker samples its screen
receives) and to the report's own functions (``PhaseTable`` on the same snapshots, then
``figures.verdict``): the msg/s figures, the verdicts, their reasons and the
recommendation line must be the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

import pytest

from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.progress import Tick
from flowdeck.engine.snapshot import Settings
from flowdeck.figures import PhaseFigures, Verdict
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.model import (
    BASIS_REPORT,
    BASIS_TICKS,
    RunHistory,
    SettingRow,
    SettingVerdicts,
    human_count,
    setting_verdicts,
)
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.screens.per_setting import reasons_table
from flowdeck.tui.widgets.setting_table import BEST_MARK, NOT_JUDGED, SettingTable
from tests.tui.fakes import T0, FakeControl
from tests.tui.sweep_fakes import (
    Update,
    knee_sweep,
    report_figures,
    sweep_updates,
)
from tests.tui.test_live_pilot import rich_text


def fed(updates: Iterable[Update]) -> RunHistory:
    history = RunHistory()
    for update in updates:
        if isinstance(update, Tick):
            history.add_tick(update)
        elif isinstance(update, RunEvent):
            history.add_event(update)
        else:
            history.add_broker(update)
    return history


def printed(rate: float) -> str:
    """A msg/s as the table prints it."""
    return human_count(round(rate))


def test_msg_s_verdicts_and_recommendation_are_the_reports() -> None:
    phases = knee_sweep()
    table = setting_verdicts(fed(sweep_updates(phases, transition=1)))
    run = report_figures(sweep_updates(phases, transition=1))
    figures: tuple[PhaseFigures, ...] = run.phases

    assert len(table.rows) == len(figures) == len(phases)
    for row, report in zip(table.rows, figures, strict=True):
        assert row.basis == BASIS_REPORT
        assert (row.publish, row.confirm, row.consume) == (
            report.figure("publish_rate_mean"),
            report.figure("confirm_rate_mean"),
            report.figure("consume_rate_mean"),
        )
        # latency: the phase's histograms merged, as the report's per-phase p50 and p99
        merged = report.percentiles((LatencyKind.END_TO_END, SendBasis.ACTUAL))
        assert merged is not None and (row.p50, row.p99) == (merged.p50, merged.p99)
        assert (row.verdict, row.reason) == (report.verdict, report.reason)
    # The phase's first second ran at half rate: the report's msg/s counts it.
    assert printed(table.rows[2].publish) == "1917" and printed(table.rows[2].consume) == "1916"
    assert [row.verdict for row in table.rows] == [
        Verdict.BACK_PRESSURED,
        Verdict.BACK_PRESSURED,
        Verdict.SUSTAINABLE,
        Verdict.SUSTAINABLE,
        Verdict.SUSTAINABLE,
    ]
    (sweep,) = run.sweeps
    assert table.lines == (sweep.recommendation.reasoning[-1],)
    assert table.lines[0].startswith("recommended inflight=50:")
    assert table.rows[table.best or 0].settings.inflight == 50


def test_a_stall_and_its_catch_up_count_as_the_report_counts_them() -> None:
    """A two-second alarm stall and a burst at three times the target inside the in-flight
    100 phase: its msg/s is the report's (the stall and the burst counted), its settled
    figure the steady 2000, the alarm makes it overloaded, and the recommendation does not
    move."""
    phases = knee_sweep()
    stall = 3 * 12 + 4.0  # the fifth second of the fourth phase
    table = setting_verdicts(fed(sweep_updates(phases, stall_at=stall, transition=1)))
    figures = report_figures(sweep_updates(phases, stall_at=stall, transition=1)).phases
    stalled = table.rows[3]
    assert stalled.settings.inflight == 100
    assert stalled.consume == figures[3].figure("consume_rate_mean")
    assert printed(stalled.consume) == "1917"  # (1000 + 8 × 2000 + 6000) / 12 s
    assert stalled.steady_consume == pytest.approx(2000.0)
    wide = rich_text(SettingTable.render_verdicts(table, width=120), width=120)
    assert "settled" in wide and "settled: median cons/s after" in wide
    assert stalled.steady == 12 - 3
    assert stalled.verdict is Verdict.OVERLOADED
    assert stalled.reason.startswith("memory or disk alarm for ")
    assert table.lines[0].startswith("recommended inflight=50:")


def test_ticks_without_snapshots_say_what_their_figures_are() -> None:
    """An attached run's ticks come without the workers' snapshots: the table shows medians
    of the per-second rates and says so under it."""
    bare = (
        Tick(**{**{f: getattr(u, f) for f in u.__dataclass_fields__}, "snapshots": ()})
        if isinstance(u, Tick)
        else u
        for u in sweep_updates(transition=1)
    )
    table = setting_verdicts(fed(bare))
    assert {row.basis for row in table.rows} == {BASIS_TICKS}
    assert printed(table.rows[2].consume) == "1999"
    text = rich_text(SettingTable.render_verdicts(table, width=160), width=160)
    assert "medians of each phase's seconds" in text and "no client snapshots" in text


def test_the_drain_is_a_row_of_its_own_and_not_part_of_the_sweep() -> None:
    def with_drain() -> Iterator[Update]:
        ticks = list(sweep_updates(knee_sweep()[:3], transition=1))
        yield from ticks
        last = [u for u in ticks if isinstance(u, Tick)][-1]
        yield RunEvent(last.at, EventKind.DRAIN, "publishing stopped (duration reached)")
        (snapshot,) = last.snapshots
        for second in range(1, 4):
            # the workers go on reporting while consumers take what is left
            consumed = replace(
                snapshot.counters, consumed=snapshot.counters.consumed + 100 * second
            )
            yield Tick(
                **{
                    **{f: getattr(last, f) for f in last.__dataclass_fields__},
                    "at": last.at + second,
                    "elapsed": last.elapsed + second,
                    "publish_rate": 0.0,
                    "confirm_rate": 0.0,
                    "target_rate": 0.0,
                    "snapshots": (
                        replace(
                            snapshot,
                            at=snapshot.at + second,
                            counters=consumed,
                            target_rate=0.0,
                            latency={},
                        ),
                    ),
                }
            )

    table = setting_verdicts(fed(with_drain()))
    assert [row.verdict for row in table.rows][-1] is Verdict.DRAIN
    assert table.rows[-1].label == "drain"
    assert table.lines[0].startswith("recommended inflight=50:")


def test_no_sweep_yet_says_how_to_get_one() -> None:
    table = setting_verdicts(fed(sweep_updates(knee_sweep()[:1], transition=1)))
    assert table.lines == ()
    text = rich_text(SettingTable.render_verdicts(table, width=120))
    assert "no sweep yet" in text


def test_a_phase_without_client_figures_yet_reads_not_judged() -> None:
    """The run's first moments: its first phase is open and no snapshot has come, so the
    phase has no verdict. The table (and the full view's reasons) say so; the cockpit of a
    real run crashed here drawing the table."""
    row = SettingRow(
        index=0, label="start", settings=Settings.of(inflight=20, prefetch=50, rate=200.0),
        seconds=0, steady=0, publish=0.0, confirm=0.0, consume=0.0, p50=None, p99=None,
        depth_slope=None, verdict=None, reason="no client figures yet",
    )  # fmt: skip
    verdicts = SettingVerdicts((row,), None)
    text = rich_text(SettingTable.render_verdicts(verdicts, width=120))
    assert NOT_JUDGED in text
    assert f"{NOT_JUDGED}: no client figures yet" in rich_text(reasons_table(verdicts))


async def test_table_tab_highlights_the_recommended_row() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        screen.history.clock = T0 + 60
        for update in sweep_updates(transition=1):
            fake.emit(update)
        await pilot.pause()
        await pilot.press("t")
        await pilot.pause()
        table = screen.query_one(SettingTable)
        # the tab's layout settled (bounded): on a busy machine the first width read was a
        # passing one, and the verdict column was cut ('sustaina…')
        widths = [table.size.width]
        for _ in range(100):
            await pilot.pause(0.05)
            widths.append(table.size.width)
            if len(widths) >= 3 and widths[-1] == widths[-2] == widths[-3] > 0:
                break
        assert table.shown is not None
        text = rich_text(table.shown, width=table.size.width)
        best = [line for line in text.splitlines() if BEST_MARK in line]
        assert len(best) == 1 and "if=50" in best[0] and "sustainable" in best[0], best
        assert "recommended inflight=50:" in text


# -- snapshots: the table with its best row highlighted, at 80x24 and 160x48 -------------


def sweep_app() -> tuple[FlowdeckApp, FakeControl]:
    fake = FakeControl()
    return FlowdeckApp(control=fake), fake


async def show_sweep(pilot: object, fake: FakeControl, *keys: str) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    app.screen.history.clock = T0 + 60
    for update in sweep_updates(transition=1):
        fake.emit(update)
    await pilot.pause()  # type: ignore[attr-defined]
    for key in keys:
        await pilot.press(key)  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


def test_setting_table_160x48(snap_compare: object) -> None:
    app, fake = sweep_app()

    async def run_before(pilot: object) -> None:
        await show_sweep(pilot, fake, "t")

    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)  # type: ignore[operator]


def test_setting_table_80x24(snap_compare: object) -> None:
    app, fake = sweep_app()

    async def run_before(pilot: object) -> None:
        await show_sweep(pilot, fake, "t")

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)  # type: ignore[operator]
