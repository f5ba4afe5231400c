"""What went wrong in a session, from the events it recorded (pure Python, no Spark).

Outages (a worker lost its broker connection), memory and disk alarms, connections
blocked by flow control, broker sources that went stale, nodes lost on purpose (a node
fault's ``kill`` or ``stop`` until its ``start`` or ``restart``), nodes cut off by a
partition (``partition`` until ``heal``), and errors: each with when it
started and ended, how long it lasted, how long the publishers and the consumers stood
still after it (from their per-second rates) and how long after it began the consumers
were back at the rate they had before it. The manifest's
summary adds what the run lost: confirmed but never consumed, consumed twice,
unconfirmed, nacked, returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Consumers are "back" once a second's consume rate reaches this share of the mean over
#: the seconds before the fault.
RECOVERED_SHARE = 0.95
#: How many seconds before a fault make its "before" rate.
BEFORE_SECONDS = 5
#: A side (publishers or consumers) is interrupted in a second whose rate is at most this
#: share of its mean over the seconds before the fault.
STALLED_SHARE = 0.05

#: Event kinds that open and close a fault, and what the fault is called.
_PAIRS: dict[str, tuple[str, str]] = {
    "outage_started": ("outage_ended", "outage"),
    "alarm_raised": ("alarm_cleared", "alarm"),
    "blocked": ("unblocked", "blocked"),
    "source_stale": ("source_recovered", "source stale"),
}


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: run-relative seconds; ``end_s`` None when it was still on at the end.
    ``recovered_after_s``: seconds from its start until the consume rate was back at
    :data:`RECOVERED_SHARE` of its rate before (None: never, or no rate to compare)."""

    kind: str
    subject: str
    start_s: float
    end_s: float | None
    recovered_after_s: float | None
    detail: str
    #: Seconds the publishers (confirms, or publishes without confirms) and the consumers
    #: stood still after it (see :func:`interrupted_s`); None: no rate to compare, or the
    #: publishers' rate was not given.
    publishers_interrupted_s: float | None = None
    consumers_interrupted_s: float | None = None

    @property
    def duration_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


def _subject(kind: str, detail: Mapping[str, Any], message: str) -> str:
    if kind == "outage":
        return f"worker {detail.get('worker', '?')}"
    if kind == "alarm":
        return f"{detail.get('alarm', '?')} alarm"
    if kind == "blocked":
        return str(detail.get("connection") or message)
    if kind == "source stale":
        # Sessions recorded before the events named their source in the detail say it
        # first: "management: <reason>" when stale, "management answers again" after.
        return str(detail.get("source") or message.split(":", 1)[0].split(" ")[0])
    return message


def faults(
    events: Sequence[Mapping[str, Any]],
    run_start: float,
    consume_per_second: Mapping[int, float],
    publish_per_second: Mapping[int, float] | None = None,
) -> list[Fault]:
    """The session's faults in time order. Alarms raised by both sources (management and
    Prometheus) are one alarm while either says so. ``consume_per_second``: the consume
    rate per run second, which says when consumers recovered and how long they stood
    still; ``publish_per_second`` (the confirm rate with confirms, else the publish rate):
    how long the publishers stood still."""
    open_faults: dict[tuple[str, str], tuple[float, Mapping[str, Any]]] = {}
    found: list[tuple[str, str, float, float | None, str]] = []
    closing = {end: (start, name) for start, (end, name) in _PAIRS.items()}
    alarm_sources: dict[str, set[str]] = {}
    for event in sorted(events, key=lambda e: float(e["at"])):
        kind = str(event.get("kind"))
        at = float(event["at"]) - run_start
        detail: Mapping[str, Any] = event.get("detail") or {}
        message = str(event.get("message") or "")
        if kind == "info" and detail.get("fault") and detail.get("stage") == "done":
            _node_fault(detail, at, open_faults, found)
            continue
        if kind == "error":
            found.append(("error", message[:80], at, at, message))
            continue
        if kind in _PAIRS:
            name = _PAIRS[kind][1]
            subject = _subject(name, detail, message)
            if name == "alarm":
                sources = alarm_sources.setdefault(subject, set())
                sources.add(str(detail.get("source", "")))
                if len(sources) > 1:
                    continue  # already open from the other source
            open_faults.setdefault((name, subject), (at, detail))
        elif kind in closing:
            name = closing[kind][1]
            subject = _subject(name, detail, message)
            if name == "alarm":
                sources = alarm_sources.get(subject, set())
                sources.discard(str(detail.get("source", "")))
                if sources:
                    continue  # the other source still says so
            opened = open_faults.pop((name, subject), None)
            if opened is not None:
                found.append((name, subject, opened[0], at, _describe(name, detail, message)))
    for (name, subject), (at, _) in open_faults.items():
        found.append((name, subject, at, None, "still on when the run ended"))
    found.sort(key=lambda f: f[2])
    return [
        Fault(
            name,
            subject,
            start,
            end,
            _recovered_after(start, end, consume_per_second),
            text,
            None if publish_per_second is None else interrupted_s(start, end, publish_per_second),
            interrupted_s(start, end, consume_per_second),
        )
        for name, subject, start, end, text in found
    ]


def _node_fault(
    detail: Mapping[str, Any],
    at: float,
    open_faults: dict[tuple[str, str], tuple[float, Mapping[str, Any]]],
    found: list[tuple[str, str, float, float | None, str]],
) -> None:
    """A node fault done: a ``kill`` or ``stop`` opens a "node down" row for its node, the
    node's next ``start`` or ``restart`` closes it; a restart of a running node is a row of
    its own, down for the time the restart took. A ``partition`` opens a "partition" row
    for its node and its ``heal`` closes it, the same way."""
    if not detail.get("changed", True):
        return
    node = str(detail.get("nodename") or detail.get("node") or "?")
    action = str(detail.get("fault"))
    source = str(detail.get("source") or "?")
    if action in ("partition", "heal"):
        _pair(("partition", node), action == "partition", detail, at, open_faults, found)
        return
    key = ("node down", node)
    was_down = key in open_faults
    _pair(key, action in ("kill", "stop"), detail, at, open_faults, found)
    if action == "restart" and not was_down:
        took = float(detail.get("took_s") or 0.0)
        found.append(("node down", node, at - took, at, f"restart ({source}) took {took:.1f} s"))


def _pair(
    key: tuple[str, str],
    opens: bool,
    detail: Mapping[str, Any],
    at: float,
    open_faults: dict[tuple[str, str], tuple[float, Mapping[str, Any]]],
    found: list[tuple[str, str, float, float | None, str]],
) -> None:
    """Open the row ``key`` (its first opening counts), or close it with what opened it."""
    if opens:
        open_faults.setdefault(key, (at, detail))
        return
    opened = open_faults.pop(key, None)
    if opened is not None:
        first = opened[1]
        text = (
            f"{first.get('fault')} ({first.get('source') or '?'}), then {detail.get('fault')} "
            f"({detail.get('source') or '?'}) after {at - opened[0]:.1f} s"
        )
        found.append((key[0], key[1], opened[0], at, text))


def _describe(name: str, detail: Mapping[str, Any], message: str) -> str:
    if name == "outage":
        return (
            f"{'reconnected' if detail.get('recovered', True) else 'not reconnected'}; "
            f"{detail.get('unconfirmed_at_drop', 0)} unconfirmed and "
            f"{detail.get('unacked_at_drop', 0)} unacked at the drop"
        )
    return message


def _recovered_after(
    start_s: float, end_s: float | None, consume: Mapping[int, float]
) -> float | None:
    """Seconds from ``start_s`` until the consume rate is back at :data:`RECOVERED_SHARE`
    of its mean over the :data:`BEFORE_SECONDS` before the fault: the start of the first
    second at that rate after a dip that began during the fault (or up to
    :data:`BEFORE_SECONDS` after it). 0 when the consumers never dipped; None when there is
    no rate before to compare with, or they never came back within the run."""
    first = int(start_s)
    before = [consume[s] for s in range(first - BEFORE_SECONDS, first) if s in consume]
    if not before or sum(before) <= 0:
        return None
    wanted = RECOVERED_SHARE * sum(before) / len(before)
    dip_by = (start_s if end_s is None else end_s) + BEFORE_SECONDS
    dipped = False
    for second in sorted(s for s in consume if s >= first):
        if consume[second] < wanted:
            if not dipped and second > dip_by:
                break
            dipped = True
        elif dipped:
            return max(0.0, second - start_s)
    return None if dipped else 0.0


def interrupted_s(
    start_s: float, end_s: float | None, per_second: Mapping[int, float]
) -> float | None:
    """How many seconds one side of the run stood still after a fault that began at
    ``start_s``: the longest run of consecutive seconds, the first of them from the fault's
    second up to :data:`BEFORE_SECONDS` after its end (or its start, when it has none), in
    which the side's rate was at most :data:`STALLED_SHARE` of its mean over the
    :data:`BEFORE_SECONDS` before. ``per_second``: the side's rate per run second, the
    confirm rate for publishers with confirms (else the publish rate), the consume rate for
    consumers; a second with no row counts as stalled. Whole seconds (the rows' grain); 0
    when the side never stalled, None when it had no rate before the fault to compare with.
    """
    first = int(start_s)
    before = [per_second[s] for s in range(first - BEFORE_SECONDS, first) if s in per_second]
    if not before or sum(before) <= 0:
        return None
    stalled = STALLED_SHARE * sum(before) / len(before)
    last_start = int((start_s if end_s is None else end_s) + BEFORE_SECONDS)
    end = max(per_second) if per_second else first
    longest = 0
    run_from: int | None = None
    for second in range(first, end + 1):
        if per_second.get(second, 0.0) <= stalled:
            if run_from is None:
                if second > last_start:
                    break
                run_from = second
            longest = max(longest, second - run_from + 1)
        else:
            run_from = None
    return float(longest)


def interruption_sentence(publishers_s: float | None, consumers_s: float | None) -> str:
    """``publishers interrupted 3 s, consumers interrupted 4 s``; ``?`` for a side with no
    rate before the fault."""

    def said(seconds: float | None) -> str:
        return "?" if seconds is None else f"{seconds:.0f} s"

    return f"publishers interrupted {said(publishers_s)}, consumers interrupted {said(consumers_s)}"


@dataclass(frozen=True, slots=True)
class DataSafety:
    """What the run lost, from the manifest's summary (None when the run has none)."""

    published: int
    consumed: int
    lost: int
    duplicates: int
    unconfirmed: int
    nacked: int
    returned: int
    redelivered: int
    confirms: bool

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any] | None) -> DataSafety | None:
        safety = (summary or {}).get("safety")
        if not isinstance(safety, Mapping):
            return None

        def count(name: str) -> int:
            value = safety.get(name)
            return int(value) if isinstance(value, int | float) else 0

        return cls(
            published=count("published"),
            consumed=count("consumed"),
            lost=count("lost"),
            duplicates=count("duplicates"),
            unconfirmed=count("unconfirmed"),
            nacked=count("nacked"),
            returned=count("returned"),
            redelivered=count("redelivered"),
            confirms=bool(safety.get("confirms", True)),
        )

    def sentence(self) -> str:
        lost = (
            f"lost {self.lost:,} (confirmed, never consumed)"
            if self.confirms
            else "loss not assessable (no publisher confirms)"
        )
        return (
            f"published {self.published:,}, consumed {self.consumed:,}; {lost}, duplicated "
            f"{self.duplicates:,}, unconfirmed at the end {self.unconfirmed:,}, nacked "
            f"{self.nacked:,}, returned {self.returned:,}, redelivered {self.redelivered:,}"
        )
