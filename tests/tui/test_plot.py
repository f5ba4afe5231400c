"""The braille line charts, as plain text: sizes, axes, ticks, lines, marks."""

from __future__ import annotations

import itertools
import math

from flowdeck.tui.plot import Row, Series, plot

BLUE = (0, 114, 178)
GREY = (153, 153, 153)
PURPLE = (204, 121, 167)


def text(rows: list[Row]) -> list[str]:
    return ["".join(run.text for run in row) for row in rows]


def cells_of(rows: list[Row], colour: tuple[int, int, int]) -> list[tuple[int, int]]:
    """(row, column) of every cell drawn in ``colour``."""
    found = []
    for y, row in enumerate(rows):
        x = 0
        for run in row:
            if run.colour == colour:
                found += [(y, x + i) for i, ch in enumerate(run.text) if ch != " "]
            x += len(run.text)
    return found


def test_every_row_is_exactly_the_size_asked() -> None:
    xs = [float(s) for s in range(1, 301)]
    series = [Series(xs, [1000 + 10 * math.sin(s) for s in xs], BLUE)]
    for width, height in ((40, 8), (86, 20), (160, 45)):
        lines = text(plot(series, width, height, vlines=[100.0], vline_colour=PURPLE))
        assert len(lines) == height
        assert {len(line) for line in lines} == {width}


def test_a_rising_line_goes_from_bottom_left_to_top_right_within_the_axes() -> None:
    rows = plot([Series([0.0, 60.0], [0.0, 100.0], BLUE)], 50, 12)
    lines = text(rows)
    drawn = cells_of(rows, BLUE)
    first, last = min(drawn, key=lambda c: c[1]), max(drawn, key=lambda c: c[1])
    assert first[0] > last[0]  # the left end is lower on screen
    axis = lines[1].index("┤")
    assert all(axis < x < 49 for _, x in drawn)  # between the y axis and the right frame
    assert all(1 <= y <= 12 - 3 for y, _ in drawn)  # between the top and the bottom frame
    assert lines[1].lstrip().startswith("100┤") and lines[-3].lstrip().startswith("0┤")
    assert lines[-1].split() == ["0:00", "0:10", "0:20", "0:30", "0:40", "0:50", "1:00"]


def test_linear_ticks_are_round_and_enclose_the_data() -> None:
    lines = text(plot([Series([1.0, 2.0, 3.0], [873.0, 2000.0, 1500.0], BLUE)], 60, 20))
    labels = [line.split("┤")[0].strip() for line in lines if "┤" in line]
    assert labels[0] == "2000" and labels[-1] in ("500", "800")
    values = [float(label) for label in labels]
    steps = {round(a - b, 6) for a, b in itertools.pairwise(values)}
    assert len(steps) == 1  # evenly spaced


def test_log_axis_labels_powers_of_ten_and_skips_values_it_cannot_draw() -> None:
    xs = [float(s) for s in range(1, 101)]
    ys = [0.5 * 10 ** (s / 40) for s in xs]
    ys[10] = 0.0  # no latency measured that second: nothing to draw on a log axis
    ys[20] = float("nan")
    lines = text(plot([Series(xs, ys, BLUE)], 60, 20, log_y=True))
    labels = [line.split("┤")[0].strip() for line in lines if "┤" in line]
    assert labels[0] in ("200", "500", "1000") and labels[-1] in ("0.5", "0.2", "0.1")
    assert "1" in labels and "10" in labels and "100" in labels


def test_dot_series_are_marked_with_dots_and_phase_marks_with_a_vertical_line() -> None:
    xs = [float(s) for s in range(0, 61)]
    rows = plot(
        [Series(xs, [5.0] * 61, GREY, "dot"), Series(xs, [float(s) for s in xs], BLUE)],
        60,
        14,
        vlines=[30.0],
        vline_colour=PURPLE,
    )
    assert any("•" in run.text for row in rows for run in row if run.colour == GREY)
    purple_columns = {x for _, x in cells_of(rows, PURPLE)}
    assert len(purple_columns) == 1
    purple_rows = {y for y, _ in cells_of(rows, PURPLE)}
    assert len(purple_rows) >= 14 - 3 - 2  # nearly full height (lines crossing take cells)


def test_nothing_to_draw_and_too_little_room_still_fill_the_space() -> None:
    empty = text(plot([], 30, 8))
    assert len(empty) == 8 and {len(line) for line in empty} == {30}
    assert empty[0].startswith("┌") and empty[-2].startswith("└")
    tiny = text(plot([Series([1.0], [1.0], BLUE)], 12, 4))
    assert len(tiny) == 4 and {len(line) for line in tiny} == {12}
    assert tiny[0].startswith("(chart")
