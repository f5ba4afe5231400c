"""Charts that tell the story: labelled phase lines, shaded alarm / pause / outage periods,
a y axis scaled from what the run sustains, and the last value beside each series."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flowdeck.engine.change import Change, Setting
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.model import RunHistory, axis_top, phase_tag
from flowdeck.tui.plot import Band, Series, plot
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.widgets.throughput_chart import ThroughputChart
from tests.tui.fakes import T0, FakeControl
from tests.tui.sweep_fakes import knee_sweep, sweep_updates

BLUE = (0, 114, 178)
PURPLE = (204, 121, 167)
SHADE = (60, 30, 30)


def text(rows: list) -> list[str]:  # type: ignore[type-arg]
    return ["".join(run.text for run in row) for row in rows]


@pytest.mark.parametrize(
    ("label", "tag"),
    [
        ("inflight=40", "if=40"),
        ("prefetch=500", "pf=500"),
        ("ack_every=6", "ack=6"),
        ("rate=30", "rate=30"),
        ("publishers=+10", "pub=+10"),
        ("pause", "pause"),
        ("after warm-up", "⚑ after warm-up"),
        ("start", "start"),
    ],
)
def test_phase_tags(label: str, tag: str) -> None:
    assert phase_tag(label) == tag


def test_phase_lines_are_labelled_and_labels_stop_at_the_next_line() -> None:
    xs = [float(x) for x in range(61)]
    rows = plot(
        [Series(xs, [100.0] * 61, BLUE)],
        60,
        10,
        vlines=[20.0, 24.0, 40.0],
        vline_labels=["if=40", "pf=500", "⚑ after warm-up"],
        vline_colour=PURPLE,
    )
    top = text(rows)[1]
    assert "⡇if…⡇pf=500" in top  # cut before the next line, with an ellipsis
    assert "⚑ after warm-up" in top
    assert top.index("if") < top.index("pf=500") < top.index("⚑")


def test_bands_shade_their_columns_and_say_what_they_are() -> None:
    xs = [float(x) for x in range(61)]
    rows = plot(
        [Series(xs, [100.0] * 61, BLUE)],
        60,
        10,
        bands=[Band(30.0, 45.0, SHADE, PURPLE, "alarm")],
    )
    shaded_rows = [row for row in rows if any(run.shade == SHADE for run in row)]
    assert len(shaded_rows) == 10 - 3  # every row of the plot area
    bottom = text(rows)[-3]
    assert "alarm" in bottom
    width = sum(len(run.text) for run in rows[4] if run.shade == SHADE)
    assert 10 <= width <= 16  # a quarter of the ~50 plot columns


def test_a_catch_up_spike_does_not_set_the_y_axis() -> None:
    xs = [float(x) for x in range(120)]
    rates = [3000.0] * 120
    rates[60], rates[61] = 15000.0, 9000.0
    top = axis_top(rates)
    assert top == pytest.approx(3600.0)
    rows = text(plot([Series(xs, rates, BLUE)], 60, 12, y_top=top))
    labels = [row.split("┤")[0].strip() for row in rows if "┤" in row]
    assert labels[0] == "3600"  # not 15k
    assert not any("k" in label for label in labels)
    # The spike is still drawn, clipped at the top row.
    assert "⣿" in rows[1].split("┤", 1)[1]


async def test_throughput_chart_shows_labels_last_values_and_shading() -> None:
    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        screen.history.clock = T0 + 60
        for update in sweep_updates(stall_at=41):
            fake.emit(update)
        fake.request(Change(Setting.MARK, label="warm"))
        await pilot.pause()
        chart = screen.query_one(ThroughputChart)
        title = str(chart.border_title)
        assert "published" in title and "2000" in title  # last value beside the name
        painted = "".join("".join(segment.text for segment in strip) for strip in chart._strips)
        for tag in ("if=20", "if=50", "if=100", "if=200"):
            assert tag in painted
        assert "alarm" in painted
        history: RunHistory = screen.history
        assert [s.kind for s in history.shades] == ["alarm"]


# -- snapshots -----------------------------------------------------------------------------


def labelled_app() -> tuple[FlowdeckApp, FakeControl]:
    fake = FakeControl()
    return FlowdeckApp(control=fake), fake


async def show_labelled(pilot: object, fake: FakeControl) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    app.screen.history.clock = T0 + 84
    start, if20, if50, if100, if200 = knee_sweep()
    story = (
        start,
        if20,
        if50,
        replace(if50, label="after warm-up"),
        replace(if50, label="pause", paused=True, publish=0.0, consume=0.0),
        replace(if100, label="resume"),
        if200,
    )
    for update in sweep_updates(story, stall_at=76):
        fake.emit(update)
    await pilot.pause()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


def test_labelled_phases_160x48(snap_compare: object) -> None:
    app, fake = labelled_app()

    async def run_before(pilot: object) -> None:
        await show_labelled(pilot, fake)

    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)  # type: ignore[operator]


def test_labelled_phases_80x24(snap_compare: object) -> None:
    app, fake = labelled_app()

    async def run_before(pilot: object) -> None:
        await show_labelled(pilot, fake)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)  # type: ignore[operator]
