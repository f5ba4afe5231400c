"""A run's per-phase figures, verdicts, sweeps and recommendation: the one computation.

Six places answer "which setting is best, and why": the cockpit's per-setting table, the
autopilot, the replay, the run summary (text and ``--json``), ``flowdeck sessions
show/list`` and the Spark report. Each gathers the same inputs (:class:`RunInputs`: the
client rows the recorder writes, the broker polls, the latency buckets per phase, the
run's events) and calls :func:`run_figures`; what differs is only where the rows come from
(a running run's snapshots, a recorded session, Spark's reduction of many sessions). So the
phase list, every phase's msg/s and percentiles, the verdicts and the recommendation are the
same figures everywhere, to the precision each prints.

Rules (``docs/reports.md`` quotes them):

* Phases: :func:`figures.phases.split_phases` over the run's events.
* Client figures: :mod:`figures.stats` (per second, per phase) and :mod:`figures.active`
  (msg/s over the clients' active time).
* Broker figures: the fresh polls of the run's main source (:func:`stats.chosen_polls`); a
  poll belongs to the phase in force when it was taken.
* Latency: the phase's bucket counts (:mod:`figures.latency`), merged exactly.
* Verdicts: :func:`figures.verdict.judge`; sweeps and the recommendation:
  :func:`figures.sweep.recommend`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import accumulate
from typing import Any

from flowdeck.figures import active, stats
from flowdeck.figures.latency import QUANTILE_NAMES, Percentiles, percentiles_of
from flowdeck.figures.phases import Phase
from flowdeck.figures.sweep import (
    Capacity,
    RatePoint,
    Recommendation,
    SweepPoint,
    capacity,
    ranked_throughput,
    recommend,
)
from flowdeck.figures.trend import recent, slope
from flowdeck.figures.verdict import PhaseLoad, Verdict, judge

Row = dict[str, Any]
#: A latency's key: (kind, basis), e.g. ("e2e", "actual").
LatencyKey = tuple[str, str]
#: The latency the sweeps judge by, like the seeds' consumer-side latency.
SWEEP_LATENCY: LatencyKey = ("e2e", "actual")
#: The settings every recorded run carries, in the order the registry lists them (a run
#: recorded with more says so in its inputs).
SETTINGS: tuple[str, ...] = stats.SETTINGS
#: The settings a run sweeps when its load phases ran at two or more values of one.
SWEEP_SETTINGS: tuple[str, ...] = ("inflight", "prefetch", "ack_every")
#: The client and broker figures a phase's JSON carries, by the report's names.
CLIENT_FIGURES: tuple[str, ...] = (
    "target_rate",
    *(f"{rate}_rate_{stat}" for rate in ("publish", "confirm", "consume")
      for stat in ("mean", "sd", "min")),
    "published", "confirmed", "consumed", "publish_s", "confirm_s", "consume_s",
    "pending_confirms_mean", "pending_confirms_max", "unacked_mean", "unacked_max",
    "blocked_s", "paused_s",
)  # fmt: skip
BROKER_FIGURES: tuple[str, ...] = (
    "depth_start", "depth_end", "depth_max", "depth_slope", "depth_recent_slope", "mem_peak",
    "alarm_s", "flow_s", "run_publishers_flow_max", "connections_flow_max",
    "channels_flow_max", "before_queues_mean", "before_queues_max", "accept_rate_mean",
)  # fmt: skip
#: What limits each swept setting's window: (the gauge, the client count it multiplies).
WINDOWS: dict[str, tuple[str, str]] = {
    "inflight": ("pending_confirms_max", "publishers"),
    "prefetch": ("unacked_max", "consumers"),
}


@dataclass(frozen=True, slots=True)
class RunInputs:
    """What a run's figures are computed from, wherever they are computed.

    ``client_rows``: the recorder's client rows (``worker``, ``t_us`` the interval's end,
    ``interval_s``, the counts, gauges, ``target_rate``, ``paused`` and each setting).
    ``polls``: broker polls (``t_us``, ``source``, ``stale_reason`` and the broker table's
    figures); stale ones are left out here. ``latency``: per (phase index, kind, basis),
    bucket counts ``value_us → count`` at the recording's precision. ``summary``: the run's
    summary document once it ended (its ``active`` times), else None.
    """

    key: str
    start_us: int
    phases: tuple[Phase, ...]
    client_rows: Sequence[Row]
    polls: Sequence[Row] = ()
    latency: Mapping[tuple[int, str, str], Mapping[int, int]] = field(default_factory=dict)
    summary: Mapping[str, Any] | None = None
    settings: Sequence[str] = SETTINGS
    sweep_settings: Sequence[str] = SWEEP_SETTINGS
    #: End-to-end latency from the actual send per (phase index, queue): bucket counts as
    #: ``latency``'s (sessions of format 1.7 on; none before).
    queue_latency: Mapping[tuple[int, str], Mapping[int, int]] = field(default_factory=dict)
    #: The run's queues are streams: a stream keeps what it delivered, so the broker's count
    #: of its messages is the log retained, not a backlog; the depth a verdict judges is the
    #: consumers' lag (published less consumed, from the clients' counts) instead.
    stream: bool = False


@dataclass(frozen=True, slots=True)
class PhaseFigures:
    """One phase of one run: when it was, its client and broker figures, latency, verdict.

    ``client``: the phase's client statistics (:func:`stats.phase_client_stats`: msg/s as
    ``publish_rate_mean``..., steadiness, target, gauges, each setting's value);
    ``broker``: its broker statistics (:func:`stats.phase_broker_stats`: depth, memory,
    alarms); ``latency``: per (kind, basis) the count, ``p50``...``p999`` and ``max`` in
    µs. ``load``: what the verdict looked at (None for the drain and a phase without data).
    """

    session: str
    phase: Phase
    start_s: float
    duration_s: float | None
    client: Row
    broker: Row
    latency: Mapping[LatencyKey, Row]
    verdict: Verdict | None
    reason: str
    load: PhaseLoad | None = None
    #: Per queue: end-to-end latency from the actual send (count, ``p50``...``p999``,
    #: ``max`` in µs), merged over the workers that consumed it. Empty before format 1.7.
    queues: Mapping[str, Row] = field(default_factory=dict)

    def worst_queues(self, limit: int = 10) -> list[tuple[str, Row]]:
        """The queues with the highest p99, worst first (the few that fill up)."""
        ranked = sorted(self.queues.items(), key=lambda item: -float(item[1].get("p99", 0)))
        return ranked[:limit]

    @property
    def index(self) -> int:
        return self.phase.index

    @property
    def label(self) -> str:
        return self.phase.label

    @property
    def has_data(self) -> bool:
        return bool(self.client.get("seconds"))

    @property
    def is_drain(self) -> bool:
        return self.phase.drain

    @property
    def seconds(self) -> int:
        return int(self.client.get("seconds") or 0)

    @property
    def paused_throughout(self) -> bool:
        return self.has_data and int(self.client.get("paused_s") or 0) >= self.seconds

    def figure(self, name: str) -> float:
        """A client figure by name (``publish_rate_mean``, ``pending_confirms_max``...);
        0 when the phase has none."""
        value = self.client.get(name)
        return 0.0 if value is None else float(value)

    def setting(self, name: str) -> int | None:
        value = self.client.get(name)
        return None if value is None else int(value)

    def latency_ms(self, key: LatencyKey, column: str) -> float | None:
        value = self.latency.get(key, {}).get(column)
        return None if value is None else float(value) / 1000

    def percentiles(self, key: LatencyKey = SWEEP_LATENCY) -> Percentiles | None:
        """The latency ``key``'s percentiles in ms (None: nothing measured)."""
        row = self.latency.get(key)
        if not row or not row.get("count"):
            return None
        values = [float(row.get(name) or 0) / 1000 for name in (*QUANTILE_NAMES, "max")]
        return Percentiles(int(row["count"]), *values)

    @property
    def p99_ms(self) -> float | None:
        return self.latency_ms(SWEEP_LATENCY, "p99")

    @property
    def end_s(self) -> float | None:
        return None if self.duration_s is None else self.start_s + self.duration_s

    @property
    def target_rate(self) -> float | None:
        value = self.client.get("target_rate")
        return None if value is None else float(value)

    def to_json(self, settings: Sequence[str] = SETTINGS) -> dict[str, Any]:
        """The phase as ``flowdeck run --json`` writes it (``phase_table``): its figures by
        the report's names, latency in ms per ``kind_basis``."""
        client = {
            name: self.client.get(name)
            for name in CLIENT_FIGURES
            if self.client.get(name) is not None
        }
        broker = {
            name: self.broker.get(name)
            for name in BROKER_FIGURES
            if self.broker.get(name) is not None
        }
        latency = {}
        for kind, basis in self.latency:
            found = self.percentiles((kind, basis))
            if found is not None:
                latency[f"{kind}_{basis}"] = asdict(found)
        return {
            "index": self.index,
            "label": self.label,
            "start_s": round(self.start_s, 3),
            "end_s": None if self.end_s is None else round(self.end_s, 3),
            "drain": self.is_drain,
            "seconds": self.seconds,
            "settings": {name: self.client.get(name) for name in settings if name in self.client},
            **client,
            **broker,
            "latency_ms": latency,
            "verdict": None if self.verdict is None else self.verdict.value,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Sweep:
    """A setting a run ran at two or more values: its load phases, as points, and the
    recommendation over them."""

    session: str
    setting: str
    rows: tuple[PhaseFigures, ...]
    points: tuple[SweepPoint, ...]
    recommendation: Recommendation

    @property
    def best(self) -> PhaseFigures | None:
        """The phase the recommendation stands on (None: no recommendation)."""
        chosen = self.recommendation.point
        if chosen is None:
            return None
        return next(
            (row for row, point in zip(self.rows, self.points, strict=True) if point is chosen),
            None,
        )


@dataclass(frozen=True, slots=True)
class RunFigures:
    """Every figure of one run: its phases, sweeps, the whole run's figures and latency."""

    key: str
    start_us: int
    phases: tuple[PhaseFigures, ...]
    sweeps: tuple[Sweep, ...]
    #: The whole run's client figures (``spark_reports``' session row): messages, active
    #: seconds and rate means, the largest pending confirms, blocked seconds.
    whole: Row
    whole_latency: Mapping[LatencyKey, Row]
    duration_s: float | None
    fan_out: int
    #: The rates' active time came from the run's own times (else from its bounds).
    active_recorded: bool
    #: One row per run second (client figures summed over workers), for charts.
    seconds: tuple[Row, ...] = ()
    #: The fresh polls of the run's main broker source, in time order, for charts.
    polls: tuple[Row, ...] = ()
    #: When its load phases ran at two or more target rates (a rate search, a rate sweep):
    #: the highest rate they sustained (``figures.sweep.capacity``).
    capacity: Capacity | None = None

    @property
    def load_phases(self) -> list[PhaseFigures]:
        return load_phases(self.phases)

    def sweep(self, setting: str) -> Sweep | None:
        return next((s for s in self.sweeps if s.setting == setting), None)


def load_phases(phases: Sequence[PhaseFigures]) -> list[PhaseFigures]:
    """The phases a sweep or a comparison looks at: with data, not the drain, not paused
    throughout."""
    return [p for p in phases if p.has_data and not p.is_drain and not p.paused_throughout]


def active_spans(
    phases: Sequence[Phase], start_us: int, summary: Mapping[str, Any] | None
) -> active.ActiveSpans:
    """When the run's clients were active: the summary's first and last send, confirm and
    delivery, or, for a run that kept none (or has not ended), the run's bounds."""
    last = phases[-1]
    return active.ActiveSpans.of_session(
        summary, start_us, last.begin_us if last.drain else None, last.finish_us
    )


def fan_out_of(whole: Row) -> int:
    """How many times each published message is consumed over the whole run (1 unless an
    exchange routes a message to several consumed queues), from the run's totals."""
    published = float(whole.get("publish_rate_mean") or 0.0)
    consumed = float(whole.get("consume_rate_mean") or 0.0)
    return max(1, round(consumed / published)) if published > 0 else 1


def run_figures(inputs: RunInputs, max_p99_ms: float | None = None) -> RunFigures:
    """Every figure of the run, by the module's rules."""
    key, start_us, phases = inputs.key, inputs.start_us, inputs.phases
    seconds = stats.client_seconds(inputs.client_rows, key, start_us, phases, inputs.settings)
    spans = active_spans(phases, start_us, inputs.summary)
    throughput = active.phase_throughput(
        inputs.client_rows,
        start_us,
        phases,
        spans,
        paused_seconds={row["sec"] for row in seconds if row["paused"]},
    )
    client = {
        row["phase"]: row
        for row in stats.phase_client_stats(
            seconds, {(key, index): row for index, row in throughput.items()}, inputs.settings
        )
    }
    whole = stats.session_client_stats(seconds, {key: active.whole_throughput(throughput.values())})
    whole_row = whole[0] if whole else {}
    sent = _sent_by(inputs.client_rows)
    moved = _counts_moved(inputs.polls)
    fresh = [
        {**row, "session": key, **moved[index][1],
         "before_queues": _before_queues(row, sent) if moved[index][0] else None}
        for index, row in enumerate(inputs.polls)
        if not row.get("stale_reason")
    ]  # fmt: skip
    chosen = stats.chosen_polls(fresh).get(key, [])
    broker = {
        row["phase"]: row
        for row in stats.phase_broker_stats(
            {key: chosen} if chosen else {}, {key: (start_us, phases)}
        )
    }
    latency = _latency_rows(inputs.latency)
    queues: dict[int, dict[str, Row]] = {}
    for (phase_index, queue), counts in sorted(inputs.queue_latency.items()):
        if sum(counts.values()) > 0:
            queues.setdefault(phase_index, {})[queue] = _row(counts)
    fan_out = fan_out_of(whole_row)
    if inputs.stream:
        lag = consumer_lag(inputs.client_rows, start_us, phases, fan_out)
        broker = {i: {**broker.get(i, {}), **row} for i, row in lag.items()}
    # An unfinished run ends where its data ends.
    last_second = max((row["sec"] for row in seconds), default=-1)
    data_end_us = start_us + (last_second + 1) * 1_000_000
    figures: list[PhaseFigures] = []
    for phase in phases:
        finish = phase.finish_us if phase.finish_us is not None else data_end_us
        c = client.get(phase.index, {})
        b = broker.get(phase.index, {})
        verdict: Verdict | None = None
        load: PhaseLoad | None = None
        reason = "no client data in this phase"
        if phase.drain:
            if c:
                c = {**c, "target_rate": None}  # publishing has stopped: nothing to reach
            verdict, reason = Verdict.DRAIN, _drain_reason(phase, start_us, c)
        elif c.get("seconds"):
            load = phase_load(c, b, fan_out)
            verdict, reason = judge(load)
            paused = int(c.get("paused_s") or 0)
            if 0 < paused < c["seconds"]:
                reason += (
                    f"; {paused} s paused (for all or part of the second), left out of "
                    "the target comparison"
                )
        figures.append(
            PhaseFigures(
                session=key,
                phase=phase,
                start_s=(phase.begin_us - start_us) / 1e6,
                duration_s=max(0.0, (finish - phase.begin_us) / 1e6),
                client=c,
                broker=b,
                latency=latency.get(phase.index, {}),
                verdict=verdict,
                reason=reason,
                load=load,
                queues=queues.get(phase.index, {}),
            )
        )
    end_us = phases[-1].finish_us or data_end_us
    whole_counts: dict[tuple[str, str], Counter[int]] = {}
    for (_, kind, basis), counts in inputs.latency.items():
        whole_counts.setdefault((kind, basis), Counter()).update(counts)
    return RunFigures(
        key=key,
        start_us=start_us,
        phases=tuple(figures),
        sweeps=tuple(
            sweeps(key, figures, inputs.sweep_settings, max_p99_ms, fan_out, inputs.settings)
        ),
        whole=whole_row,
        whole_latency={k: _row(c) for k, c in whole_counts.items() if sum(c.values())},
        duration_s=(end_us - start_us) / 1e6,
        fan_out=fan_out,
        active_recorded=spans.recorded,
        seconds=tuple(seconds),
        polls=tuple(chosen),
        capacity=rate_capacity(figures, max_p99_ms),
    )


def _row(counts: Mapping[int, int]) -> Row:
    """Count, percentiles and max in µs of bucket counts, as the report's tables hold them."""
    found = percentiles_of(counts)
    if found is None:
        return {"count": 0}
    row: Row = {"count": found.count}
    for name in (*QUANTILE_NAMES, "max"):
        row[name] = round(found.quantile(name) * 1000)
    return row


def _latency_rows(
    latency: Mapping[tuple[int, str, str], Mapping[int, int]],
) -> dict[int, dict[LatencyKey, Row]]:
    rows: dict[int, dict[LatencyKey, Row]] = {}
    for (phase, kind, basis), counts in latency.items():
        if sum(counts.values()) > 0:
            rows.setdefault(phase, {})[(kind, basis)] = _row(counts)
    return rows


def _drain_reason(phase: Phase, start_us: int, c: Row) -> str:
    at = (phase.begin_us - start_us) / 1e6
    consumed = c.get("consume_rate_mean")
    rate = "" if consumed is None else f" ({consumed:.1f} msg/s)"
    return (
        f"the drain: publishing stopped at {at:.1f} s and consumers take what is left"
        f"{rate}; no target, not judged, not part of any sweep"
    )


def consumer_lag(
    client_rows: Sequence[Row], start_us: int, phases: Sequence[Phase], fan_out: int
) -> dict[int, Row]:
    """Per phase, the consumers' lag behind the publishers (messages published and not yet
    consumed, each consumed ``fan_out`` times) as the verdict's depth: at its first and
    last client row, its largest, its slope and recent slope (msg/s)."""
    published = consumed = 0
    points: list[tuple[int, float]] = []
    for row in sorted(client_rows, key=lambda r: r["t_us"]):
        published += int(row.get("published") or 0)
        consumed += int(row.get("consumed") or 0)
        points.append((row["t_us"], published - consumed / fan_out))
    out: dict[int, Row] = {}
    for phase in phases:
        mine = [
            ((t - start_us) / 1e6, lag) for t, lag in points if phase.start_us <= t < phase.end_us
        ]
        if not mine:
            continue
        out[phase.index] = {
            "depth_start": mine[0][1],
            "depth_end": mine[-1][1],
            "depth_max": max(lag for _, lag in mine),
            "depth_slope": slope(mine),
            "depth_recent_slope": slope(recent(mine)),
        }
    return out


def phase_load(c: Row, b: Row, fan_out: int = 1) -> PhaseLoad:
    """What the verdict looks at for a phase, from its client and broker statistics."""
    unpaused = c.get("publish_rate_unpaused_mean") if c.get("paused_s") else None
    return PhaseLoad(
        publish_rate_unpaused=None if unpaused is None else float(unpaused),
        publish_rate=float(c.get("publish_rate_mean") or 0.0),
        consume_rate=float(c.get("consume_rate_mean") or 0.0),
        confirm_rate=float(c.get("confirm_rate_mean") or 0.0),
        target_rate=c.get("target_rate"),
        pending_confirms_mean=float(c.get("pending_confirms_mean") or 0.0),
        inflight=int(c.get("inflight") or 0),
        publishers=int(c.get("publishers") or 0),
        blocked_s=float(c.get("blocked_s") or 0),
        alarm_s=float(b.get("alarm_s") or 0.0),
        depth_start=b.get("depth_start"),
        depth_end=b.get("depth_end"),
        depth_slope=b.get("depth_slope"),
        depth_recent_slope=b.get("depth_recent_slope"),
        seconds=int(c.get("seconds") or 0),
        paused_s=int(c.get("paused_s") or 0),
        fan_out=fan_out,
        flow_s=float(b.get("flow_s") or 0.0),
        before_queues=b.get("before_queues_mean"),
        accept_rate=b.get("accept_rate_mean"),
        published=_count(c, "published"),
        confirmed=_count(c, "confirmed"),
        consumed=_count(c, "consumed"),
    )


def _count(c: Row, name: str) -> int | None:
    value = c.get(name)
    return None if value is None else int(value)


def load_share(phase: PhaseFigures, setting: str) -> float | None:
    """How full the setting's window was at its fullest in the phase (pending confirms over
    in-flight × publishers, unacked over prefetch × consumers); None without a window."""
    if setting not in WINDOWS:
        return None
    gauge, clients = WINDOWS[setting]
    limit = (phase.setting(setting) or 0) * (phase.setting(clients) or 0)
    if limit <= 0:
        return None
    return phase.figure(gauge) / limit


def sweep_point(phase: PhaseFigures, setting: str, fan_out: int = 1) -> SweepPoint:
    """The phase as a sweep point: its consume mean capped at its target, its e2e p99, and
    how full the setting's window was."""
    return ranked_throughput(
        value=int(phase.setting(setting) or 0),
        achieved=phase.figure("consume_rate_mean"),
        target=phase.client.get("target_rate"),
        p99_ms=phase.p99_ms,
        verdict=phase.verdict or Verdict.OVERLOADED,
        label=phase.phase.label,
        fan_out=fan_out,
        load_share=load_share(phase, setting),
    )


def sweeps(
    key: str,
    phases: Sequence[PhaseFigures],
    settings: Sequence[str] = SWEEP_SETTINGS,
    max_p99_ms: float | None = None,
    fan_out: int = 1,
    held: Sequence[str] = SETTINGS,
) -> list[Sweep]:
    """A run sweeps a setting when load phases that ran with every other setting the same
    (``held``: the run's settings) ran at two or more values of it. Phases at other settings
    (a capacity probe at no rate limit, a step that changed the rate too) are left out of
    the comparison and the reasoning says so: their msg/s says nothing about the setting."""
    loaded = load_phases(phases)
    result: list[Sweep] = []
    for setting in settings:
        swept, left_out = _held_equal(loaded, setting, [s for s in held if s != setting])
        if swept is None:
            continue
        points = tuple(sweep_point(p, setting, fan_out) for p in swept)
        recommendation = recommend(setting, points, max_p99_ms, fan_out)
        if left_out:
            note = (
                f"left out: {', '.join(left_out)} (other settings than the compared phases' "
                f"{_settings_text(swept[0], held, setting)})"
            )
            recommendation = replace(recommendation, reasoning=(note, *recommendation.reasoning))
        result.append(Sweep(key, setting, tuple(swept), points, recommendation))
    return result


def _held_equal(
    loaded: Sequence[PhaseFigures], setting: str, others: Sequence[str]
) -> tuple[list[PhaseFigures] | None, list[str]]:
    """The load phases that sweep ``setting`` with ``others`` held equal (the group with
    the most values of it, then the most phases, then the latest), and the labels of those
    left out; None when no group ran at two values."""
    groups: dict[tuple[Any, ...], list[PhaseFigures]] = {}
    for p in loaded:
        if p.client.get(setting) is None:
            continue
        groups.setdefault(tuple(_held_value(p, name) for name in others), []).append(p)
    ranked = sorted(
        groups.values(),
        key=lambda g: (len({p.client[setting] for p in g}), len(g), g[-1].phase.index),
    )
    if not ranked or len({p.client[setting] for p in ranked[-1]}) < 2:
        return None, []
    chosen = ranked[-1]
    return chosen, [p.label for p in loaded if p not in chosen]


def _held_value(phase: PhaseFigures, name: str) -> Any:
    value = phase.client.get(name)
    return round(value, 6) if isinstance(value, float) else value


def _settings_text(phase: PhaseFigures, held: Sequence[str], setting: str) -> str:
    return ", ".join(
        f"{name}={phase.client[name]:g}"
        for name in held
        if name != setting and phase.client.get(name) is not None
    )


def rate_capacity(
    phases: Sequence[PhaseFigures], max_p99_ms: float | None = None
) -> Capacity | None:
    """The highest target rate the run's load phases sustained, when they ran at two or
    more (None otherwise)."""
    # The target a phase was set to (rate × publishers, the settings it ran at): its mean
    # target can hold a second of the phase before it.
    points = [
        RatePoint(
            target=p.figure("rate") * p.figure("publishers"),
            rate=p.figure("rate"),
            verdict=p.verdict or Verdict.OVERLOADED,
            p99_ms=p.p99_ms,
            label=p.label,
        )
        for p in load_phases(phases)
        if p.target_rate
    ]
    if len({round(p.target) for p in points}) < 2:
        return None
    return capacity(points, max_p99_ms)


def _sent_by(rows: Sequence[Row]) -> Callable[[int], float]:
    """How many messages the clients had sent by a time (unix µs): per worker, the counts of
    its rows that ended by then and the share of the one in progress (a row's messages
    spread evenly over its interval), summed over workers."""
    by_worker: dict[Any, list[tuple[int, int, int]]] = {}
    for row in rows:
        end = int(row["t_us"])
        begin = end - round(float(row["interval_s"]) * 1_000_000)
        by_worker.setdefault(row["worker"], []).append((begin, end, int(row["published"])))
    timelines = []
    for intervals in by_worker.values():
        intervals.sort(key=lambda i: i[1])
        ends = [end for _, end, _ in intervals]
        running = list(accumulate(count for _, _, count in intervals))
        timelines.append((intervals, ends, running))

    def sent(at_us: int) -> float:
        total = 0.0
        for intervals, ends, running in timelines:
            done = bisect_right(ends, at_us)
            total += running[done - 1] if done else 0
            if done < len(intervals):
                begin, end, count = intervals[done]
                if end > begin and at_us > begin:
                    total += count * (at_us - begin) / (end - begin)
        return total

    return sent


#: The run's broker-side counts (the run's channels') and the rates of each.
_RUN_COUNTS = (("run_accepted", "run_accept_rate"), ("run_delivered", "run_deliver_rate"),
               ("run_acked", "run_ack_rate"))  # fmt: skip


def _counts_moved(polls: Sequence[Row]) -> list[tuple[bool, dict[str, Any]]]:
    """Per poll, whether its count of what the broker took in is new (not one the source
    gave before), and its broker-side rates taken between the polls where the counts moved
    (None at a poll where they did not).

    The management API gives a channel's counts as of its last statistics emission, which
    can lag the poll by seconds (on a private node here the counts stepped every ~5 s under
    1 s polls): a count repeated from the source's previous poll says nothing about now,
    and set against the clients' count at the poll's time it reads as messages waiting
    that were taken in long ago (a 40 msg/s run read 159 waiting); a rate over the span of
    one step reads five steps' messages in one (42,000 msg/s where consumers took 10,000).
    Counts and rates are taken at the polls where the count first shows."""
    last: dict[str, tuple[float, Row]] = {}
    moved: list[tuple[bool, dict[str, Any]]] = []
    for row in polls:
        source, accepted = str(row.get("source")), row.get("run_accepted")
        previous = last.get(source)
        if accepted is None:
            moved.append((False, {}))
            continue
        if previous is not None and previous[1]["run_accepted"] == accepted:
            moved.append((False, {rate: None for _, rate in _RUN_COUNTS}))
            continue
        at = int(row["t_us"]) / 1e6 - float(row.get("age_s") or 0.0)
        rates: dict[str, Any] = {rate: None for _, rate in _RUN_COUNTS}
        if previous is not None and at > previous[0]:
            for count, rate in _RUN_COUNTS:
                now, before = row.get(count), previous[1].get(count)
                if now is not None and before is not None:
                    rates[rate] = max(0.0, float(now) - float(before)) / (at - previous[0])
        moved.append((True, rates))
        last[source] = (at, row)
    return moved


def _before_queues(poll: Row, sent: Callable[[int], float]) -> float | None:
    """Messages the run's clients had sent and the broker had not yet taken in at the time
    of the poll's figures (its channels' publish count): what waits in socket buffers and
    in connection and channel processes held by credit flow. None when the source does not
    say what the broker took in."""
    accepted = poll.get("run_accepted")
    if accepted is None:
        return None
    at = int(poll["t_us"]) - round(float(poll.get("age_s") or 0.0) * 1_000_000)
    return max(0.0, sent(at) - float(accepted))
