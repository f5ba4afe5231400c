"""A real run on the shared broker reads back with the ticks and broker samples the live
screen had: the session reader feeds the recorded snapshots through the engine's own
aggregation, and replay frames carry what it gives."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from flowdeck.collectors import Broker
from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.controller import Controller
from flowdeck.engine.progress import Percentiles, Tick
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import RECORDED_NODES, open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec, ScheduleStep
from flowdeck.tui.replay import load_replay
from tests.engine.updates import collect_updates

#: How far a replayed latency may be from the live one: the session keeps 2-significant-
#: digit buckets (``format.LATENCY_SIGNIFICANT_DIGITS``), the live histograms 3, so a value
#: can move within its 2-digit bucket, whose width is at most 1/128 of the value.
BUCKET_WIDTH = 1 / 128

#: Fields a replayed tick must have exactly as the live one.
EXACT = (
    "duration",
    "target_rate",
    "publish_rate",
    "confirm_rate",
    "consume_rate",
    "nack_rate",
    "return_rate",
    "totals",
    "pending_confirms",
    "unacked",
    "connections",
    "blocked",
    "settings",
    "phase",
    "phase_index",
    "next_step_at",
    "next_step",
    "workers",
)


def assert_same_latency(live: Percentiles, replayed: Percentiles) -> None:
    assert replayed.count == live.count
    for name in ("p50", "p75", "p95", "p99", "max"):
        want, got = getattr(live, name), getattr(replayed, name)
        assert abs(got - want) <= want * BUCKET_WIDTH + 0.001, (name, want, got)


def assert_same_tick(live: Tick, replayed: Tick) -> None:
    # Exact, not within a margin: the session records when each tick was taken and how
    # many snapshots the controller had received by then (the ticks table, format 1.3),
    # and the reader feeds those same snapshots, in the same order, through the same
    # aggregation and the same Tick assembly (engine.aggregate.assemble_tick). A snapshot
    # arriving just after a whole second, or late from a worker process, counts in the
    # same tick either way. Elapsed times are differences from the same start, so adding
    # the start back gives the very float.
    assert replayed.at == live.at
    assert replayed.elapsed == live.elapsed
    for name in EXACT:
        assert getattr(replayed, name) == getattr(live, name), (name, live.elapsed)
    assert set(replayed.latency) == set(live.latency), live.elapsed
    for key, percentiles in live.latency.items():
        assert_same_latency(percentiles, replayed.latency[key])
    assert [(p.change_id, p.change, p.requested_at, p.source) for p in replayed.pending] == [
        (p.change_id, p.change, p.requested_at, p.source) for p in live.pending
    ]


def assert_same_sample(live: BrokerSample, replayed: BrokerSample) -> None:
    for f in fields(BrokerSample):
        if f.name in ("nodes", "broker_version", "erlang_version"):
            continue
        assert getattr(replayed, f.name) == getattr(live, f.name), f.name
    assert replayed.memory_alarm == live.memory_alarm
    assert replayed.disk_alarm == live.disk_alarm
    # Every node reads back by name with its own figures (the nodes table, format 1.3).
    assert replayed.nodes == live.nodes
    assert RECORDED_NODES not in {n.name for n in replayed.nodes}


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 1])
async def test_session_ticks_are_the_live_ticks(
    tmp_path: Path, shared_uri: str, unique_name: str, workers: int
) -> None:
    spec = RunSpec(
        name=f"replayed run {workers}",
        uri=shared_uri,
        queue_pattern=unique_name,
        publishers=1,
        consumers=1,
        rate=100,
        duration=4,
        workers=workers,
        durable=False,
        persistent=False,
        schedule=(ScheduleStep(2.0, Change(Setting.INFLIGHT, 50.0)),),
    )
    controller = Controller(
        spec,
        broker=Broker.parse(shared_uri),
        recording=RunRecording(tmp_path),
        workers=workers,
        cleanup=True,
    )
    samples: list[BrokerSample] = []
    controller.add_listener(lambda u: samples.append(u) if isinstance(u, BrokerSample) else None)
    _, live = collect_updates(controller)
    await controller.start()
    summary = await controller.wait()
    assert summary.session_dir is not None and summary.recording_error == ""

    session = open_session(Path(summary.session_dir))
    assert session.outcome == fmt.OUTCOME_COMPLETED
    replayed = session.ticks()
    assert len(replayed) == len(live) >= 5
    for live_tick, replayed_tick in zip(live, replayed, strict=True):
        assert_same_tick(live_tick, replayed_tick)
    assert live[-1].settings.inflight == 50  # the schedule step is in the ticks too
    assert sum(1 for t in live if t.latency) >= 3

    replayed_samples = session.broker_samples()
    assert len(replayed_samples) == len(samples) >= 1
    for live_sample, replayed_sample in zip(samples, replayed_samples, strict=True):
        assert_same_sample(live_sample, replayed_sample)
    assert any(s.nodes and all(n.name.startswith("rabbit@") for n in s.nodes) for s in samples)

    replay = load_replay(session)
    assert [frame.tick for frame in replay.frames] == replayed
    assert [s for frame in replay.frames for s in frame.samples] == replayed_samples
