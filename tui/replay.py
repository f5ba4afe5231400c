"""Replaying a recorded session through the live dashboard's panels.

A session becomes one :class:`ReplayFrame` per tick of the run: the Tick the live dashboard
showed and the broker samples and events that came with it, all as the session reader gives
them (``Session.ticks`` and ``Session.broker_samples``; nothing is re-derived here). Frames
are built once (in a thread: a long session takes a moment) and a player steps through
them, so play, pause and seek never touch the disk again.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowdeck.collectors import BrokerSample
from flowdeck.engine import RunEvent, Session, Tick
from flowdeck.tui.model import RunHistory


@dataclass(frozen=True, slots=True)
class ReplayFrame:
    """One tick of the recorded run (``second``: its number, 1-based) with what came with it."""

    second: int
    at: float
    tick: Tick | None
    samples: tuple[BrokerSample, ...] = ()
    events: tuple[RunEvent, ...] = ()
    #: On the last frame of a run that ended: when it ended and its summary document (when
    #: its clients were active), so the per-setting table ends on the report's figures.
    ended: float | None = None
    summary: Mapping[str, Any] | None = None


@dataclass
class Replay:
    """All frames of a session and the history as of any position."""

    name: str
    start: float
    #: Seconds from the run's start to its end (or its last recorded row): the replay clock's
    #: whole length, which the last frame reaches.
    length: float = 0.0
    frames: list[ReplayFrame] = field(default_factory=list)

    def elapsed_at(self, position: int) -> float:
        """Seconds since the run's start at frame ``position`` (0 before the first)."""
        if not 0 <= position < len(self.frames):
            return 0.0
        return self.frames[position].at - self.start

    def history_at(self, position: int) -> RunHistory:
        """The dashboard's history after frames ``0..position`` (inclusive)."""
        history = RunHistory()
        history.started_at = self.start
        for frame in self.frames[: position + 1]:
            apply_frame(history, frame)
        return history


def apply_frame(history: RunHistory, frame: ReplayFrame) -> None:
    history.clock = frame.at
    for event in frame.events:
        history.add_event(event)
    for sample in frame.samples:
        history.add_broker(sample)
    if frame.tick is not None:
        history.add_tick(frame.tick)
    if frame.summary is not None:
        history.run_ended(frame.ended, frame.summary)


def load_replay(session: Session) -> Replay:
    """Every tick of the session as a frame, ready to play.

    Ticks and broker samples are the session reader's (the live run's, read back through
    the engine's own aggregation); a frame holds one tick and the samples and events that
    came after the previous one. A session without ticks (nothing was recorded before it
    stopped) gets one empty frame a second, so its events still play.
    """
    start = session.manifest.start
    length = session.duration or 0.0
    ticks = session.ticks()
    samples = session.broker_samples()
    events = sorted(session.events, key=lambda e: e.at)
    times = [tick.at for tick in ticks] or [
        start + second for second in range(1, max(1, math.ceil(length)) + 1)
    ]
    frame_ticks: list[Tick | None] = [*ticks] if ticks else [None] * len(times)
    sample_times = [sample.taken_at for sample in samples]
    event_times = [event.at for event in events]
    summary = session.manifest.summary
    frames: list[ReplayFrame] = []
    for number, (at, tick) in enumerate(zip(times, frame_ticks, strict=True)):
        last = number == len(times) - 1
        # The first frame takes what came before it, the last what came after it.
        lo = 0 if number == 0 else bisect.bisect_right(sample_times, times[number - 1])
        hi = len(samples) if last else bisect.bisect_right(sample_times, at)
        elo = 0 if number == 0 else bisect.bisect_right(event_times, times[number - 1])
        ehi = len(events) if last else bisect.bisect_right(event_times, at)
        frames.append(
            ReplayFrame(
                second=number + 1,
                at=at,
                tick=tick,
                samples=tuple(samples[lo:hi]),
                events=tuple(events[elo:ehi]),
                ended=session.manifest.end if last else None,
                summary=summary if last else None,
            )
        )
    return Replay(name=session.manifest.name, start=start, length=length, frames=frames)
