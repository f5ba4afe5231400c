"""Messages over the clients' active time, per phase and for the whole run (pure, no Spark).

A run's summary (``flowdeck run --json``, the progress line's last line, ``flowdeck
sessions show``) gives each mean rate as messages over the clients' own active time:
published over first to last send, confirmed over first send to last confirm, consumed over
first to last delivery (the earliest first and the latest last over all workers). The
report's per-phase and whole-run msg/s, and the live per-phase table of a run
(``engine.phase_figures``), are on that same basis, by this one rule:

* **Messages**: every client row, short ones included, belongs whole to the run second
  holding the middle of its interval, and so to the phase in force at the middle of that
  second (``phases.second_of``): the rule every other figure of a phase follows. A phase's
  messages are the counts of its rows.
* **Active time**: a row covers its interval ``[ts - interval_s, ts]`` of its worker's
  time. The part of it inside the run's active span (for the count in question) is the
  row's active time; a phase's active time is the sum over its rows divided by the number
  of workers (each worker's rows cover the run once).
* **Rate** = messages / active time; 0 when the phase has no active time.

Every worker snapshots from before the first send until after the last delivery, so each
worker's rows cover the whole active span exactly once: the phases' active times add up
to the run's active time and their messages to the run's messages. The whole run's rate is
the summary's, and ``Σ phase rate × phase active time = messages``.

A session that kept no active times (recorded before the summary held them) is given the
run's own bounds instead: publish and confirm from the run's start to where publishing
stopped (its ``drain`` event, else the run's end), consume from the start to the run's end.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowdeck.figures.phases import Phase, middle_of, phase_at, second_of

Row = dict[str, Any]
#: (client-table count, rate name) of the counts with an active span.
COUNTS: tuple[tuple[str, str], ...] = (
    ("published", "publish"),
    ("confirmed", "confirm"),
    ("consumed", "consume"),
)


@dataclass(frozen=True, slots=True)
class Span:
    """From ``first_us`` to ``last_us`` (unix µs); None at an end: open that way."""

    first_us: int | None
    last_us: int | None

    def overlap_us(self, begin_us: int, end_us: int) -> int:
        """How much of ``[begin_us, end_us]`` lies inside the span."""
        low = begin_us if self.first_us is None else max(begin_us, self.first_us)
        high = end_us if self.last_us is None else min(end_us, self.last_us)
        return max(0, high - low)

    @property
    def seconds(self) -> float | None:
        if self.first_us is None or self.last_us is None:
            return None
        return max(0, self.last_us - self.first_us) / 1e6


OPEN = Span(None, None)


@dataclass(frozen=True, slots=True)
class ActiveSpans:
    """When the clients published, got confirms and consumed, over all workers.

    ``recorded``: the run's own first and last send, confirm and delivery (the summary's
    ``active``); otherwise the run's bounds stand in (module docstring).
    """

    publish: Span = OPEN
    confirm: Span = OPEN
    consume: Span = OPEN
    recorded: bool = False

    def of(self, name: str) -> Span:
        span: Span = getattr(self, name)
        return span

    @classmethod
    def from_times(
        cls,
        first_publish: float | None,
        last_publish: float | None,
        last_confirm: float | None,
        first_consume: float | None,
        last_consume: float | None,
    ) -> ActiveSpans:
        """From the workers' own times (unix seconds; None: it never happened, no span)."""

        def span(first: float | None, last: float | None) -> Span:
            if first is None or last is None:
                return Span(0, 0)  # nothing happened: no active time
            return Span(_us(first), _us(last))

        return cls(
            publish=span(first_publish, last_publish),
            confirm=span(first_publish, last_confirm),
            consume=span(first_consume, last_consume),
            recorded=True,
        )

    @classmethod
    def of_session(
        cls,
        summary: Mapping[str, Any] | None,
        run_start_us: int,
        publishing_end_us: int | None,
        run_end_us: int | None,
    ) -> ActiveSpans:
        """The summary's ``active`` times when the session kept them, else the run's
        bounds (``publishing_end_us``: where publishing stopped, None: not recorded)."""
        active = (summary or {}).get("active")
        if isinstance(active, Mapping):
            times = [active.get(name) for name in ACTIVE_FIELDS]
            if all(t is None or isinstance(t, int | float) for t in times):
                return cls.from_times(*(None if t is None else float(t) for t in times))
        publishing = Span(run_start_us, publishing_end_us or run_end_us)
        return cls(publishing, publishing, Span(run_start_us, run_end_us))


#: The summary's ``active`` fields, in :meth:`ActiveSpans.from_times` order.
ACTIVE_FIELDS = ("first_publish", "last_publish", "last_confirm", "first_consume", "last_consume")


def _us(unix_seconds: float) -> int:
    return round(unix_seconds * 1_000_000)


def rate(messages: float, seconds: float) -> float:
    """``messages`` over ``seconds`` of activity; 0 without any."""
    return messages / seconds if seconds > 0 else 0.0


def phase_throughput(
    rows: Iterable[Row],
    run_start_us: int,
    phases: Sequence[Phase],
    spans: ActiveSpans,
    paused_seconds: Collection[int] = (),
) -> dict[int, Row]:
    """Per phase index: messages (``published``, ``confirmed``, ``consumed``), active seconds
    (``publish_s``, ``confirm_s``, ``consume_s``) and ``*_rate_mean`` (messages / active
    seconds), and the publish figures of its seconds not in ``paused_seconds``
    (``publish_rate_unpaused_mean``: what a target is compared with).

    ``rows``: one session's client rows (``worker``, ``t_us``: the interval's end,
    ``interval_s`` and the counts), short ones included. Every phase is in the result."""
    messages: dict[tuple[int, str], float] = defaultdict(float)
    covered_us: dict[tuple[int, str], int] = defaultdict(int)
    workers: set[Any] = set()
    for row in rows:
        workers.add(row["worker"])
        second = second_of(row["t_us"], run_start_us)
        phase = phase_at(phases, middle_of(second, run_start_us)).index
        end_us = row["t_us"]
        begin_us = end_us - round(float(row["interval_s"]) * 1_000_000)
        unpaused = second not in paused_seconds
        for count, name in COUNTS:
            overlap = spans.of(name).overlap_us(begin_us, end_us)
            messages[(phase, name)] += row[count]
            covered_us[(phase, name)] += overlap
            if name == "publish" and unpaused:
                messages[(phase, "publish_unpaused")] += row[count]
                covered_us[(phase, "publish_unpaused")] += overlap
    per_worker = max(1, len(workers)) * 1_000_000
    result: dict[int, Row] = {}
    for phase_row in phases:
        index = phase_row.index
        figures: Row = {}
        for count, name in COUNTS:
            seconds = covered_us[(index, name)] / per_worker
            figures[count] = int(messages[(index, name)])
            figures[f"{name}_s"] = seconds
            figures[f"{name}_rate_mean"] = rate(messages[(index, name)], seconds)
        unpaused_s = covered_us[(index, "publish_unpaused")] / per_worker
        figures["publish_rate_unpaused_mean"] = rate(
            messages[(index, "publish_unpaused")], unpaused_s
        )
        result[index] = figures
    return result


def whole_throughput(phases: Iterable[Row]) -> Row:
    """The whole run from its phases' :func:`phase_throughput` rows: messages and active
    seconds summed, and their quotient."""
    rows = list(phases)
    whole: Row = {}
    for count, name in COUNTS:
        total = sum(int(r[count]) for r in rows)
        seconds = sum(float(r[f"{name}_s"]) for r in rows)
        whole[count] = total
        whole[f"{name}_s"] = seconds
        whole[f"{name}_rate_mean"] = rate(total, seconds)
    return whole
