"""The stream plugin's figures on screen: an offset lag cell in the figure strip and a line
in the flow tab, for a run whose broker samples carry them (a run to streams) and for no
other run, live and in a replay alike (both read the broker samples)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.recording.recorder import Recorder
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec
from flowdeck.tui.replay import load_replay
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


def test_a_replay_shows_the_recorded_stream_figures(tmp_path: Path) -> None:
    spec = RunSpec(name="stream-replay", queue_type="stream", protocol="stream", duration=3.0)
    recorder = Recorder(tmp_path, spec, flush_seconds=0.0)
    recorder.start(T0)
    for second in (1, 2, 3):
        recorder.snapshot(
            ClientSnapshot(
                worker=0,
                at=T0 + second - 0.5,
                interval=1.0,
                counters=Counters(published=100 * second, confirmed=100 * second),
                pending_confirms=0,
                unacked=0,
                connections=3,
                blocked=0,
                settings=Settings.of(
                    inflight=50, prefetch=2, ack_every=1, rate=0.0, publishers=2, consumers=1
                ),
                target_rate=0.0,
            )
        )
        recorder.tick(T0 + second)
        recorder.broker(stream_sample(T0 + second - 0.2, lag=1_000 * second))
    recorder.close("completed", {}, T0 + 3.0, "duration reached")

    replay = load_replay(open_session(recorder.session_dir))
    history = replay.history_at(len(replay.frames) - 1)
    cells = {cell.name: cell for cell in figures(history)}
    assert cells["offset lag"].value == "3000"
    line = stream_line(history)
    assert line is not None
    assert "offset lag 3,000 (largest 40,000)" in line.plain
