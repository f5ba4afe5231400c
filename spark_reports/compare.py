"""Sessions side by side, as a benchmark write-up lines them up: by what differs.

Runs are named by what sets them apart (queue type, confirm mode, a setting's value or the
values they swept); the tables' columns call them R1, R2... in the order given, short
enough to paste, with a legend under each table and in a table of its own (``runs``) that
gives each its name; phases are matched by the settings they ran
at; a swept value several phases ran at is represented by its steady phase, by the same
rule as the recommendation (``verdict.recommend``). Pure Python over the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flowdeck.figures import seed
from flowdeck.figures.verdict import Verdict
from flowdeck.spark_reports.figures import (
    SWEEP_LATENCY,
    PhaseFigures,
    SessionFigures,
    load_phases,
    ms,
    rounded,
    setting_titles,
    setting_word,
    sweep_point,
    sweep_settings,
)
from flowdeck.spark_reports.tables import Cell, Table

#: Spec fields that tell runs of one benchmark apart, in the order a name lists them.
DIFFERING_FIELDS: tuple[tuple[str, str], ...] = (
    ("protocol", "protocol"),
    ("queue_type", "queue"),
    ("confirms", "confirms"),
    ("queues", "queues"),
    ("message_size", "size"),
    ("persistent", "persistent"),
    ("lazy", "lazy"),
    ("auto_ack", "auto-ack"),
    ("workers", "workers"),
)


def differing_fields(all_figures: Sequence[SessionFigures]) -> list[tuple[str, str]]:
    """The spec fields that tell runs apart: the protocol, queue type and confirms, then every
    setting the runs recorded (as their manifests list them), then the rest."""
    settings = list(dict.fromkeys(s.name for f in all_figures for s in f.session.manifest.settings))
    return [*DIFFERING_FIELDS[:3], *((n, setting_word(n)) for n in settings), *DIFFERING_FIELDS[3:]]


#: What makes two runs the same benchmark: the load they put on the broker. Settings,
#: queue type and confirm mode are what a comparison varies within it.
BENCHMARK_FIELDS: tuple[str, ...] = ("publishers", "consumers", "queues", "rate", "message_size")


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value == int(value):
        return str(int(value))
    return str(value)


def _swept_values(figures: SessionFigures, setting: str) -> str:
    values = sorted({v for p in load_phases(figures) if (v := p.setting(setting)) is not None})
    return "→".join(str(v) for v in values)


def differences(all_figures: Sequence[SessionFigures]) -> list[list[str]]:
    """Per session, what sets it apart from the others: ``queue quorum``, ``confirms off``,
    ``ack every 1``... — the spec fields that differ, and for settings the runs' phases ran
    at different values of, those values (a sweep reads ``inflight 1→5→25``)."""
    specs = [f.session.manifest.spec for f in all_figures]
    parts: list[list[str]] = [[] for _ in all_figures]
    swept = sweep_settings(all_figures)
    for field, word in differing_fields(all_figures):
        shown = [_shown(spec.get(field)) if field in spec else "" for spec in specs]
        ran = [_swept_values(f, field) for f in all_figures] if field in swept else shown
        if len(set(ran)) > 1:
            for index, value in enumerate(ran):
                if value:
                    parts[index].append(f"{word} {value}")
        elif len(set(shown)) > 1:
            for index, value in enumerate(shown):
                if value:
                    parts[index].append(f"{word} {value}")
    return parts


def run_names(all_figures: Sequence[SessionFigures]) -> list[str]:
    """A name per session that says which run it is — its title and what sets it apart —
    and is unique among the sessions (the session id, then a number, when they are not)."""
    names = []
    for figures, parts in zip(all_figures, differences(all_figures), strict=True):
        title = figures.session.title
        names.append(f"{title} ({', '.join(parts)})" if parts else title)
    for index, name in enumerate(names):
        if names.count(name) > 1:
            names[index] = f"{name} [{all_figures[index].session.manifest.session_id}]"
    seen: set[str] = set()
    for index, name in enumerate(names):
        unique, n = name, 2
        while unique in seen:
            unique, n = f"{name} #{n}", n + 1
        names[index] = unique
        seen.add(unique)
    return names


def short_names(all_figures: Sequence[SessionFigures]) -> list[str]:
    """The column names of the runs in the comparison tables, ``R1``, ``R2``... in the
    order the sessions were given: a table of six runs fits a page and pastes into a
    write-up; :func:`legend` and the ``runs`` table say which run each is."""
    return [f"R{index}" for index in range(1, len(all_figures) + 1)]


def chart_labels(all_figures: Sequence[SessionFigures]) -> list[str]:
    """The runs as the comparison chart's legend names them: the short name and the run's
    title (``R3 bench2-mirrored-multi-sweep``), or its whole name where titles repeat; a
    legend of six whole names was wider than the chart it explains."""
    titles = [f.session.title for f in all_figures]
    names = titles if len(set(titles)) == len(titles) else run_names(all_figures)
    return [f"{short} {name}" for short, name in zip(short_names(all_figures), names, strict=True)]


def legend(all_figures: Sequence[SessionFigures]) -> tuple[str, ...]:
    """One line per run under a comparison table: its short name, its full name and its
    session id."""
    return tuple(
        f"{short}: {name} (session {figures.session.manifest.session_id})"
        for short, name, figures in zip(
            short_names(all_figures), run_names(all_figures), all_figures, strict=True
        )
    )


def runs_table(all_figures: Sequence[SessionFigures]) -> Table:
    """The legend of the comparison tables as a table of its own (``runs.md``,
    ``runs.csv``): a script joining the CSV tables finds each short name's run here."""
    rows = [
        (short, name, figures.session.manifest.session_id, ", ".join(parts) or None)
        for short, name, figures, parts in zip(
            short_names(all_figures),
            run_names(all_figures),
            all_figures,
            differences(all_figures),
            strict=True,
        )
    ]
    return Table(
        name="runs",
        title="The runs compared",
        columns=("run", "name", "session id", "sets it apart"),
        rows=tuple(rows),
        note="The comparison tables name each run by its short name (R1, R2...); this is "
        "which run each is.",
    )


def benchmarks(all_figures: Sequence[SessionFigures]) -> list[list[int]]:
    """The sessions grouped by benchmark (:data:`BENCHMARK_FIELDS` equal), as indexes in
    the order the sessions were given."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, figures in enumerate(all_figures):
        spec = figures.session.manifest.spec
        key = tuple(_shown(spec.get(field)) for field in BENCHMARK_FIELDS)
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def representative(rows: Sequence[PhaseFigures], fan_out: int = 1) -> PhaseFigures:
    """The phase that stands for a value several phases ran at: one whose verdict judges
    capacity (not draining a backlog, catching up or too short) before the others, then not
    overloaded, then the highest ranked throughput."""

    def rank(phase: PhaseFigures) -> tuple[bool, bool, float]:
        point = sweep_point(phase, "inflight", fan_out)
        return (
            phase.verdict is not None and phase.verdict.judged_capacity,
            phase.verdict is not Verdict.OVERLOADED,
            point.throughput,
        )

    return max(rows, key=rank)


def by_value(figures: SessionFigures, setting: str) -> dict[int, list[PhaseFigures]]:
    """The session's load phases grouped by the value of ``setting`` they ran at."""
    grouped: dict[int, list[PhaseFigures]] = {}
    for phase in load_phases(figures):
        value = phase.setting(setting)
        if value is not None:
            grouped.setdefault(value, []).append(phase)
    return grouped


#: For the settings where a value of 0 is no limit at all (the engine's ``zero_is_unlimited``
#: rows, which the report cannot import: it reads sessions only), how a run at 0 is named.
NO_LIMIT = {"inflight": "no in-flight limit", "prefetch": "no prefetch limit"}


def limited_and_not(
    figures: SessionFigures, setting: str
) -> tuple[dict[int, list[PhaseFigures]], list[PhaseFigures], str]:
    """The run's load phases at each limit of ``setting``, the phases that ran with no limit,
    and what to call those. Without publisher confirms nothing is in flight to limit, so
    every phase of such a run is unlimited whatever in-flight number its spec carried."""
    if setting == "inflight" and figures.session.manifest.spec.get("confirms") is False:
        return {}, load_phases(figures), "no confirms"
    grouped = by_value(figures, setting)
    unlimited = grouped.pop(0, []) if setting in NO_LIMIT else []
    return grouped, unlimited, NO_LIMIT.get(setting, "")


def compared_setting(all_figures: Sequence[SessionFigures]) -> str | None:
    """The setting to line the sessions up by: the first any of them sweeps."""
    for setting in sweep_settings(all_figures):
        if any(sw.setting == setting for f in all_figures for sw in f.sweeps):
            return setting
    return None


@dataclass(frozen=True, slots=True)
class _Metric:
    title: str
    cell: Callable[[PhaseFigures], Cell]


_METRICS = (
    _Metric("msg/s", lambda p: rounded(p.client.get("consume_rate_mean"), 1)),
    _Metric("p99 ms", lambda p: p.latency_ms(SWEEP_LATENCY, "p99")),
    _Metric("p95 ms", lambda p: p.latency_ms(SWEEP_LATENCY, "p95")),
    _Metric("p75 ms", lambda p: p.latency_ms(SWEEP_LATENCY, "p75")),
    _Metric("verdict", lambda p: p.verdict.value if p.verdict else None),
)


def comparison_table(all_figures: Sequence[SessionFigures]) -> Table:
    """The sessions' phases side by side, one column group per run, lined up by the value
    of the setting any of them sweeps (or, when none sweeps, by the settings each phase
    ran at)."""
    columns = tuple(f"{m.title} · {short}" for short in short_names(all_figures) for m in _METRICS)

    def cells(phase: PhaseFigures | None) -> list[Cell]:
        return [None] * len(_METRICS) if phase is None else [m.cell(phase) for m in _METRICS]

    setting = compared_setting(all_figures)
    if setting is not None:
        # A run with no limit (no confirms, or 0 where 0 is none) is the row named so, as
        # the chart draws it, not the row of a number it carried.
        split = [limited_and_not(f, setting) for f in all_figures]
        grouped = [limited for limited, _, _ in split]
        values = sorted({v for mapping in grouped for v in mapping})
        rows = []
        named = sorted({label for _, unlimited, label in split if unlimited})
        if named:
            row0: list[Cell] = [" / ".join(named)]
            for _, unlimited, _ in split:
                row0 += cells(representative(unlimited) if unlimited else None)
            rows.append(tuple(row0))
        for value in values:
            row: list[Cell] = [value]
            for mapping in grouped:
                phases = mapping.get(value)
                row += cells(representative(phases) if phases else None)
            rows.append(tuple(row))
        title = setting_titles(all_figures).get(setting, setting)
        return Table(
            name=f"comparison-{setting}",
            title=f"{title}: the runs side by side",
            columns=(title, *columns),
            rows=tuple(rows),
            note="One column group per run, by its short name (the runs below, and "
            "runs.md). msg/s = mean "
            "consume rate (messages / the consumers' active time in the phase); latency "
            "end-to-end from the actual send. A value several phases "
            "ran at shows its steady phase (not catching up on a backlog, not overloaded), "
            "as the recommendation does; a run that did not sweep shows its one value, "
            "and a run with no limit (no confirms) the row named so.",
            reasoning=legend(all_figures),
        )
    keys: list[str] = []
    placed: list[dict[str, PhaseFigures]] = []
    named = list(dict.fromkeys(s.name for f in all_figures for s in f.session.manifest.settings))
    for figures in all_figures:
        at_settings: dict[str, PhaseFigures] = {}
        for phase in figures.phases:
            key = phase_key(phase, named)
            at_settings.setdefault(key, phase)
            if key not in keys:
                keys.append(key)
        placed.append(at_settings)
    rows2 = [(key, *[c for found in placed for c in cells(found.get(key))]) for key in keys]
    return Table(
        name="comparison-phases",
        title="Phases side by side, by the settings they ran at",
        columns=("settings", *columns),
        rows=tuple(rows2),
        note="No run sweeps a setting: phases are matched by the settings they ran at "
        "(the first phase of a run at those settings), the drain with the drain. One column "
        "group per run, by its short name (the runs below, and runs.md). msg/s = "
        "mean consume rate (messages / the consumers' active time in the phase).",
        reasoning=legend(all_figures),
    )


def phase_key(phase: PhaseFigures, settings: Sequence[str]) -> str:
    """The ``settings`` a phase ran at, as its comparison row is named."""
    if phase.is_drain:
        return "drain"
    c = phase.client
    parts = [
        f"{setting_word(name)}={c[name]}"
        for name in settings
        if name != "rate" and c.get(name) is not None
    ]
    if c.get("rate"):
        parts.append(f"rate={rounded(c['rate'], 1)}")
    if phase.verdict is Verdict.PAUSED:
        parts.append("paused")
    return ", ".join(parts) or phase.phase.label


def _spec(figures: SessionFigures, field: str) -> str | None:
    value = figures.session.manifest.spec.get(field)
    return None if value is None else _shown(value)


def sessions_table(all_figures: Sequence[SessionFigures]) -> Table:
    """Whole-run figures, one column per run, by its short name."""

    def lat(f: SessionFigures, q: str) -> float | None:
        return ms(f.whole_latency.get(SWEEP_LATENCY, {}).get(q))

    def each(figure_of: Callable[[SessionFigures], Cell]) -> list[Cell]:
        return [figure_of(f) for f in all_figures]

    metrics: list[tuple[str, list[Cell]]] = [
        ("sets it apart", [", ".join(p) or "–" for p in differences(all_figures)]),
        ("session id", each(lambda f: f.session.manifest.session_id)),
        ("outcome", each(lambda f: f.session.manifest.outcome)),
        ("duration s", each(lambda f: rounded(f.duration_s))),
        ("phases", each(lambda f: len(f.phases))),
        ("queue type", each(lambda f: _spec(f, "queue_type"))),
        ("confirms", each(lambda f: _spec(f, "confirms"))),
        ("publish msg/s (mean)", each(lambda f: rounded(f.whole.get("publish_rate_mean"), 1))),
        ("confirm msg/s (mean)", each(lambda f: rounded(f.whole.get("confirm_rate_mean"), 1))),
        ("consume msg/s (mean)", each(lambda f: rounded(f.whole.get("consume_rate_mean"), 1))),
        ("e2e p75 ms", each(lambda f: lat(f, "p75"))),
        ("e2e p95 ms", each(lambda f: lat(f, "p95"))),
        ("e2e p99 ms", each(lambda f: lat(f, "p99"))),
        ("e2e max ms", each(lambda f: lat(f, "max"))),
        ("pending confirms max", each(lambda f: rounded(f.whole.get("pending_confirms_max")))),
        ("blocked s", each(lambda f: rounded(f.whole.get("blocked_s")))),
        ("alarm s", each(lambda f: rounded(sum(p.broker.get("alarm_s") or 0.0 for p in f.phases)))),
        ("overloaded phases",
         each(lambda f: sum(p.verdict is Verdict.OVERLOADED for p in f.phases))),
        ("faults", each(lambda f: len(f.faults))),
        ("lost", each(lambda f: None if f.safety is None else f.safety.lost)),
        ("duplicated", each(lambda f: None if f.safety is None else f.safety.duplicates)),
    ]  # fmt: skip
    return Table(
        name="sessions",
        title="Runs side by side (whole run)",
        columns=("", *short_names(all_figures)),
        rows=tuple((label, *values) for label, values in metrics),
        reasoning=legend(all_figures),
        note="Each column is a run, by its short name (the runs below, and runs.md). msg/s "
        "(mean) = messages / the clients' active time (published / first to last send, "
        "confirmed / first send to last confirm, consumed / first to last delivery), as "
        "the run's summary and `flowdeck sessions show` give it. e2e latency from the "
        "actual send, merged over the whole run.",
    )


def seed_table(all_figures: Sequence[SessionFigures]) -> Table | None:
    """The seed write-up's conclusions checked against these runs (``figures.seed``): a row
    per conclusion of every benchmark some run redoes; None when no run is a seed preset."""
    runs = {str(f.session.manifest.spec.get("name") or ""): f.run for f in all_figures}
    benchmarks = sorted({b for name in runs if (b := seed.preset_benchmark(name)) is not None})
    if not benchmarks:
        return None
    rows = []
    for claim in seed.claims_of(benchmarks):
        finding = claim.judge(runs)
        rows.append(
            (
                f"#{claim.benchmark}",
                ", ".join(claim.presets),
                claim.says,
                finding.here,
                finding.agreement.value,
                finding.deciding or None,
            )
        )
    return Table(
        name="seed-check",
        title="The seed's conclusions, checked here",
        columns=("benchmark", "runs", "seed says", "here", "agrees?", "the figure that decides"),
        rows=tuple(rows),
        note="Each of the write-up's conclusions for the benchmarks these runs redo, judged "
        "from the runs' figures by the report's own verdict rules (figures/seed.py states "
        "each check). 'not run here': the matrix did not include that run.",
    )
