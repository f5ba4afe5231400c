"""The comparison chart draws every run it names: a run with no in-flight limit (no
confirms, as in the seed's benchmark #2) is a dashed level across the chart, not a point at
an in-flight of 0 that a log axis cannot place. Figures are built by hand; no Spark."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("pyspark")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from flowdeck.engine.recording.format import OUTCOME_COMPLETED, SCHEMA_VERSION, Manifest
from flowdeck.figures.phases import Phase
from flowdeck.figures.verdict import Verdict
from flowdeck.spark_reports.charts import comparison_chart, rendered
from flowdeck.spark_reports.figures import PhaseFigures, SessionFigures
from flowdeck.spark_reports.sessions import Session
from tests.figures.factories import run

RATE = 2000.0
SECONDS = 10


def _phase(session: str, index: int, inflight: int, consumed: float, p99_ms: float) -> PhaseFigures:
    start_us = index * SECONDS * 1_000_000
    end_us = start_us + SECONDS * 1_000_000
    return PhaseFigures(
        session=session,
        phase=Phase(index, f"inflight={inflight}", start_us, end_us, start_us, end_us),
        start_s=index * SECONDS,
        duration_s=SECONDS,
        client={
            "seconds": SECONDS,
            "paused_s": 0,
            "inflight": inflight,
            "target_rate": RATE,
            "consume_rate_mean": consumed,
        },
        broker={},
        latency={("e2e", "actual"): {"p99": p99_ms * 1000}},
        verdict=Verdict.SUSTAINABLE,
        reason="",
    )


def _run(name: str, confirms: bool, steps: list[tuple[int, float, float]]) -> SessionFigures:
    """A run of one phase per (in-flight, msg/s consumed, e2e p99 ms) step."""
    manifest = Manifest(
        session_id=f"20240101-{name}",
        schema_version=SCHEMA_VERSION,
        name=name,
        spec={"queue_type": "quorum", "rate": RATE, "confirms": confirms},
        start=0.0,
        end=len(steps) * SECONDS,
        outcome=OUTCOME_COMPLETED,
        host="test",
        versions={},
    )
    phases = tuple(_phase(name, i, *step) for i, step in enumerate(steps))
    return SessionFigures(
        session=Session(f"/sessions/{name}", name, manifest, (), tuple(p.phase for p in phases)),
        run=run(*phases),
    )


#: The seed's benchmark #2 in small: in-flight 20 → 400 with confirms (20x apart, so the
#: in-flight axis is logarithmic), and the same load without confirms.
SWEEP_STEPS = [(20, 1200.0, 6.0), (40, 1700.0, 9.0), (100, 1950.0, 14.0), (400, RATE, 40.0)]
SWEEP = ("quorum sweep (confirms on)", _run("sweep", True, SWEEP_STEPS))
NO_CONFIRMS = ("quorum (confirms off)", _run("no-confirms", False, [(0, 1990.0, 3.0)]))
NO_CONFIRMS_LABEL = "no confirms: quorum (confirms off)"


@pytest.fixture
def drawn() -> Iterator[Figure]:
    figure = comparison_chart([SWEEP, NO_CONFIRMS], "inflight")
    figure.canvas.draw()
    yield figure
    plt.close(figure)


def _labelled(axes: Axes) -> dict[str, Line2D]:
    return {str(line.get_label()): line for line in axes.get_lines()
            if not str(line.get_label()).startswith("_")}  # fmt: skip


def _xs(line: Line2D) -> list[float]:
    return [float(x) for x in np.asarray(line.get_xdata(), dtype=float)]


def _ys(line: Line2D) -> list[float]:
    return [float(y) for y in np.asarray(line.get_ydata(), dtype=float)]


def _on_screen(axes: Axes, line: Line2D) -> np.ndarray[Any, Any]:
    """The line's points in display coordinates; each must lie within the axes' frame."""
    points = np.column_stack([_xs(line), _ys(line)])
    shown = line.get_transform().transform(points)
    box = axes.bbox
    assert np.isfinite(shown).all(), f"{line.get_label()}: a point cannot be placed: {points}"
    assert (shown[:, 0] >= box.x0 - 0.5).all() and (shown[:, 0] <= box.x1 + 0.5).all()
    assert (shown[:, 1] >= box.y0 - 0.5).all() and (shown[:, 1] <= box.y1 + 0.5).all()
    return shown


def test_a_run_without_confirms_is_a_dashed_level_across_both_panels(drawn: Figure) -> None:
    through, lat = drawn.axes
    assert through.get_xscale() == "log"
    for axes, level in ((through, 1990.0), (lat, 3.0)):
        lines = _labelled(axes)
        assert set(lines) == {SWEEP[0], NO_CONFIRMS_LABEL}
        reference = lines[NO_CONFIRMS_LABEL]
        assert reference.get_linestyle() == "--"
        assert to_rgba(reference.get_color()) == to_rgba("C1")
        assert _ys(reference) == [level, level]
        shown = _on_screen(axes, reference)
        # horizontal, from the chart's left edge to its right
        assert shown[0, 1] == pytest.approx(shown[1, 1])
        assert sorted(shown[:, 0]) == pytest.approx([axes.bbox.x0, axes.bbox.x1])
        steps = lines[SWEEP[0]]
        assert _xs(steps) == [20, 40, 100, 400]
        assert steps.get_linestyle() == "-" and to_rgba(steps.get_color()) == to_rgba("C0")
        _on_screen(axes, steps)


def test_the_legend_names_what_is_drawn_as_it_is_drawn(drawn: Figure) -> None:
    (legend,) = drawn.legends
    entries = [text.get_text() for text in legend.get_texts()]
    assert entries == [SWEEP[0], NO_CONFIRMS_LABEL]
    drawn_lines = _labelled(drawn.axes[0])
    for entry, handle in zip(entries, legend.legend_handles, strict=True):
        assert isinstance(handle, Line2D)
        line = drawn_lines[entry]
        _on_screen(drawn.axes[0], line)  # no entry for a line that is not there to see
        assert handle.get_linestyle() == line.get_linestyle()
        assert to_rgba(handle.get_color()) == to_rgba(line.get_color())
        assert handle.get_marker() == line.get_marker()


def test_a_step_without_an_in_flight_limit_is_a_level_beside_the_run_s_steps() -> None:
    """Confirms on, one step at in-flight 0 (no limit): the limited steps stay a line and
    the unlimited one is the run's dashed level, named for what it is."""
    steps = [(20, 1200.0, 6.0), (400, RATE, 40.0), (0, RATE, 55.0)]
    run = ("quorum sweep", _run("sweep-unlimited", True, steps))
    figure = comparison_chart([run, NO_CONFIRMS], "inflight")
    try:
        figure.canvas.draw()
        through, lat = figure.axes
        for axes, level in ((through, RATE), (lat, 55.0)):
            lines = _labelled(axes)
            assert set(lines) == {"quorum sweep", "no in-flight limit: quorum sweep",
                                  NO_CONFIRMS_LABEL}  # fmt: skip
            assert _xs(lines["quorum sweep"]) == [20, 400]
            unlimited = lines["no in-flight limit: quorum sweep"]
            assert _ys(unlimited) == [level, level]
            assert to_rgba(unlimited.get_color()) == to_rgba("C0")
            for line in lines.values():
                _on_screen(axes, line)
        (legend,) = figure.legends
        assert [t.get_text() for t in legend.get_texts()] == [
            "quorum sweep", "no in-flight limit: quorum sweep", NO_CONFIRMS_LABEL
        ]  # fmt: skip
    finally:
        plt.close(figure)


def test_the_chart_is_a_png_and_an_svg() -> None:
    files = rendered(comparison_chart([SWEEP, NO_CONFIRMS], "inflight"))
    assert files.png.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"<svg" in files.svg[:1000] and files.svg.rstrip().endswith(b"</svg>")


def test_the_comparison_table_has_the_row_the_chart_draws() -> None:
    """A run without confirms that carried an in-flight number (`--preset bench2
    --no-confirms` keeps the preset's 400) is the table's "no confirms" row, as the chart's
    dashed level, not a figure in the sweep's row 400."""
    from dataclasses import replace

    from flowdeck.figures import Recommendation, Sweep
    from flowdeck.figures.run import sweep_point
    from flowdeck.spark_reports.compare import comparison_table

    sweep = SWEEP[1]
    recommended = Recommendation(20, ())
    points = tuple(sweep_point(p, "inflight") for p in sweep.phases)
    sweeps = (Sweep("sweep", "inflight", sweep.phases, points, recommended),)
    swept = replace(sweep, run=replace(sweep.run, sweeps=sweeps))
    carried = _run("no-confirms", False, [(400, 1990.0, 3.0)])
    table = comparison_table([swept, carried])
    rows = {row[0]: row for row in table.rows}
    assert list(rows) == ["no confirms", 20, 40, 100, 400]
    msgs = [i for i, column in enumerate(table.columns) if column.startswith("msg/s · ")]
    sweep_at, no_confirms_at = msgs
    assert rows["no confirms"][sweep_at] is None
    assert rows["no confirms"][no_confirms_at] == 1990.0
    assert rows[400][sweep_at] == RATE and rows[400][no_confirms_at] is None
