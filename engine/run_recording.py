"""The run's session on disk, as the controller hands it over: a guarded recorder.

The :class:`~flowdeck.engine.recording.recorder.Recorder` writes a session; this part
starts it off the loop (pyarrow takes ~0.5 s to load), hands it every update of the run
before any other sink sees it (so a session holds what the screens showed), and turns its
trouble (an unwritable, full or vanished sessions directory, a writer thread that stopped)
into one RECORDING_STOPPED event and the summary's ``recording_error``: recording trouble
turns recording off, never the run.

``RunRecording()`` (no sessions root) records nothing; ``RunRecording(root)`` records under
``root``. A collaborator of the controller (see ``engine.run_context``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.sinks import NullSink, PrometheusRow, RunStarted

if TYPE_CHECKING:
    from flowdeck.collectors.model import BrokerSample
    from flowdeck.engine.progress import RunSummary, Tick
    from flowdeck.engine.recording.recorder import Recorder
    from flowdeck.engine.run_context import RunContext
    from flowdeck.engine.snapshot import ClientSnapshot
    from flowdeck.engine.spec import RunSpec

__all__ = ["RunRecording"]


def _recorder_class() -> type[Recorder]:
    from flowdeck.engine.recording.recorder import Recorder

    return Recorder


class RunRecording(NullSink):
    """Records the run under ``sessions_root`` (None: not at all); see the module doc."""

    def __init__(self, sessions_root: Path | str | None = None) -> None:
        self.sessions_root = Path(sessions_root) if sessions_root is not None else None
        self._run: RunContext | None = None
        self._recorder: Recorder | None = None
        self._session_dir: Path | None = None
        #: Why recording is off or stopped ('' while it goes well).
        self.error = ""
        self._announced = False

    def bind(self, run: RunContext) -> None:
        self._run = run

    @property
    def session_dir(self) -> Path | None:
        """Where the run is recorded: None until the session exists on disk, and again if
        it is removed, so nothing ever shows the path of a session that is not there."""
        if self._session_dir is None or not self._session_dir.is_dir():
            return None
        return self._session_dir

    async def start(self, spec: RunSpec) -> None:
        """Make the recorder (its session directory appears with the run's start)."""
        if self.sessions_root is None:
            return
        try:
            recorder_class = await asyncio.to_thread(_recorder_class)
        except ImportError:
            self.trouble("recording is off: this build of flowdeck cannot record")
            return
        try:
            self._recorder = recorder_class(self.sessions_root, spec)
            self._session_dir = Path(self._recorder.session_dir)
        except Exception as exc:  # a recording that cannot start never stops the run
            self._recorder = None
            self.trouble(f"recording is off: it could not start: {exc}")

    def check(self) -> None:
        """Say at once when the recorder has stopped (its writer thread sets ``error``)."""
        error = self._recorder.error if self._recorder is not None else None
        if error:
            self.trouble(str(error))

    def trouble(self, message: str) -> None:
        """Recording is off or stopped: remember why for the summary and say it now, once,
        as a RECORDING_STOPPED event (the headless line and the cockpit's banner)."""
        self.error = message
        if self._announced or self._run is None:
            return
        self._announced = True
        session = self.session_dir
        going_on = "; the run goes on unrecorded" if self._run.under_way else ""
        self._run.report_event(
            EventKind.RECORDING_STOPPED,
            f"{message}{going_on}",
            detail={"error": message, "session_dir": str(session) if session else None},
        )

    def close(self, outcome: str, summary: Mapping[str, Any], at: float, reason: str) -> None:
        """End the session of a run that could not start."""
        self._record(lambda recorder: recorder.close(outcome, summary, at, reason))
        self._recorder = None

    # -- as the run's first sink ---------------------------------------------------------------

    def on_start(self, run: RunStarted) -> None:
        self._record(lambda recorder: recorder.on_start(run))

    def on_snapshot(self, snapshot: ClientSnapshot) -> None:
        self._record(lambda recorder: recorder.on_snapshot(snapshot))

    def on_tick(self, tick: Tick) -> None:
        self._record(lambda recorder: recorder.on_tick(tick))

    def on_event(self, event: RunEvent) -> None:
        self._record(lambda recorder: recorder.on_event(event))

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self._record(lambda recorder: recorder.on_broker_sample(sample))

    def on_prometheus_range(self, rows: Sequence[PrometheusRow]) -> None:
        self._record(lambda recorder: recorder.on_prometheus_range(rows))

    def on_finish(self, summary: RunSummary) -> None:
        """The final manifest; nothing is recorded after it."""
        self._record(lambda recorder: recorder.on_finish(summary))
        self._recorder = None

    def _record(self, call: Callable[[Recorder], None]) -> None:
        """Hand the recorder one update; trouble turns recording off, never the run."""
        if self._recorder is None:
            return
        try:
            call(self._recorder)
        except Exception as exc:  # recording trouble never stops the run
            self._recorder = None
            self.trouble(f"recording stopped: {exc}")
            return
        self.check()
