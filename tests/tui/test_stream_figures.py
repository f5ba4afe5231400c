"""The stream plugin's figures on screen: an offset lag cell in the figure strip and a line
in the flow tab, for a run whose broker samples carry them (a run to streams) and for no
other run, live and in a replay alike (both read the broker samples)."""

from __future__ import annotations

from dataclasses import replace

from flowdeck.collectors.model import BrokerSample
from flowdeck.tui.widgets.figure_strip import figures
from flowdeck.tui.widgets.pipeline import render_pipeline, stream_line
from tests.tui.fakes import T0
from tests.tui.sweep_fakes import sample_at
from tests.tui.test_figure_strip import ticks_until
from tests.tui.test_live_pilot import rich_text


def stream_sample(at: float, *, lag: int | None = 62_832, errored: int = 0) -> BrokerSample:
    return replace(
        sample_at(at),
        stream_connections=4,
        stream_consumers=0 if lag is None else 2,
        stream_offset_lag=lag,
        stream_offset_lag_max=None if lag is None else 40_000,
        stream_publishers=2,
        stream_errored=errored,
    )


def test_a_run_without_streams_shows_no_stream_figures() -> None:
    history = ticks_until(30)
    history.clock = T0 + 31.5
    assert "offset lag" not in {cell.name for cell in figures(history)}
    assert stream_line(history) is None
    assert "streams:" not in rich_text(render_pipeline(history.pipeline(), history))


def test_a_stream_run_shows_the_offset_lag_and_stream_connections() -> None:
    history = ticks_until(30)
    history.add_broker(stream_sample(T0 + 30))
    history.clock = T0 + 31.5
    cells = {cell.name: cell for cell in figures(history)}
    lag = cells["offset lag"]
    assert (lag.value, lag.short, lag.style, lag.stale) == ("62.8k", "lag", "bold", False)
    assert lag.age is not None and abs(lag.age - 2.5) < 1e-6  # the sample's figures' age
    text = rich_text(render_pipeline(history.pipeline(), history))
    assert (
        "streams: 4 stream connections · 2 consumers, offset lag 62,832 (largest 40,000) · "
        "2 publishers, 0 errored"
    ) in text


def test_no_stream_consumer_reads_as_no_lag_and_errors_are_said() -> None:
    history = ticks_until(30)
    history.add_broker(stream_sample(T0 + 30, lag=None, errored=12))
    history.clock = T0 + 31.5
    cells = {cell.name: cell for cell in figures(history)}
    assert (cells["offset lag"].value, cells["offset lag"].style) == ("–", "dim")
    line = stream_line(history)
    assert line is not None
    assert line.plain == (
        "streams: 4 stream connections · 0 consumers, no offset lag to read · "
        "2 publishers, 12 errored"
    )
