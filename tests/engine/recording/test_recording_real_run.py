"""A real short run on the shared broker is recorded and reads back with the engine's totals."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.controller import Controller
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.recording import format as fmt
from flowdeck.engine.recording.reader import list_sessions, open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.spec import RunSpec


@pytest.mark.broker
@pytest.mark.slow
async def test_real_run_reads_back_with_the_totals_the_engine_printed(
    tmp_path: Path, shared_uri: str, unique_name: str
) -> None:
    spec = RunSpec(
        name="recorded short run",
        uri=shared_uri,
        queue_pattern=unique_name,
        publishers=1,
        consumers=1,
        rate=200,
        duration=4,
        workers=0,
        durable=False,
        persistent=False,
    )
    controller = Controller(
        spec,
        broker=Broker.parse(shared_uri),
        recording=RunRecording(tmp_path),
        workers=0,
        cleanup=True,
    )
    await controller.start()
    summary = await controller.wait()
    assert summary.recording_error == ""
    assert summary.session_dir is not None
    assert summary.safety.published > 0

    session = open_session(Path(summary.session_dir))
    assert session.outcome == summary.outcome == fmt.OUTCOME_COMPLETED
    # The broker's versions, from the management API, are in the manifest.
    versions = session.manifest.versions
    assert versions["rabbitmq"].count(".") == 2 and versions["erlang"], versions
    totals = session.totals()
    safety = summary.safety
    assert (
        totals.published,
        totals.confirmed,
        totals.nacked,
        totals.returned,
        totals.consumed,
        totals.redelivered,
        totals.duplicates,
    ) == (
        safety.published,
        safety.confirmed,
        safety.nacked,
        safety.returned,
        safety.consumed,
        safety.redelivered,
        safety.duplicates,
    )
    assert session.manifest.summary is not None
    assert session.manifest.summary["safety"] == safety.to_json()
    assert "guest:guest" not in (session.path / fmt.MANIFEST).read_text()
    latency = session.latency_percentiles(LatencyKind.END_TO_END, SendBasis.ACTUAL)
    assert latency is not None and latency.count == safety.consumed
    series = session.client_per_second()
    assert sum(series.column("published").to_pylist()) == safety.published
    assert [info.session_id for info in list_sessions(tmp_path)] == [session.session_id]
