"""The per-setting table on a real run: its msg/s are the run's own per-phase figures.

The cockpit sees the run as ticks (each carrying the workers' snapshots it took in) and
events; ``PhaseTable`` — what ``flowdeck run --json`` prints and the autopilot reads —
gets every snapshot as a sink. While the run goes, both must give each phase the same
msg/s; a replay of the recorded session ends on the figures ``run --json`` printed (the
run's summary says when the clients were active).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from flowdeck.collectors import Broker
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.events import RunEvent
from flowdeck.engine.phase_figures import PhaseTable
from flowdeck.engine.progress import Tick
from flowdeck.engine.recording.reader import open_session
from flowdeck.engine.sinks import NullSink, RunStarted
from flowdeck.engine.snapshot import ClientSnapshot
from flowdeck.engine.spec import ScheduleStep
from flowdeck.figures import PhaseFigures
from flowdeck.tui.model import (
    BASIS_REPORT,
    RunHistory,
    SettingRow,
    human_count,
    setting_verdicts,
)
from flowdeck.tui.replay import load_replay
from tests.tui.test_real_run import small_spec

pytestmark = [pytest.mark.broker]


class Screens(NullSink):
    """A cockpit's history fed what a screen gets, and a PhaseTable fed what the run's
    summary table gets; the run's end (its recorded active times) is left out of both."""

    def __init__(self) -> None:
        self.history = RunHistory()
        self.table = PhaseTable()

    def on_start(self, run: RunStarted) -> None:
        self.table.on_start(run)

    def on_snapshot(self, snapshot: ClientSnapshot) -> None:
        self.table.on_snapshot(snapshot)

    def on_tick(self, tick: Tick) -> None:
        self.history.add_tick(tick)

    def on_event(self, event: RunEvent) -> None:
        self.history.add_event(event)
        self.table.on_event(event)


@pytest.mark.slow
async def test_live_table_msg_s_are_the_phase_tables(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    from flowdeck.engine.controller import Controller
    from flowdeck.engine.run_recording import RunRecording

    spec = replace(
        small_spec(shared_uri, unique_name, 6.0),
        schedule=(ScheduleStep(3.0, Change(Setting.INFLIGHT, 2)),),
    )
    control = Controller(
        spec, broker=Broker.parse(shared_uri), recording=RunRecording(tmp_path), cleanup=True
    )
    screens = Screens()
    control.add_sink(screens)
    final = PhaseTable()  # as ``flowdeck run --json`` keeps it, to the run's end
    control.add_sink(final)
    await control.start()
    summary = await control.wait()
    assert summary.safety.published > 0

    rows = setting_verdicts(screens.history).rows
    found = screens.table.figures()
    assert found is not None
    figures = {f.index: f for f in found.phases}
    load = [r for r in rows if not r.drain]
    assert [r.settings.inflight for r in load] == [10, 2]
    for row in rows:
        report = figures[row.index]
        assert row.basis == BASIS_REPORT
        assert printed(row) == printed(report), (row.label, report)
    assert load[0].publish > 0 and load[1].publish > 0

    # The replay's ticks are rebuilt from the recorded snapshots and its last frame brings
    # the summary's active times: the table ends on the run's JSON summary's figures.
    assert summary.session_dir is not None
    replay = load_replay(open_session(Path(summary.session_dir)))
    replayed = setting_verdicts(replay.history_at(len(replay.frames) - 1)).rows
    final_figures = final.figures(summary.ended)
    assert final_figures is not None
    ended = {f.index: f for f in final_figures.phases}
    assert [(r.label, r.basis, printed(r)) for r in replayed] == [
        (r.label, BASIS_REPORT, printed(ended[r.index])) for r in rows
    ]


def printed(row: SettingRow | PhaseFigures) -> list[str]:
    """The msg/s as the table prints them, of a table row or a phase of the figures."""
    if isinstance(row, SettingRow):
        rates = (row.publish, row.confirm, row.consume)
    else:
        rates = tuple(row.figure(f"{n}_rate_mean") for n in ("publish", "confirm", "consume"))
    return [human_count(round(rate)) for rate in rates]
