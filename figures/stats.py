"""Per-second, per-phase and whole-run statistics over client rows and broker polls (pure).

Client rows (one per worker and snapshot, as the recorder writes them) become a row per run
second, summed over workers, and a row per phase; broker polls become a row per phase (depth
at its first and last poll, its trends, memory, alarm seconds). The live per-phase table,
the replay, the run summary and the Spark report all reach these through
:func:`figures.run.run_figures`; Spark only reduces the recorded rows to their inputs. Rules
in ``docs/reports.md``.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flowdeck.figures.phases import Phase, middle_of, phase_at, second_of
from flowdeck.figures.trend import recent, slope

#: Client rows covering less than this many seconds are left out of rates and gauges.
MIN_INTERVAL_S = 0.5
_COUNTS = (("published", "publish"), ("confirmed", "confirm"), ("consumed", "consume"),
           ("nacked", "nack"), ("returned", "return"))  # fmt: skip
_GAUGES = ("pending_confirms", "unacked", "blocked_connections")
Row = dict[str, Any]
SETTINGS: tuple[str, ...] = ("inflight", "prefetch", "ack_every", "rate", "publishers",
                             "consumers")  # fmt: skip


def _grouped(rows: Iterable[Row], *keys: str) -> dict[tuple[Any, ...], list[Row]]:
    groups: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in keys)].append(row)
    return groups


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _known(rows: Iterable[Row], column: str) -> list[Any]:
    return [row[column] for row in rows if row.get(column) is not None]


def _largest(values: Iterable[Any]) -> Any:
    """The largest known value (None when no worker recorded the column)."""
    return max((v for v in values if v is not None), default=None)


def _mode(values: Sequence[Any]) -> Any:
    """The value most seconds had (the earliest of equally common ones)."""
    return Counter(values).most_common(1)[0][0] if values else None


def client_seconds(
    rows: Iterable[Row],
    session: str,
    run_start_us: int,
    phases: Sequence[Phase],
    settings: Sequence[str] = SETTINGS,
) -> list[Row]:
    """One row per run second of a session's client rows (``t_us`` and the client table's
    columns), summed over workers, in time order.

    A worker's row belongs to the second holding the middle of its interval and the second
    to the phase in force at its middle (``phases.second_of``); rows covering less than
    :data:`MIN_INTERVAL_S` (the run's cut-short last interval) are left out, as they would
    read as a dip that never happened. Per worker and second: counts over its intervals'
    length, gauges and settings as at its last row, paused when publishing was paused at
    either end of an interval (the worker's previous row says how it began). Per second:
    rates and gauges summed over workers; the target (each worker's over its intervals,
    :func:`target_over`) summed (a worker without publishers
    adds 0), none when the rate has no limit or no worker had a target (paused, stopped, no
    publishers anywhere); settings and client counts the largest any worker
    recorded (each records the run's whole count, so never their sum).

    A row of a load second ending after publishing stopped at the run's end (the drain
    phase's start) carries the target its worker had before: its 0 says the worker
    stopped, not that it had no rate limit, and the load's last second often holds such a
    row (a worker's interval straddling the stop). The drain's seconds keep their 0."""
    stopped_us = phases[-1].begin_us if phases and phases[-1].drain else None
    boundaries = sorted(p.begin_us for p in phases[1:])
    per_worker: dict[tuple[int, int], list[Row]] = defaultdict(list)
    began_paused: dict[int, bool] = {}
    target_before: dict[int, float] = {}
    for row in sorted(rows, key=lambda r: (r["worker"], r["t_us"])):
        paused = bool(row["paused"]) or began_paused.get(row["worker"], False)
        began_paused[row["worker"]] = bool(row["paused"])
        second = second_of(row["t_us"], run_start_us)
        target = row["target_rate"]
        if stopped_us is None or row["t_us"] <= stopped_us:
            before = target_before.get(row["worker"])
            target_before[row["worker"]] = target
            target = target_over(row, before, boundaries)
        elif middle_of(second, run_start_us) < stopped_us:  # a load second
            target = target_before.get(row["worker"], target)
        if row["interval_s"] < MIN_INTERVAL_S:
            continue
        per_worker[(second, row["worker"])].append({**row, "paused": paused, "target_rate": target})
    seconds: dict[int, list[Row]] = defaultdict(list)
    for (second, _), intervals in per_worker.items():
        last = intervals[-1]
        length = sum(r["interval_s"] for r in intervals)
        worker: Row = {f"{name}_rate": sum(r[count] for r in intervals) / length
                       for count, name in _COUNTS}  # fmt: skip
        worker.update({name: last.get(name) for name in (*_GAUGES, "target_rate", *settings)})
        worker["paused"] = int(any(r["paused"] for r in intervals))
        seconds[second].append(worker)
    result = []
    for second in sorted(seconds):
        workers = seconds[second]
        # A worker's target is its publishers' rates summed: 0 with a rate limit set means it
        # runs no publishers (it adds nothing); the limit 0 means no limit at all.
        limited = all((w.get("rate") or 0) > 0 for w in workers)
        target = sum(w["target_rate"] for w in workers) if limited else 0.0
        figures: Row = {
            "session": session,
            "phase": phase_at(phases, middle_of(second, run_start_us)).index,
            "sec": second,
            **{f"{name}_rate": sum(w[f"{name}_rate"] for w in workers) for _, name in _COUNTS},
            **{gauge: sum(w[gauge] for w in workers) for gauge in _GAUGES},
            "target_rate": target if target > 0 else None,
            **{name: _largest(w[name] for w in workers) for name in settings},
            "paused": max(w["paused"] for w in workers),
        }
        result.append(figures)
    return result


def target_over(row: Row, before: float | None, boundaries: Sequence[int]) -> float | None:
    """The target a worker's row had over its interval: its own (the target at its end),
    unless the target changed within the interval (``before``: the worker's previous row's).
    Then the interval ran at ``before`` up to the change and at the new target after it, so
    the target is the two weighted by those parts: the change's boundary in the interval
    (the last of ``boundaries``, the phases' starts, inside it), or its middle when none
    is. Judged against the row's own target, a second straddling a rise would read as a
    publisher falling short of a rate it was not yet asked for."""
    target: float | None = row["target_rate"]
    if before is None or target is None or before == target:
        return target
    end_us = row["t_us"]
    begin_us = end_us - round(float(row["interval_s"]) * 1_000_000)
    if end_us <= begin_us:
        return target
    inside = bisect.bisect_left(boundaries, end_us) - 1
    change_us = (
        boundaries[inside]
        if inside >= 0 and boundaries[inside] > begin_us
        else (begin_us + end_us) // 2
    )
    share_before = (change_us - begin_us) / (end_us - begin_us)
    return float(before * share_before + target * (1 - share_before))


def phase_client_stats(
    seconds: Iterable[Row],
    throughput: Mapping[tuple[str, int], Row],
    settings: Sequence[str] = SETTINGS,
) -> list[Row]:
    """Per session and phase: messages, active seconds and rate means on the summary's
    basis (``throughput``: :func:`figures.active.phase_throughput` per session and
    phase), population standard deviations and minima of the rates over its seconds (how
    steady), the target over its seconds not paused (when each of them has one), gauge
    means and maxima, blocked and paused seconds, and each setting's most common value.
    A phase in ``throughput`` with no whole second of its own (a drain holding only the
    run's cut-short last interval) gets its messages and rates, and no second figures."""
    result = []
    grouped = _grouped(seconds, "session", "phase")
    for key in sorted(set(grouped) | set(throughput)):
        session, phase = key
        rows = grouped.get(key, [])
        running = [r for r in rows if not r.get("paused")]
        stats: Row = {"session": session, "phase": phase, "seconds": len(rows)}
        stats.update(throughput.get(key, {}))
        for name in ("publish_rate", "confirm_rate", "consume_rate"):
            values = _known(rows, name)
            stats[f"{name}_sd"] = statistics.pstdev(values) if values else None
            stats[f"{name}_min"] = min(values, default=None)
        targets = _known(running, "target_rate")
        # Paused seconds have no target and are left out; a second publishing without one
        # (no rate limit, or a 1.0/1.1 session's drain) leaves the phase without.
        stats["target_rate"] = (
            statistics.fmean(targets) if running and len(targets) == len(running) else None
        )
        for gauge in ("pending_confirms", "unacked"):
            values = _known(rows, gauge)
            stats[f"{gauge}_mean"] = _mean(values)
            stats[f"{gauge}_max"] = max(values, default=None)
        stats["blocked_s"] = sum(1 for r in rows if (r.get("blocked_connections") or 0) > 0)
        stats["paused_s"] = sum(int(r.get("paused") or 0) for r in rows)
        for name in settings:
            stats[name] = _mode(_known(sorted(rows, key=lambda r: r["sec"]), name))
        result.append(stats)
    return result


def session_client_stats(seconds: Iterable[Row], whole: Mapping[str, Row]) -> list[Row]:
    """Per session: seconds with data, the whole run's messages, active seconds and rate
    means (``whole``: :func:`figures.active.whole_throughput` per session), the
    largest pending confirms and the seconds with a blocked connection."""
    result = []
    grouped = _grouped(seconds, "session")
    for session in sorted({key for (key,) in grouped} | set(whole)):
        rows = grouped.get((session,), [])
        result.append(
            {
                "session": session,
                "seconds": len({r["sec"] for r in rows}),
                **whole.get(session, {}),
                "pending_confirms_max": max(_known(rows, "pending_confirms"), default=None),
                "blocked_s": sum(1 for r in rows if (r.get("blocked_connections") or 0) > 0),
            }
        )
    return result


def chosen_polls(polls: Iterable[Row]) -> dict[str, list[Row]]:
    """Per session, the fresh polls of its main source (the one with most fresh polls; on
    a tie the later name), in time order."""
    by_source = _grouped(polls, "session", "source")
    chosen: dict[str, tuple[int, str]] = {}
    for (session, source), rows in by_source.items():
        chosen[session] = max(chosen.get(session, (0, "")), (len(rows), source))
    return {
        session: sorted(by_source[(session, source)], key=lambda r: r["t_us"])
        for session, (_, source) in chosen.items()
    }


def _first_last(rows: Sequence[Row], column: str) -> tuple[Any, Any]:
    known = [r[column] for r in rows if r.get(column) is not None]
    return (known[0], known[-1]) if known else (None, None)


def phase_broker_stats(
    polls: Mapping[str, list[Row]], phases: Mapping[str, tuple[int, Sequence[Phase]]]
) -> list[Row]:
    """Per session and phase, over the polls taken while it was in force: depth at its
    first and last poll, the largest depth and the least-squares slope (msg/s), memory
    peak, blocked connections; and the seconds in alarm, a poll's state holding until the
    next poll (or the run's end). ``phases``: per session, its run start (µs) and phases."""
    result = []
    for session, rows in polls.items():
        run_start, session_phases = phases[session]
        run_end = session_phases[-1].finish_us
        ends = [p.end_us for p in session_phases]
        in_phase: dict[int, list[Row]] = defaultdict(list)
        for row in rows:
            in_phase[session_phases[bisect.bisect_right(ends, row["t_us"])].index].append(row)
        for phase in session_phases:
            mine = in_phase.get(phase.index, [])
            alarm = _alarm_seconds(rows, phase, run_end)
            if not mine and alarm is None:
                continue
            first, last = _first_last(mine, "queue_ready")
            depths = [
                ((r["t_us"] - run_start) / 1e6, float(r["queue_ready"]))
                for r in mine
                if r.get("queue_ready") is not None
            ]
            stat: Row = {
                "session": session,
                "phase": phase.index,
                "polls": len(mine) or None,
                "depth_start": first,
                "depth_end": last,
                "depth_max": max(_known(mine, "queue_ready"), default=None),
                "depth_slope": slope(depths),
                "depth_recent_slope": slope(recent(depths)),
                "mem_peak": max(_known(mine, "mem_used"), default=None),
                "mem_limit": max(_known(mine, "mem_limit"), default=None),
                "connections_blocked_max": max(_known(mine, "connections_blocked"), default=None),
                **_flow_figures(mine),
            }
            stat.update(
                alarm
                or {"mem_alarm_s": None, "disk_alarm_s": None, "alarm_s": None, "flow_s": None}
            )
            result.append(stat)
    return result


#: Flow-control and pipeline figures a phase keeps the largest of (None before format 1.5).
FLOW_MAXIMA: tuple[str, ...] = (
    "connections_flow", "channels_flow", "run_publishers_flow", "before_queues",
    "run_unconfirmed", "queue_ready", "run_unacked",
)  # fmt: skip


def _flow_figures(rows: Sequence[Row]) -> Row:
    """A phase's credit flow and pipeline from its polls: the most connections, channels
    and of the run's publishers in flow; where the run's messages waited at their worst
    (``before_queues``: sent by the clients, not yet taken in by the broker; unconfirmed at
    the broker; ready in the queues; delivered, not acked) and the broker's mean accept
    rate (msg/s, from its own channel statistics)."""
    figures: Row = {f"{name}_max": max(_known(rows, name), default=None) for name in FLOW_MAXIMA}
    before = _known(rows, "before_queues")
    figures["before_queues_mean"] = _mean(before)
    figures["accept_rate_mean"] = _mean(_known(rows, "run_accept_rate"))
    return figures


def _alarm_seconds(rows: Sequence[Row], phase: Phase, run_end: int | None) -> Row | None:
    """Seconds of the phase in memory alarm, disk alarm and either, and with some of the
    run's publishers in credit flow; None when no poll's interval overlaps the phase."""
    spans: dict[str, float] = {
        "mem_alarm_s": 0.0, "disk_alarm_s": 0.0, "alarm_s": 0.0, "flow_s": 0.0,
    }  # fmt: skip
    overlapping = False
    for index, row in enumerate(rows):
        begin = row["t_us"]
        until = rows[index + 1]["t_us"] if index + 1 < len(rows) else (run_end or begin)
        if not (begin < phase.end_us and until > phase.start_us):
            continue
        end = min(until, phase.end_us, run_end if run_end is not None else until)
        span = (end - max(begin, phase.start_us)) / 1e6
        if span <= 0:
            continue  # polls after the run's end hold for 0 s
        overlapping = True
        if row.get("mem_alarm"):
            spans["mem_alarm_s"] += span
        if row.get("disk_alarm"):
            spans["disk_alarm_s"] += span
        if row.get("mem_alarm") or row.get("disk_alarm"):
            spans["alarm_s"] += span
        if (row.get("run_publishers_flow") or 0) > 0:
            spans["flow_s"] += span
    return spans if overlapping else None
