"""Splitting a run into phases at its applied changes and phase marks (pure, no Spark).

The recorder writes a ``phase`` event at run start, at each applied change and at each
mark, and a ``change_applied`` event when a change is in force in every worker. Either
starts a phase; the two events of one change (same ``change_id``, or less than
:data:`MERGE_WINDOW_S` apart) start one phase, named by the ``phase`` event when there is
one. Times are integer microseconds since the epoch, so assigning a recorded second to a
phase is an exact comparison: a row belongs to the phase in which its interval *ended*
(``start < ts <= end``).

A ``drain`` event (session format 1.2) marks where publishing stopped at the run's end: the
seconds after it are the consumers' drain, a phase of its own (``Phase.drain``) that has no
target and is not a load phase. Changes recorded after it start no phase. Sessions without
one (format 1.0 and 1.1) keep the drain inside their last phase, as they always did.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KIND_PHASE = "phase"
KIND_CHANGE_APPLIED = "change_applied"
KIND_RUN_STARTED = "run_started"
KIND_RUN_STOPPED = "run_stopped"
KIND_DRAIN = "drain"
#: The label of the phase after the drain event.
DRAIN_LABEL = "drain"

#: Two boundary events closer than this are one boundary (a change's applied + phase pair).
MERGE_WINDOW_S = 0.5
#: A boundary within this long of the run's start names the first phase instead of starting
#: one: the run's first second belongs to the first phase whatever its name, so a change
#: in force by then (a schedule's step at 0 s) is that phase's setting, and the engine's
#: ``start`` marker before it never becomes a phase of no seconds.
START_WINDOW_S = 1.0

#: A worker's row belongs to the run second holding the middle of its (one-second)
#: interval: ``floor((ts - run start - HALF_SECOND_US) / 1 s)``; a second belongs to the
#: phase in force at its middle (``docs/reports.md``).
HALF_SECOND_US = 500_000

#: Bounds of the first and last phase: every recorded row falls into some phase.
BEFORE_EVERYTHING_US = -(2**62)
AFTER_EVERYTHING_US = 2**62


@dataclass(frozen=True, slots=True)
class Boundary:
    """Where a phase starts: unix microseconds, the label and the change it came from."""

    at_us: int
    label: str
    change_id: int | None
    from_phase_event: bool


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase of one session. ``start_us``/``end_us`` are the bounds used to assign rows
    (open at the ends of the run); ``begin_us``/``finish_us`` the real times for durations
    (``finish_us`` is None while the end of an unfinished session is not known). ``drain``:
    the seconds after publishing stopped at the run's end, not a load phase."""

    index: int
    label: str
    start_us: int
    end_us: int
    begin_us: int
    finish_us: int | None
    drain: bool = False

    @property
    def duration_s(self) -> float | None:
        if self.finish_us is None:
            return None
        return (self.finish_us - self.begin_us) / 1e6


def to_us(unix_seconds: float) -> int:
    return round(unix_seconds * 1_000_000)


def boundaries_from_events(events: Iterable[Mapping[str, Any]]) -> list[Boundary]:
    """The phase boundaries among the events, merged and in time order."""
    raw: list[Boundary] = []
    for event in events:
        kind = event.get("kind")
        if kind not in (KIND_PHASE, KIND_CHANGE_APPLIED):
            continue
        detail = event.get("detail") or {}
        label = str(detail.get("label") or event.get("message") or "").strip()
        change_id = event.get("change_id")
        raw.append(
            Boundary(
                at_us=to_us(float(event["at"])),
                label=label,
                change_id=int(change_id) if isinstance(change_id, int) else None,
                from_phase_event=kind == KIND_PHASE,
            )
        )
    raw.sort(key=lambda b: (b.at_us, not b.from_phase_event))
    merged: list[Boundary] = []
    for boundary in raw:
        if merged and _same_boundary(merged[-1], boundary):
            previous = merged[-1]
            # Keep the earlier time; prefer the phase event's label, and of two phase
            # events the later one's: the earlier phase lasted no time (the engine's
            # "phase 0: start" followed at once by the schedule's first change).
            label = previous.label
            if boundary.from_phase_event:
                label = boundary.label or previous.label
            merged[-1] = Boundary(
                at_us=previous.at_us,
                label=label or boundary.label,
                change_id=previous.change_id
                if previous.change_id is not None
                else boundary.change_id,
                from_phase_event=previous.from_phase_event or boundary.from_phase_event,
            )
        else:
            merged.append(boundary)
    return merged


def _same_boundary(a: Boundary, b: Boundary) -> bool:
    if a.change_id is not None and a.change_id == b.change_id:
        return True
    return abs(b.at_us - a.at_us) < MERGE_WINDOW_S * 1e6


def run_end_us(events: Sequence[Mapping[str, Any]], manifest_end: float | None) -> int | None:
    """When the run ended: the manifest's end, else the run_stopped event, else unknown."""
    if manifest_end is not None:
        return to_us(manifest_end)
    stops = [float(e["at"]) for e in events if e.get("kind") == KIND_RUN_STOPPED]
    return to_us(max(stops)) if stops else None


def drain_us(
    events: Sequence[Mapping[str, Any]], begin_us: int, finish_us: int | None
) -> int | None:
    """When publishing stopped at the run's end (the first drain event inside the run), or
    None for a session without one."""
    for event in events:
        if event.get("kind") != KIND_DRAIN:
            continue
        at = to_us(float(event["at"]))
        if at > begin_us and (finish_us is None or at < finish_us):
            return at
    return None


def split_phases(
    events: Sequence[Mapping[str, Any]], run_start: float, run_end: float | None
) -> list[Phase]:
    """The phases of a run: one from the start, then one per boundary after the start, and
    the drain last when the session recorded where publishing stopped."""
    begin = to_us(run_start)
    finish = run_end_us(events, run_end)
    drain = drain_us(events, begin, finish)
    boundaries = [b for b in boundaries_from_events(events) if b.at_us > begin]
    if finish is not None:
        boundaries = [b for b in boundaries if b.at_us < finish]
    if drain is not None:
        # No change starts a phase once publishing has stopped. The drain is kept apart from
        # the boundary merging: a change applied just before it still ends the load there.
        boundaries = [b for b in boundaries if b.at_us < drain]
    # A phase event at (or before) the start names the first phase, and the last boundary
    # within the first second (START_WINDOW_S) renames it rather than starting a phase.
    first_label = "start"
    for boundary in boundaries_from_events(events):
        if boundary.at_us <= begin + MERGE_WINDOW_S * 1e6 and boundary.label:
            first_label = boundary.label
            break
    while boundaries and boundaries[0].at_us <= begin + START_WINDOW_S * 1e6:
        first_label = boundaries[0].label or first_label
        boundaries = boundaries[1:]
    starts = [begin, *(b.at_us for b in boundaries)]
    labels = [first_label, *(b.label or f"phase {i + 1}" for i, b in enumerate(boundaries))]
    if drain is not None:
        starts.append(drain)
        labels.append(DRAIN_LABEL)
    phases: list[Phase] = []
    for index, (start, label) in enumerate(zip(starts, labels, strict=True)):
        last = index == len(starts) - 1
        phases.append(
            Phase(
                index=index,
                label=label,
                start_us=BEFORE_EVERYTHING_US if index == 0 else start,
                end_us=AFTER_EVERYTHING_US if last else starts[index + 1],
                begin_us=start,
                finish_us=finish if last else starts[index + 1],
                drain=drain is not None and last,
            )
        )
    return phases


def second_of(t_us: int, run_start_us: int) -> int:
    """The run second a worker's row ending at ``t_us`` belongs to (``HALF_SECOND_US``)."""
    return (t_us - run_start_us - HALF_SECOND_US) // 1_000_000


def middle_of(second: int, run_start_us: int) -> int:
    return run_start_us + second * 1_000_000 + HALF_SECOND_US


def phase_at(phases: Sequence[Phase], t_us: int) -> Phase:
    """The phase in force at ``t_us``: phases are ``[start, end)``, the first open to the
    past and the last to the future."""
    return phases[bisect.bisect_right([p.end_us for p in phases[:-1]], t_us)]
