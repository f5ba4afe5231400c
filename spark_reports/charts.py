"""The report's charts, drawn with matplotlib (Agg): each a Figure, written as PNG (inlined
in report.html and a file beside it) and SVG (a file) by :func:`rendered`.

The runs of one report share their y-axes (:class:`ChartLimits`): a matrix's six timelines
read against each other as the seed's figures do.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from flowdeck.figures.stats import Row
from flowdeck.spark_reports.compare import limited_and_not, representative
from flowdeck.spark_reports.figures import (
    SWEEP_LATENCY,
    PhaseFigures,
    SessionFigures,
    Sweep,
    setting_titles,
)
from flowdeck.spark_reports.render import VERDICT_COLOURS

RATE_COLOURS = {"publish": "#1f77b4", "confirm": "#9467bd", "consume": "#2ca02c"}


def _plain_log_axis(axes: Axes) -> None:
    """Log scale with plain tick labels (2, 5, 10 ms rather than 2×10⁰)."""
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    # Label the 2s and 5s between decades, no more: 1, 2, 5, 10, 20, 50...
    axes.yaxis.set_minor_formatter(
        FuncFormatter(lambda value, _: f"{value:g}" if f"{value:e}"[0] in "25" else "")
    )
    axes.tick_params(axis="y", which="minor", labelsize=7)


def _log_room(axes: Axes, above: float = 1.3) -> None:
    """A log y axis widened by a factor below (1.3) and ``above`` its data: no point or
    line on the frame."""
    low, high = axes.get_ylim()
    axes.set_ylim(low / 1.3, high * above)


def _plain_log_x(axes: Axes) -> None:
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.xaxis.set_minor_formatter(
        FuncFormatter(lambda value, _: f"{value:g}" if f"{value:e}"[0] in "25" else "")
    )
    axes.tick_params(axis="x", which="minor", labelsize=7)


@dataclass(frozen=True, slots=True)
class Rendered:
    """One chart as the files the report writes: PNG (also inlined in report.html) and SVG."""

    png: bytes
    svg: bytes


def rendered(figure: Figure) -> Rendered:
    """The figure as PNG and SVG bytes; the figure is closed."""
    files = {}
    for kind in ("png", "svg"):
        buffer = io.BytesIO()
        # svg.hashsalt: the same chart gives the same SVG ids each time
        metadata = {"Date": None} if kind == "svg" else None  # no date: same chart, same file
        with matplotlib.rc_context({"svg.hashsalt": "flowdeck"}):
            figure.savefig(buffer, format=kind, dpi=110, bbox_inches="tight", metadata=metadata)
        files[kind] = buffer.getvalue()
    plt.close(figure)
    return Rendered(files["png"], files["svg"])


@dataclass(frozen=True, slots=True)
class ChartLimits:
    """The y ranges every run of a report is drawn on: msg/s from 0 to ``rate_high``,
    latency (ms, log) from ``latency_low`` to ``latency_high``, ready messages from 0 to
    ``depth_high``. None: each chart takes its own data's."""

    rate_high: float | None = None
    latency_low: float | None = None
    latency_high: float | None = None
    depth_high: float | None = None


#: The e2e percentiles the timeline draws per second (the seed's lines), lightest first.
TIMELINE_PERCENTILES: tuple[tuple[str, str, str], ...] = (
    ("p50", "p50", "#fdd49e"),
    ("p75", "p75", "#fdae6b"),
    ("p95", "p95", "#f16913"),
    ("p99", "p99", "#d94801"),
    ("p999", "p99.9", "#7f2704"),
)


def _second_rates(seconds: Sequence[Row]) -> dict[int, dict[str, float]]:
    """Per run second, the publish, confirm and consume msg/s summed over workers."""
    per_second: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in seconds:
        for name in RATE_COLOURS:
            per_second[row["sec"]][name] += row[f"{name}_rate"] or 0.0
    return per_second


def shared_limits(
    runs: Iterable[tuple[SessionFigures, Sequence[Row], Sequence[Row], Sequence[Row]]],
) -> ChartLimits:
    """The y ranges that hold every run's timeline and broker chart: ``runs`` gives, per
    run, its figures, its per-second client rows, its per-second latency rows and its
    broker polls."""
    rate, depth = 0.0, 0.0
    latencies: list[float] = []
    for figures, seconds, latency, polls in runs:
        rate = max([rate, *(v for r in _second_rates(seconds).values() for v in r.values())])
        rate = max([rate, *(float(p.client["target_rate"]) for p in figures.phases
                            if p.client.get("target_rate"))])  # fmt: skip
        latencies += [row[q] / 1000 for row in latency for q, _, _ in TIMELINE_PERCENTILES
                      if row.get(q)]  # fmt: skip
        latencies += [row["p99"] / 1000 for row in latency
                      if row["basis"] == "intended" and row.get("p99")]  # fmt: skip
        depth = max([depth, *(float(row["queue_ready"]) for row in polls
                              if row["queue_ready"] is not None)])  # fmt: skip
    return ChartLimits(
        rate_high=rate or None,
        latency_low=min(latencies, default=None),
        latency_high=max(latencies, default=None),
        depth_high=depth or None,
    )


def _outside_legend(axes: Axes, **kwargs: object) -> None:
    """The legend beside the axes, never over the data."""
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8,
                framealpha=0.9, **kwargs)  # fmt: skip


def _log_x_when_wide(axes: Axes, values: Sequence[int]) -> None:
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 10:
        _plain_log_x(axes)
        # room beside the first and last step: a marker there is not cut by the frame
        axes.set_xlim(min(positive) / 1.6, max(positive) * 1.6)


def _headroom(axes: Axes, highest: float, share: float = 0.15) -> None:
    """A linear y axis from 0 with room above the highest point (or target)."""
    axes.set_ylim(0, max(1.0, highest * (1 + share)))


#: A phase label's width per character, as a share of the axes' width (8 pt text on the
#: timeline's 11-inch figure), to tell when two labels would overlap.
LABEL_CHAR_SHARE = 0.0075
#: Rows of phase labels above the axes: a label that would overlap the one before it on its
#: row goes up a row (short autopilot steps side by side), at most this many.
LABEL_ROWS = 3


def _shade_phases(axes: Axes, phases: Sequence[PhaseFigures], label: bool) -> None:
    """Phases as background bands coloured by verdict, labelled at the top; labels of phases
    too short for them are stacked in rows instead of printed over each other."""
    first = min((p.start_s for p in phases), default=0.0)
    last = max((p.start_s + (p.duration_s or 0.0) for p in phases), default=0.0)
    span = max(last - first, 1e-9)
    row_ends = [-1.0] * LABEL_ROWS  # where each row's last label ends (axes share)
    for p in phases:
        begin = p.start_s
        end = begin + (p.duration_s or 0.0)
        axes.axvspan(begin, end, color=VERDICT_COLOURS[p.verdict], zorder=0, lw=0)
        if p.phase.index:
            axes.axvline(begin, color="#9e9e9e", lw=0.8, ls="--", zorder=1)
        if label:
            middle = ((begin + end) / 2 - first) / span
            half = len(p.phase.label) * LABEL_CHAR_SHARE / 2
            row = next((r for r, edge in enumerate(row_ends) if middle - half > edge), 0)
            row_ends[row] = middle + half
            axes.text(
                (begin + end) / 2, 1.01 + 0.07 * row, p.phase.label,
                transform=axes.get_xaxis_transform(), ha="center", va="bottom", fontsize=8,
                color="#424242", clip_on=False,
            )  # fmt: skip


def timeline_chart(
    figures: SessionFigures,
    seconds: Sequence[Row],
    latency: Sequence[Row],
    limits: ChartLimits | None = None,
) -> Figure:
    """The seed's figure of a run: publish, confirm and consume msg/s per second over the
    phases (shaded by verdict, each step of the swept setting marked and labelled), and
    under it the e2e latency percentiles per second, p50 to p99.9, with the p99 from the
    intended send dashed. ``limits``: y ranges shared with the report's other runs."""
    limits = limits or ChartLimits()
    figure, (rates, lat) = plt.subplots(
        2, 1, figsize=(11, 6.6), sharex=True, gridspec_kw={"height_ratios": [3, 2.4]}
    )
    _shade_phases(rates, figures.phases, label=True)
    _shade_phases(lat, figures.phases, label=False)
    per_second = _second_rates(seconds)
    xs = sorted(per_second)
    confirms = figures.session.manifest.spec.get("confirms", True) is not False
    # a second's figures are drawn at its middle: second s covers [s, s + 1)
    for name, colour in RATE_COLOURS.items():
        if name == "confirm" and not confirms:
            continue
        rates.plot([x + 0.5 for x in xs], [per_second[x][name] for x in xs], color=colour,
                   lw=1.0 if name == "confirm" else 1.3, label=f"{name} msg/s")  # fmt: skip
    targets = [p for p in figures.phases if p.client.get("target_rate")]
    for p in targets:
        end = p.start_s + (p.duration_s or 0.0)
        rates.hlines(p.client["target_rate"], p.start_s, end, colors="#616161", lw=1,
                     linestyles=":", label="target" if p is targets[0] else None)  # fmt: skip
    rates.set_ylabel("msg/s")
    highest = limits.rate_high or max(
        [v for x in xs for v in per_second[x].values()]
        + [float(p.client["target_rate"]) for p in targets],
        default=0.0,
    )
    _headroom(rates, highest)
    _outside_legend(rates)
    rates.grid(alpha=0.3)
    series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for row in latency:
        for q, _, _ in TIMELINE_PERCENTILES:
            if row.get(q) is not None:
                series[(row["basis"], q)].append((row["sec"] + 0.5, row[q] / 1000))
    drawn = False
    for q, name, colour in reversed(TIMELINE_PERCENTILES):  # legend: p99.9 on top
        points = sorted(series.get(("actual", q), []))
        if points:
            lat.plot([x for x, _ in points], [y for _, y in points], color=colour, lw=1.1,
                     label=f"e2e {name}")  # fmt: skip
            drawn = True
    intended = sorted(series.get(("intended", "p99"), []))
    if intended:
        lat.plot([x for x, _ in intended], [y for _, y in intended], color="#6a51a3", ls="--",
                 lw=1.0, label="e2e p99 from the intended send")  # fmt: skip
        drawn = True
    _plain_log_axis(lat)
    if limits.latency_low and limits.latency_high:
        lat.set_ylim(limits.latency_low / 1.3, limits.latency_high * 1.3)
    elif drawn:
        _log_room(lat)
    lat.set_ylabel("e2e latency ms (log)")
    lat.set_xlabel("seconds since start")
    lat.grid(alpha=0.3, which="both")
    if drawn:
        _outside_legend(lat)
    figure.suptitle(f"{figures.session.title}: throughput and latency per second", y=1.02)
    return figure


def broker_chart(
    figures: SessionFigures, polls: Sequence[Row], limits: ChartLimits | None = None
) -> Figure | None:
    """Queue depth and node memory per broker poll, with alarm periods in red; the depth
    axis shared with the report's other runs (``limits``)."""
    if not polls:
        return None
    figure, depth_axes = plt.subplots(figsize=(11, 3.6))
    _shade_phases(depth_axes, figures.phases, label=True)
    xs = [row["sec"] for row in polls]
    depth_axes.plot(xs, [row["queue_ready"] for row in polls], color="#1f77b4", lw=1.3,
                    label="queue depth (ready)")  # fmt: skip
    depth_axes.set_ylabel("messages ready")
    depth_axes.set_xlabel("seconds since start")
    depths = [row["queue_ready"] for row in polls if row["queue_ready"] is not None]
    deepest = (limits.depth_high if limits else None) or max(depths, default=0)
    depth_axes.set_ylim(0, max(10.0, 1.15 * deepest))
    depth_axes.grid(alpha=0.3)
    memory_axes = depth_axes.twinx()
    mib = [float("nan") if row["mem_used"] is None else row["mem_used"] / 2**20 for row in polls]
    memory_axes.plot(xs, mib, color="#7f7f7f", lw=1.1, label="memory used MiB")
    watermarks = [row["mem_limit"] for row in polls if row["mem_limit"]]
    peak = max((m for m in mib if m == m), default=0.0)  # m == m: not NaN
    top = 1.3 * peak if peak else 1.0
    if watermarks:
        watermark = max(watermarks) / 2**20
        if watermark <= 2 * peak:
            top = 1.1 * watermark
            memory_axes.axhline(watermark, color="#d62728", lw=0.8, ls=":",
                                label=f"memory high watermark {watermark:.0f} MiB")  # fmt: skip
        else:  # far above: a line there would flatten the memory curve
            off_scale = f"memory high watermark {watermark:.0f} MiB (off scale)"
            memory_axes.plot([], [], color="#d62728", lw=0.8, ls=":", label=off_scale)
    memory_axes.set_ylabel("memory used MiB")
    memory_axes.set_ylim(0, top)
    for index, row in enumerate(polls):
        if row["mem_alarm"] or row["disk_alarm"]:
            end = polls[index + 1]["sec"] if index + 1 < len(polls) else row["sec"] + 1
            depth_axes.axvspan(row["sec"], end, color="#d62728", alpha=0.35, lw=0,
                               label="alarm" if not any(
                                   r["mem_alarm"] or r["disk_alarm"] for r in polls[:index]
                               ) else None)  # fmt: skip
    handles, labels = depth_axes.get_legend_handles_labels()
    more_handles, more_labels = memory_axes.get_legend_handles_labels()
    # beside the plot, clear of the memory axis' labels
    depth_axes.legend(handles + more_handles, labels + more_labels, loc="upper left",
                      bbox_to_anchor=(1.08, 1.0), borderaxespad=0.0, fontsize=8,
                      framealpha=0.9)  # fmt: skip
    figure.suptitle(f"{figures.session.title}: queue depth and broker memory", y=1.04)
    return figure


def queue_chart(
    figures: SessionFigures, queue_seconds: Sequence[Row], limit: int = 10
) -> Figure | None:
    """Each queue's e2e p99 per second, the worst ``limit`` queues (by p99 over the run's
    load phases) one line each and the others as a grey band of their range: the seed's
    per-queue lines, where a minority of queues fill up. None without per-queue rows."""
    if not queue_seconds:
        return None
    worst: dict[str, float] = {}
    for phase in figures.phases:
        for queue, lat in phase.queues.items():
            worst[queue] = max(worst.get(queue, 0.0), float(lat.get("p99") or 0))
    ranked = sorted(worst, key=lambda q: -worst[q])[:limit]
    by_queue: dict[str, list[Row]] = defaultdict(list)
    for row in queue_seconds:
        by_queue[row["queue"]].append(row)
    figure, axes = plt.subplots(figsize=(11, 4.2))
    _shade_phases(axes, figures.phases, label=True)
    others = [q for q in by_queue if q not in ranked]
    if others:
        per_second: dict[int, list[float]] = defaultdict(list)
        for queue in others:
            for row in by_queue[queue]:
                if row["p99"]:
                    per_second[int(row["sec"])].append(row["p99"] / 1000)
        secs = sorted(per_second)
        axes.fill_between(secs, [min(per_second[s]) for s in secs],
                          [max(per_second[s]) for s in secs], color="#bdbdbd", alpha=0.6,
                          lw=0, label=f"the other {len(others)} queues (range)")  # fmt: skip
    for index, queue in enumerate(ranked):
        rows = sorted(by_queue.get(queue, []), key=lambda r: r["sec"])
        label = f"{queue} (p99 {worst[queue] / 1000:,.1f} ms)"
        axes.plot([r["sec"] for r in rows], [r["p99"] / 1000 for r in rows], lw=1.2,
                  color=f"C{index % 10}", label=label)  # fmt: skip
    axes.set_yscale("log")
    _plain_log_axis(axes)
    _log_room(axes)
    axes.set_ylabel("e2e p99 per second (ms, log)")
    axes.set_xlabel("seconds since start")
    axes.grid(alpha=0.3, which="both")
    _outside_legend(axes)
    figure.suptitle(
        f"{figures.session.title}: e2e p99 per queue, the {len(ranked)} worst"
        + (f" of {len(by_queue)}" if others else ""),
        y=1.02,
    )
    figure.tight_layout()
    return figure


def _throughput_of(phase: PhaseFigures) -> float:
    return float(phase.client.get("consume_rate_mean") or 0.0)


def sweep_chart(figures: SessionFigures, sweep: Sweep) -> Figure:
    """The swept setting against throughput (left) and e2e latency (right). The line joins
    each value's steady phase (the one the recommendation stands on); another phase at a
    value already drawn is a separate hollow point labelled with its phase, so repeated
    values do not zig-zag."""
    setting = sweep.setting
    figure, (through, lat) = plt.subplots(1, 2, figsize=(11.5, 4.0))
    grouped: dict[int, list[PhaseFigures]] = defaultdict(list)
    for p in sweep.rows:
        grouped[int(p.setting(setting) or 0)].append(p)
    values = sorted(grouped)
    main = {v: representative(grouped[v], figures.fan_out) for v in values}
    through.plot(values, [_throughput_of(main[v]) for v in values], marker="o",
                 color="C0", label="msg/s consumed")  # fmt: skip
    styles = (("p99", "-", "C3"), ("p95", "--", "C1"), ("p75", ":", "C2"))
    for q, style, colour in styles:
        ys = [main[v].latency_ms(SWEEP_LATENCY, q) for v in values]
        lat.plot(values, [float("nan") if y is None else y for y in ys], ls=style,
                 marker="o", color=colour, label=q)  # fmt: skip
    others = [p for v in values for p in grouped[v] if p is not main[v]]
    for index, p in enumerate(others):
        x = int(p.setting(setting) or 0)
        label = "other phase at a value" if index == 0 else None
        through.scatter([x], [_throughput_of(p)], s=40, facecolors="none", edgecolors="C0",
                        zorder=4, label=label)  # fmt: skip
        through.annotate(p.phase.label, (x, _throughput_of(p)), textcoords="offset points",
                         xytext=(6, 4), fontsize=7, color="#424242")  # fmt: skip
        p99 = p.latency_ms(SWEEP_LATENCY, "p99")
        if p99 is not None:
            lat.scatter([x], [p99], s=40, facecolors="none", edgecolors="C3", zorder=4,
                        label="p99, other phase" if index == 0 else None)  # fmt: skip
            lat.annotate(p.phase.label, (x, p99), textcoords="offset points", xytext=(6, 4),
                         fontsize=7, color="#424242")  # fmt: skip
    recommended = sweep.recommendation.value
    if recommended is not None and recommended in main:
        through.scatter([recommended], [_throughput_of(main[recommended])], s=180,
                        facecolors="none", edgecolors="#d62728", lw=2, zorder=5,
                        label="recommended")  # fmt: skip
    targets = [float(t) for p in sweep.rows if (t := p.client.get("target_rate"))]
    if targets:
        through.axhline(max(targets) * figures.fan_out, color="#616161", lw=1, ls=":",
                        label="target")  # fmt: skip
    highest = max([_throughput_of(p) for p in sweep.rows] + [t * figures.fan_out for t in targets])
    _headroom(through, highest)
    name = setting_titles([figures]).get(setting, setting)
    for axes in (through, lat):
        _log_x_when_wide(axes, values)
        axes.set_xlabel(name)
        axes.grid(alpha=0.3, which="both")
    through.set_ylabel("msg/s consumed")
    lat.set_ylabel("e2e latency ms (log)")
    _plain_log_axis(lat)
    _log_room(lat, above=1.6)  # room for a point's label at the top
    # below the plot: inside it would cover a point at low throughput
    through.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize=8,
                   framealpha=0.9)  # fmt: skip
    _outside_legend(lat)
    figure.suptitle(f"{figures.session.title}: {name.lower()} against throughput and latency",
                    y=1.02)  # fmt: skip
    figure.tight_layout()
    return figure


def comparison_chart(runs: Sequence[tuple[str, SessionFigures]], setting: str) -> Figure:
    """The runs of one benchmark side by side, as the seeds draw them: msg/s (left) and e2e
    p99 (right) per step of ``setting``, one line per run through each value's steady
    phase; a run that did not sweep is one point at the value it ran at. A run with no
    limit (no confirms, or a step of 0 where 0 is unlimited) has no step on the axis: it is
    a dashed line in its colour across the whole chart at its msg/s and p99, the level the
    limited steps are measured against."""
    figure, (through, lat) = plt.subplots(1, 2, figsize=(12, 4.8))
    markers = "osD^v<>P*"
    every_value: list[int] = []
    highest = 0.0
    for index, (name, figures) in enumerate(runs):
        grouped, unlimited, no_limit = limited_and_not(figures, setting)
        colour = f"C{index}"
        values = sorted(grouped)
        every_value += values
        main = [representative(grouped[v], figures.fan_out) for v in values]
        if values:
            style = {"marker": markers[index % len(markers)], "color": colour}
            rates = [_throughput_of(p) for p in main]
            highest = max([highest, *rates])
            through.plot(values, rates, label=name, **style)
            p99 = [p.latency_ms(SWEEP_LATENCY, "p99") for p in main]
            lat.plot(values, [float("nan") if v is None else v for v in p99], label=name,
                     **style)  # fmt: skip
        if unlimited:
            reference = representative(unlimited, figures.fan_out)
            main.append(reference)  # its target counts for the headroom as the steps' do
            # above the steps' lines: a run without a limit often sits on the best of them
            line = {"color": colour, "ls": "--", "lw": 1.4, "zorder": 2.5,
                    "label": f"{no_limit}: {name}"}  # fmt: skip
            rate = _throughput_of(reference)
            highest = max(highest, rate)
            through.axhline(rate, **line)
            reference_p99 = reference.latency_ms(SWEEP_LATENCY, "p99")
            if reference_p99 is not None:
                lat.axhline(reference_p99, **line)
        targets = [float(t) for p in main if (t := p.client.get("target_rate"))]
        highest = max([highest, *(t * figures.fan_out for t in targets)])
    name = setting_titles([f for _, f in runs]).get(setting, setting)
    _headroom(through, highest)
    for axes in (through, lat):
        _log_x_when_wide(axes, every_value)
        axes.set_xlabel(name)
        axes.grid(alpha=0.3, which="both")
    through.set_ylabel("msg/s consumed")
    through.set_title("throughput", fontsize=10)
    lat.set_ylabel("e2e p99 ms (log)")
    lat.set_title("p99 latency", fontsize=10)
    _plain_log_axis(lat)
    _log_room(lat)
    handles, labels = through.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncols=min(3, len(labels)), fontsize=8,
                  bbox_to_anchor=(0.5, -0.02 - 0.05 * ((len(labels) - 1) // 3)))  # fmt: skip
    figure.suptitle(f"{name}: the runs side by side", y=1.02)
    figure.tight_layout(rect=(0, 0.08 + 0.05 * ((len(labels) - 1) // 3), 1, 1))
    return figure
