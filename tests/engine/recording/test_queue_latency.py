"""Per-queue latency, recorded and read back: two workers consume queue ``slow`` (at
hundreds of ms) and ``fast`` (a few ms); each queue's percentiles are merged exactly over
the workers and seconds of a phase, live (the run's own table) and from the session alike,
and the slow queue comes first in the phase's worst queues."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from _synthetic import SPEC, SyntheticWorker

from flowdeck.engine.latency import encode, new_histogram, record
from flowdeck.engine.phase_figures import PhaseTable
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.recording.recorder import Recorder
from flowdeck.figures.latency import percentiles_of

T0 = 1_700_000_000.0


def blob(values: list[int]) -> bytes:
    histogram = new_histogram()
    for value in values:
        record(histogram, value)
    return encode(histogram)


def test_each_queues_percentiles_merge_exactly_and_the_slow_queue_comes_first(
    tmp_path: Path,
) -> None:
    recorder = Recorder(tmp_path, SPEC, flush_seconds=0.0)
    recorder.start(T0)
    table = PhaseTable()
    table.begin(T0)
    workers = [SyntheticWorker(0), SyntheticWorker(1)]
    slow: list[int] = []
    fast: list[int] = []
    for second in range(1, 11):
        for worker in workers:
            slow_values = [200_000 + 7_000 * (second + worker.worker + i) for i in range(20)]
            fast_values = [2_000 + 37 * (second * i + worker.worker) for i in range(50)]
            slow += slow_values
            fast += fast_values
            snap = replace(
                worker.snapshot(T0 + second),
                queue_latency={"slow": blob(slow_values), "fast": blob(fast_values)},
            )
            recorder.snapshot(snap)
            table.add_snapshot(snap)
    recorder.close("completed", {}, T0 + 10.5)

    session = open_session(recorder.session_dir)
    assert session.manifest.schema_version == fmt.SCHEMA_VERSION
    assert session.table(fmt.QUEUE_LATENCY_DIR).num_rows > 0
    recorded = session.figures()
    live = table.figures(ended=T0 + 10.5)
    assert live is not None
    (phase,) = [p for p in recorded.phases if p.queues]
    (live_phase,) = [p for p in live.phases if p.queues]
    assert phase.queues == live_phase.queues  # one answer, live and recorded
    assert [queue for queue, _ in phase.worst_queues()] == ["slow", "fast"]
    # merged exactly: the 2-digit recorded buckets of every value of both workers
    for name, values in (("slow", slow), ("fast", fast)):
        row = phase.queues[name]
        assert row["count"] == len(values)
        expected = percentiles_of(_two_digit(values))
        assert expected is not None
        assert row["p99"] == round(expected.p99 * 1000)
    assert phase.queues["slow"]["p99"] > 10 * phase.queues["fast"]["p99"]


def _two_digit(values: list[int]) -> dict[int, int]:
    """The values as the recording keeps them: HDR buckets at 2 significant digits."""
    from flowdeck.engine.latency import BucketDecoder, recorded_buckets

    bucket_values, counts = recorded_buckets(blob(values), BucketDecoder())
    return dict(zip(bucket_values.tolist(), counts.tolist(), strict=True))
