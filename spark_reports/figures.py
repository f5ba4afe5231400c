"""From collected measurements to the report's tables: each session's figures come from
``figures.run`` (the one computation every front-end shares); this module lays them out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowdeck.figures import SWEEP_LATENCY, PhaseFigures, RunFigures, Sweep
from flowdeck.figures.latency import QUANTILE_NAMES
from flowdeck.figures.run import load_phases as run_load_phases
from flowdeck.figures.run import sweep_point
from flowdeck.figures.stats import Row
from flowdeck.spark_reports.faults import DataSafety, Fault, faults
from flowdeck.spark_reports.measure import Measurements
from flowdeck.spark_reports.sessions import Session
from flowdeck.spark_reports.tables import Cell, Table

__all__ = ["SWEEP_LATENCY", "PhaseFigures", "Sweep", "sweep_point"]

LATENCY_ORDER: tuple[tuple[str, str], ...] = (
    ("e2e", "actual"),
    ("e2e", "intended"),
    ("confirm", "actual"),
    ("confirm", "intended"),
)


def setting_titles(all_figures: Sequence[SessionFigures]) -> dict[str, str]:
    """Each recorded setting's heading, as the sessions' manifests give it (the registry
    row each run had; a session before format 1.6: its six)."""
    return {s.name: s.title for f in all_figures for s in f.session.manifest.settings}


def sweep_settings(all_figures: Sequence[SessionFigures]) -> list[str]:
    """The settings any of the sessions records as swept, in the order they list them."""
    return list(
        dict.fromkeys(s.name for f in all_figures for s in f.session.manifest.settings if s.sweep)
    )


def setting_word(name: str) -> str:
    """A setting's field as a table column and a name part say it: ``ack every``."""
    return name.replace("_", " ")


@dataclass(frozen=True, slots=True)
class SessionFigures:
    """One session's figures (``figures.run``, the one computation) and what only a report
    adds: the session it came from, its faults, its data safety and per-host rows."""

    session: Session
    run: RunFigures
    faults: tuple[Fault, ...] = ()
    safety: DataSafety | None = None
    #: Per host, for a run whose workers ran on Spark hosts (``spark_reports.hosts``).
    hosts: tuple[Row, ...] = ()

    @property
    def phases(self) -> tuple[PhaseFigures, ...]:
        return self.run.phases

    @property
    def sweeps(self) -> tuple[Sweep, ...]:
        return self.run.sweeps

    @property
    def whole(self) -> Row:
        return self.run.whole

    @property
    def whole_latency(self) -> Mapping[tuple[str, str], Row]:
        return self.run.whole_latency

    @property
    def duration_s(self) -> float | None:
        return self.run.duration_s

    @property
    def fan_out(self) -> int:
        return self.run.fan_out

    @property
    def active_recorded(self) -> bool:
        return self.run.active_recorded


def build_figures(sessions: Sequence[Session], measured: Measurements) -> list[SessionFigures]:
    """Each session's figures with its faults, data safety and hosts."""
    host_rows: dict[str, list[Row]] = defaultdict(list)
    for row in measured.host_client:
        host_rows[row["session"]].append(row)
    result: list[SessionFigures] = []
    for session in sessions:
        run = measured.runs[session.key]
        # What publishers get done per second: confirms when the run asks for them (a
        # publisher whose confirms stop is stalled even while its window drains), else
        # publishes.
        done = "confirm_rate" if session.manifest.spec.get("confirms", True) else "publish_rate"
        result.append(
            SessionFigures(
                session=session,
                run=run,
                faults=tuple(
                    faults(
                        session.events,
                        session.manifest.start,
                        {row["sec"]: float(row["consume_rate"] or 0.0) for row in run.seconds},
                        {row["sec"]: float(row[done] or 0.0) for row in run.seconds},
                    )
                ),
                safety=DataSafety.from_summary(session.manifest.summary),
                hosts=tuple(host_rows.get(session.key, ())),
            )
        )
    return result


def load_phases(figures: SessionFigures | Sequence[PhaseFigures]) -> list[PhaseFigures]:
    """The phases a sweep or a comparison looks at (``figures.run.load_phases``)."""
    return run_load_phases(figures.phases if isinstance(figures, SessionFigures) else figures)


# ---------------------------------------------------------------- tables


def rounded(value: Any, places: int = 3) -> Cell:
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return round(value, places)
    if isinstance(value, int | str):
        return value
    return str(value)


#: The throughput table's rate columns: (column, figure key) per rate; "mean" is msg/s on
#: the run summary's basis, "per-second sd/min" say how steady the phase's seconds were.
RATE_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (f"{rate} {column}", f"{rate}_{key}")
    for rate in ("publish", "confirm", "consume")
    for column, key in (
        ("mean", "rate_mean"),
        ("per-second sd", "rate_sd"),
        ("per-second min", "rate_min"),
    )
)
#: Messages and active seconds per phase: mean = messages / active s.
ACTIVE_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (f"{what} {column}", key)
    for what, count in (
        ("publish", "published"),
        ("confirm", "confirmed"),
        ("consume", "consumed"),
    )
    for column, key in (("messages", count), ("active s", f"{what}_s"))
)
#: What "mean" msg/s means in every table of the report (the run summary's basis).
MEAN_MEANING = (
    "mean msg/s = messages / the clients' active time (published / first to last send, "
    "confirmed / first send to last confirm, consumed / first to last delivery), the basis "
    "of the run's summary and of `flowdeck sessions show`; a phase has the messages of its "
    "client rows over the part of that time its rows cover (averaged over workers)"
)


#: How the throughput table marks the recommended phase (what the cockpit highlights).
RECOMMENDED_MARK = "★"


def throughput_table(figures: SessionFigures) -> Table:
    # Every setting the run recorded but the rate (the target column carries it).
    shown = [s.name for s in figures.session.manifest.settings if s.name != "rate"]
    columns = (
        "phase", "label", "start s", "duration s", *(setting_word(name) for name in shown),
        "target msg/s",
        *(name for name, _ in RATE_COLUMNS),
        *(name for name, _ in ACTIVE_COLUMNS),
        "recommended",
    )  # fmt: skip
    chosen = next((s.best for s in figures.sweeps if s.best is not None), None)
    rows = []
    for p in figures.phases:
        c = p.client
        rows.append(
            (
                p.phase.index,
                p.phase.label,
                rounded(p.start_s),
                rounded(p.duration_s),
                *(rounded(c.get(k)) for k in shown),
                rounded(c.get("target_rate")),
                *(rounded(c.get(key)) for _, key in RATE_COLUMNS),
                *(rounded(c.get(key)) for _, key in ACTIVE_COLUMNS),
                RECOMMENDED_MARK if chosen is not None and p.phase is chosen.phase else None,
            )
        )  # fmt: skip
    return Table(
        name=f"{figures.session.key}-throughput",
        title=f"{figures.session.title}: throughput per phase (msg/s)",
        columns=columns,
        rows=tuple(rows),
        note=f"{MEAN_MEANING}; so the phases' messages and active seconds add up to the "
        "whole run's (below). Per-second sd and min: population standard deviation and "
        "minimum of the phase's per-second rates, how steady it ran. Target is the mean "
        "over the seconds not paused, empty when publishers have no rate limit. The drain "
        "phase is the seconds after publishing stopped at the run's end. Recommended: "
        f"{RECOMMENDED_MARK} on the phase the first sweep's recommendation stands on.",
        reasoning=(
            *whole_run_lines(figures),
            *(() if figures.run.capacity is None else figures.run.capacity.reasoning),
        ),
    )


HOST_COUNTS: tuple[tuple[str, str], ...] = (
    ("published", "publish"),
    ("confirmed", "confirm"),
    ("consumed", "consume"),
)


def hosts_table(figures: SessionFigures) -> Table | None:
    """Per host of a run whose workers ran on Spark hosts, and the merged run; None for a
    run of local worker processes."""
    if not figures.hosts:
        return None
    columns = (
        "host", "workers",
        *(count for count, _ in HOST_COUNTS),
        *(f"{name} msg/s" for _, name in HOST_COUNTS),
        "e2e p50 ms", "e2e p99 ms", "worker lost",
    )  # fmt: skip

    def ms(value: Any) -> Cell:
        return None if value is None else rounded(value / 1000)

    def workers(numbers: Sequence[int]) -> str:
        return ", ".join(str(n) for n in numbers)

    rows: list[tuple[Cell, ...]] = []
    for h in figures.hosts:
        rows.append(
            (
                h["host"], workers(h["workers"]),
                *(int(h[count]) for count, _ in HOST_COUNTS),
                *(rounded(h[f"{name}_rate_mean"]) for _, name in HOST_COUNTS),
                ms(h["p50"]), ms(h["p99"]),
                workers(h["lost"]) or None,
            )
        )  # fmt: skip
    whole, merged = figures.whole, figures.whole_latency.get(SWEEP_LATENCY, {})
    lost = [n for h in figures.hosts for n in h["lost"]]
    rows.append(
        (
            f"all {len(figures.hosts)} host(s)",
            workers(sorted(n for h in figures.hosts for n in h["workers"])),
            *(int(whole.get(count) or 0) for count, _ in HOST_COUNTS),
            *(rounded(whole.get(f"{name}_rate_mean")) for _, name in HOST_COUNTS),
            ms(merged.get("p50")), ms(merged.get("p99")),
            workers(sorted(lost)) or None,
        )
    )  # fmt: skip
    return Table(
        name=f"{figures.session.key}-hosts",
        title=f"{figures.session.title}: per host (Spark workers)",
        columns=columns,
        rows=tuple(rows),
        note=f"{MEAN_MEANING}. A host's msg/s divides its workers' messages by the part "
        "of that time their rows cover, averaged over its workers (a lost worker covers the "
        "run up to its last snapshot). The last row is the whole run, merged: its counts are "
        "the hosts' sums; its rates are the sum of the hosts' when every worker ran the "
        "whole active time. e2e latency (actual send) merged exactly from each host's "
        "workers' histograms. Hosts come from the run's 'worker N connected from HOST' "
        "events; a worker lost is one whose link dropped before its report.",
    )


def whole_run_lines(figures: SessionFigures) -> tuple[str, ...]:
    """The whole run's msg/s, as the run's summary and `flowdeck sessions show` give them,
    and what they divide."""
    whole = figures.whole
    if not whole.get("publish_s") and not whole.get("consume_s"):
        return ()
    spans = (
        "the run's own first and last send, confirm and delivery"
        if figures.active_recorded
        else "the run's bounds (the session kept no active times: start to publishing "
        "stopped, consume to the run's end)"
    )
    parts = [
        f"{what} {whole.get(f'{what}_rate_mean') or 0.0:,.1f} msg/s "
        f"({int(whole.get(count) or 0):,} over {float(whole.get(f'{what}_s') or 0.0):.2f} s)"
        for what, count in (
            ("publish", "published"),
            ("confirm", "confirmed"),
            ("consume", "consumed"),
        )
    ]
    return (f"whole run: {', '.join(parts)}; active time from {spans}",)


def latency_table(figures: SessionFigures) -> Table:
    rows = []
    for p in figures.phases:
        for kind, basis in LATENCY_ORDER:
            lat = p.latency.get((kind, basis))
            if lat is None:
                continue
            rows.append(
                (
                    p.phase.index,
                    p.phase.label,
                    f"{kind} {basis}",
                    int(lat["count"]),
                    *(ms(lat.get(name)) for name in QUANTILE_NAMES),
                    ms(lat["max"]),
                )
            )
    return Table(
        name=f"{figures.session.key}-latency",
        title=f"{figures.session.title}: latency per phase (ms)",
        columns=("phase", "label", "latency", "count", "p50", "p75", "p95", "p99", "p99.9", "max"),
        rows=tuple(rows),
        note="Merged exactly from the recorded HDR histograms of all workers and seconds "
        "(not averaged percentiles). e2e = publish to consume, confirm = publish to "
        "confirm; actual = from the real send, intended = from the rate schedule's send time.",
    )


#: The most queues the per-queue table and chart show per phase (the worst by p99).
WORST_QUEUES = 10


def queue_table(figures: SessionFigures) -> Table | None:
    """Per phase, the queues with the highest e2e p99, worst first: the few that fill up
    and push the run's percentiles up (the seed's per-queue lines). None for a session
    without per-queue latency (before format 1.7)."""
    if not any(p.queues for p in figures.phases):
        return None
    rows = []
    for p in figures.phases:
        whole = p.percentiles()
        for rank, (queue, lat) in enumerate(p.worst_queues(WORST_QUEUES), start=1):
            rows.append(
                (
                    p.phase.index,
                    p.phase.label,
                    rank,
                    queue,
                    int(lat["count"]),
                    ms(lat.get("p50")),
                    ms(lat.get("p95")),
                    ms(lat.get("p99")),
                    None if whole is None else whole.p99,
                )
            )
    queues = max(len(p.queues) for p in figures.phases)
    return Table(
        name=f"{figures.session.key}-queues",
        title=f"{figures.session.title}: e2e latency per queue, worst first (ms)",
        columns=("phase", "label", "rank", "queue", "count", "p50", "p95", "p99", "run p99"),
        rows=tuple(rows),
        note=f"Per phase the {min(WORST_QUEUES, queues)} queues (of {queues}) with the "
        "highest e2e p99 from the actual send, each merged exactly from its consumers' "
        "histograms over workers and seconds; run p99 = all queues together, for scale.",
    )


def ms(value_us: Any) -> float | None:
    return None if value_us is None else value_us / 1000


def broker_table(figures: SessionFigures) -> Table:
    rows = []
    for p in figures.phases:
        c, b = p.client, p.broker
        mem_peak = b.get("mem_peak")
        rows.append(
            (
                p.phase.index,
                p.phase.label,
                rounded(c.get("pending_confirms_mean")),
                rounded(c.get("pending_confirms_max")),
                rounded(c.get("unacked_mean")),
                rounded(c.get("unacked_max")),
                rounded(b.get("depth_start")),
                rounded(b.get("depth_end")),
                rounded(b.get("depth_slope")),
                None if mem_peak is None else round(mem_peak / 2**20, 1),
                rounded(b.get("mem_alarm_s")),
                rounded(b.get("disk_alarm_s")),
                rounded(c.get("blocked_s")),
                rounded(b.get("flow_s")),
                rounded(b.get("run_publishers_flow_max")),
                rounded(b.get("before_queues_max"), 0),
                rounded(b.get("accept_rate_mean"), 1),
                p.verdict.value if p.verdict else None,
                p.reason,
            )
        )
    return Table(
        name=f"{figures.session.key}-flow",
        title=f"{figures.session.title}: flow control, broker and verdict per phase",
        columns=(
            "phase", "label", "pending confirms mean", "pending confirms max",
            "unacked mean", "unacked max", "depth start", "depth end", "depth slope msg/s",
            "memory peak MiB", "memory alarm s", "disk alarm s", "blocked s",
            "credit flow s", "publishers in flow max", "before the queues max",
            "broker accepted msg/s", "verdict", "why",
        ),
        rows=tuple(rows),
        note="Queue depth = ready messages summed over the run's queues (broker polls); "
        "slope = least-squares over the phase's polls. Blocked s = seconds with a "
        "connection blocked by flow control (an alarm). Credit flow s = seconds in which "
        "some of the run's publishers were in the broker's credit-flow state 'flow'; before "
        "the queues = messages the clients had sent that the broker had not yet taken in "
        "(its channels' publish count): what waits in socket buffers and in processes held "
        "by credit flow; broker accepted = the run's channels' publish rate (management API; "
        "empty for sessions before format 1.5 and for Prometheus).",
    )  # fmt: skip


def _inflight_share(value: int, rate: Any) -> str:
    if not rate:
        return ""
    share = value / float(rate)
    return f"{share:.0%}" if share >= 0.01 else f"{share:.1%}"


def sweep_table(figures: SessionFigures, sweep: Sweep) -> Table:
    title = setting_titles([figures]).get(sweep.setting, sweep.setting)
    rows = []
    for p in sweep.rows:
        value = int(p.setting(sweep.setting) or 0)
        rows.append(
            (
                value,
                _inflight_share(value, p.client.get("rate")) if sweep.setting == "inflight"
                else "",
                rounded(p.client.get("publish_rate_mean"), 1),
                rounded(p.client.get("consume_rate_mean"), 1),
                p.latency_ms(SWEEP_LATENCY, "p99"),
                p.latency_ms(SWEEP_LATENCY, "p95"),
                p.latency_ms(SWEEP_LATENCY, "p75"),
                p.verdict.value if p.verdict else None,
                p.phase.label,
            )
        )  # fmt: skip
    return Table(
        name=f"{figures.session.key}-sweep-{sweep.setting}",
        title=f"{figures.session.title}: {title.lower()} sweep",
        columns=(
            title, "% of rate", "publish msg/s", "msg/s", "p99 ms", "p95 ms", "p75 ms",
            "verdict", "phase",
        ),
        rows=tuple(rows),
        note="msg/s = mean consume rate (messages / the consumers' active time in the "
        "phase); latency = end-to-end from the actual send. "
        "% of rate = in-flight limit as a share of the per-publisher target rate. "
        "The recommendation ranks msg/s capped at the phase's target (a mean above it is "
        "catch-up on a backlog); the drain after publishing stopped is not a row.",
        reasoning=sweep.recommendation.reasoning,
    )  # fmt: skip


def faults_table(figures: SessionFigures) -> Table:
    """What went wrong in the run, from its events, and what it lost."""
    rows = [
        (
            fault.kind,
            fault.subject,
            rounded(fault.start_s, 1),
            rounded(fault.end_s, 1),
            rounded(fault.duration_s, 1),
            rounded(fault.recovered_after_s, 1),
            rounded(fault.publishers_interrupted_s, 0),
            rounded(fault.consumers_interrupted_s, 0),
            fault.detail,
        )
        for fault in figures.faults
    ]
    safety = figures.safety
    reasoning: tuple[str, ...] = (
        "data safety: "
        + (safety.sentence() if safety else "the session has no end-of-run accounting"),
    )
    if not rows:
        reasoning = ("no outage, alarm, blocked connection, stale source or error", *reasoning)
    return Table(
        name=f"{figures.session.key}-faults",
        title=f"{figures.session.title}: faults",
        columns=(
            "fault",
            "what",
            "start s",
            "end s",
            "duration s",
            "consumers back after s",
            "publishers stalled s",
            "consumers stalled s",
            "detail",
        ),
        rows=tuple(rows),
        note="From the events the session recorded: outages (a worker lost its broker "
        "connection), memory and disk alarms, connections blocked by flow control, broker "
        "sources gone stale, errors. Consumers back after = seconds from the fault's start "
        "until a second's consume rate was back at 95% of its mean over the 5 s before "
        "(0: it never dipped; empty: no rate before, or not back within the run).",
        reasoning=reasoning,
    )
