"""One answer everywhere: a recorded sweep through all six places that say which setting is
best, compared exactly.

One real run on the shared broker — an in-flight sweep at a fixed rate, with two worker
processes of which one runs no publisher (1 publisher, 1 consumer, 2 workers: the
publisher's worker and the consumer's) — is read by:

1. the cockpit's live per-setting table (a ``RunHistory`` fed the run's ticks, events and
   broker samples as the live screen is);
2. the autopilot (its choice is the run's recommendation: ``Autopilot._choice``);
3. the replay (the recorded session played to its last frame);
4. the run summary (``flowdeck run --json``'s document and the text table);
5. ``flowdeck sessions show`` (the recorded session's figures);
6. the Spark report (its figures and the throughput CSV it writes).

Each gives the same phases (count, names), the same msg/s and percentiles, the same
verdicts and the same recommendation, to the precision it prints.
"""

from __future__ import annotations

import asyncio
import csv
import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from flowdeck.cli.summary import print_phases, summary_document
from flowdeck.collectors import Broker, BrokerSample
from flowdeck.engine.autotune import Autopilot
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.controller import Controller
from flowdeck.engine.events import RunEvent
from flowdeck.engine.progress import Tick
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.run_recording import RunRecording
from flowdeck.engine.sinks import NullSink
from flowdeck.engine.spec import ScheduleStep
from flowdeck.figures import RunFigures
from flowdeck.spark_reports.build import build_report
from flowdeck.tui.model import RunHistory, setting_verdicts
from flowdeck.tui.replay import load_replay
from tests.tui.test_real_run import small_spec

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

E2E = ("e2e", "actual")


class Screen(NullSink):
    """What a live screen gets: ticks (with the snapshots they took in), events, samples."""

    def __init__(self) -> None:
        self.history = RunHistory()

    def on_tick(self, tick: Tick) -> None:
        self.history.add_tick(tick)

    def on_event(self, event: RunEvent) -> None:
        self.history.add_event(event)

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self.history.add_broker(sample)


def answer(figures: RunFigures) -> list[tuple[Any, ...]]:
    """What every place must agree on, phase by phase, exactly."""
    rows = []
    for phase in figures.phases:
        e2e = phase.percentiles(E2E)
        rows.append(
            (
                phase.index,
                phase.label,
                phase.seconds,
                phase.figure("publish_rate_mean"),
                phase.figure("consume_rate_mean"),
                phase.target_rate,
                None if e2e is None else (e2e.p50, e2e.p95, e2e.p99, e2e.p999),
                phase.verdict,
                phase.reason,
            )
        )
    return rows


def test_six_places_give_one_answer(
    spark: Any, shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    spec = replace(
        small_spec(shared_uri, unique_name, 18.0),
        name="one-answer",
        workers=2,
        rate=300.0,
        inflight=2,
        schedule=(
            ScheduleStep(6.0, Change(Setting.INFLIGHT, 5)),
            ScheduleStep(12.0, Change(Setting.INFLIGHT, 50)),
        ),
    )
    controller = Controller(
        spec, broker=Broker.parse(shared_uri), recording=RunRecording(tmp_path), drain_seconds=2,
        cleanup=True,
    )  # fmt: skip
    screen = Screen()
    controller.add_sink(screen)

    async def run() -> Any:
        await controller.start()
        return await controller.wait()

    summary = asyncio.run(run())
    assert summary.safety.lost == 0 and summary.safety.published > 0
    screen.history.run_ended(summary.ended, summary.to_json())

    # 4. the run summary: what `flowdeck run --json` and its text table are made of
    run_figures = controller.phase_table.figures()
    assert run_figures is not None
    expected = answer(run_figures)
    labels = [row[1] for row in expected]
    assert labels == ["start", "inflight=5", "inflight=50", "drain"], labels
    # the worker without publishers leaves the target whole: 300 msg/s in every load phase
    assert [row[5] for row in expected[:3]] == [300.0, 300.0, 300.0]
    document = summary_document(summary, spec.redacted(), run_figures, [])
    assert document["phases"] == len(document["phase_table"]) == 4
    (recommendation,) = document["recommendations"]
    text = io.StringIO()
    print_phases(run_figures, text)
    assert text.getvalue().startswith("4 phase(s)")
    assert recommendation["reasoning"][-1] in text.getvalue()

    # 1. the live table (its rows are the phases with data: all four here)
    live = screen.history.report_figures()
    assert live is not None and answer(live) == expected
    table = setting_verdicts(screen.history)
    assert [row.label for row in table.rows] == labels
    assert table.lines == (recommendation["reasoning"][-1],)

    # 2. the autopilot leaves the run at the run's own recommendation
    autopilot = Autopilot(controller, "inflight")
    assert autopilot._choice().reasoning == tuple(recommendation["reasoning"])

    # 3. the replay, played to its end
    assert summary.session_dir is not None
    session = open_session(Path(summary.session_dir))
    replay = load_replay(session)
    replayed = replay.history_at(len(replay.frames) - 1).report_figures()
    assert replayed is not None and answer(replayed) == expected
    assert [s.recommendation for s in replayed.sweeps] == [
        s.recommendation for s in run_figures.sweeps
    ]

    # 5. sessions show (and list: the phase count)
    recorded = session.figures()
    assert answer(recorded) == expected
    assert recorded.sweeps[0].recommendation.reasoning == tuple(recommendation["reasoning"])
    assert session.info().phases == 4

    # 6. the Spark report: its figures, and the CSV it writes
    report = build_report(spark, [str(session.path)], tmp_path / "report")
    (spark_figures,) = report.figures
    assert answer(spark_figures.run) == expected

    # every broker figure of every phase too (credit flow, pipeline, depth, alarms): the
    # report reads the polls the session reader gives, column for column
    def broker(figures: RunFigures) -> list[dict[str, Any]]:
        return [{k: v for k, v in p.broker.items() if k != "session"} for p in figures.phases]

    assert broker(spark_figures.run) == broker(recorded)
    assert spark_figures.sweeps[0].recommendation.reasoning == tuple(recommendation["reasoning"])
    throughput = next(report.out_dir.glob("*-throughput.csv"))
    rows = list(csv.DictReader(throughput.open(encoding="utf-8")))
    assert [row["label"] for row in rows] == labels
    assert [float(row["consume mean"]) for row in rows] == [round(r[4], 3) for r in expected]
    marked = [row["phase"] for row in rows if row["recommended"]]
    # the CSV marks the phase the figures recommend, or none when they recommend none (on a
    # busy machine no step of this short sweep may hold, and every place then says so alike)
    best = run_figures.sweeps[0].best
    assert marked == ([] if best is None else [str(best.index)]), recommendation["reasoning"]
