"""The report's charts, drawn with matplotlib (Agg) into PNG bytes for inlining."""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from flowdeck.spark_reports.figures import (
    SETTING_TITLES,
    SWEEP_LATENCY,
    PhaseFigures,
    SessionFigures,
    Sweep,
)
from flowdeck.spark_reports.measure import Row
from flowdeck.spark_reports.verdict import Verdict

VERDICT_COLOURS = {
    Verdict.SUSTAINABLE: "#e8f5e9",
    Verdict.BACK_PRESSURED: "#fff8e1",
    Verdict.OVERLOADED: "#ffebee",
    Verdict.DRAIN: "#e3f2fd",
    None: "#f5f5f5",
}
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


def _plain_log_x(axes: Axes) -> None:
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.xaxis.set_minor_formatter(
        FuncFormatter(lambda value, _: f"{value:g}" if f"{value:e}"[0] in "25" else "")
    )
    axes.tick_params(axis="x", which="minor", labelsize=7)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _shade_phases(axes: Axes, phases: Sequence[PhaseFigures], label: bool) -> None:
    """Phases as background bands coloured by verdict, labelled at the top."""
    for p in phases:
        begin = p.start_s
        end = begin + (p.duration_s or 0.0)
        axes.axvspan(begin, end, color=VERDICT_COLOURS[p.verdict], zorder=0, lw=0)
        if p.phase.index:
            axes.axvline(begin, color="#9e9e9e", lw=0.8, ls="--", zorder=1)
        if label:
            axes.text(
                (begin + end) / 2, 1.01, p.phase.label, transform=axes.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=8, color="#424242", clip_on=False,
            )  # fmt: skip


def timeline_chart(
    figures: SessionFigures, seconds: Sequence[Row], latency: Sequence[Row]
) -> bytes:
    """Throughput and latency over time, phases shaded by verdict."""
    figure, (rates, lat) = plt.subplots(
        2, 1, figsize=(11, 6.2), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    _shade_phases(rates, figures.phases, label=True)
    _shade_phases(lat, figures.phases, label=False)
    per_second: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in seconds:
        for name in ("publish", "confirm", "consume"):
            per_second[row["sec"]][name] += row[f"{name}_rate"] or 0.0
    xs = sorted(per_second)
    for name, colour in RATE_COLOURS.items():
        rates.plot(xs, [per_second[x][name] for x in xs], color=colour,
                   lw=1.2, label=f"{name} msg/s")  # fmt: skip
    targets = [p for p in figures.phases if p.client.get("target_rate")]
    for p in targets:
        end = p.start_s + (p.duration_s or 0.0)
        rates.hlines(p.client["target_rate"], p.start_s, end, colors="#616161", lw=1,
                     linestyles=":", label="target" if p is targets[0] else None)  # fmt: skip
    rates.set_ylabel("msg/s")
    rates.set_ylim(bottom=0)
    rates.legend(loc="lower left", fontsize=8, ncols=4, framealpha=0.9)
    rates.grid(alpha=0.3)
    series: dict[tuple[str, str, str], list[tuple[int, float]]] = defaultdict(list)
    for row in latency:
        for q in ("p50", "p99"):
            if row[q] is not None:
                series[(row["kind"], row["basis"], q)].append((row["sec"], row[q] / 1000))
    styles = {
        ("e2e", "actual", "p99"): ("#d62728", "-"),
        ("e2e", "intended", "p99"): ("#ff7f0e", "--"),
        ("e2e", "actual", "p50"): ("#8c564b", "-"),
    }
    for key, (colour, style) in styles.items():
        points = sorted(series.get(key, []))
        if points:
            lat.plot([x for x, _ in points], [y for _, y in points], color=colour, ls=style,
                     lw=1.1, label=f"{key[0]} {key[2]} ({key[1]} send)")  # fmt: skip
    _plain_log_axis(lat)
    lat.set_ylabel("latency ms (log)")
    lat.set_xlabel("seconds since start")
    lat.grid(alpha=0.3, which="both")
    if series:
        lat.legend(loc="upper left", fontsize=8, ncols=3, framealpha=0.9)
    figure.suptitle(f"{figures.session.title}: throughput and latency per second", y=1.02)
    return _png(figure)


def broker_chart(figures: SessionFigures, polls: Sequence[Row]) -> bytes | None:
    """Queue depth and node memory per broker poll, with alarm periods in red."""
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
    depth_axes.set_ylim(0, max(10.0, 1.15 * max(depths, default=0)))
    depth_axes.grid(alpha=0.3)
    memory_axes = depth_axes.twinx()
    mib = [float("nan") if row["mem_used"] is None else row["mem_used"] / 2**20 for row in polls]
    memory_axes.plot(xs, mib, color="#7f7f7f", lw=1.1, label="memory used MiB")
    limits = [row["mem_limit"] for row in polls if row["mem_limit"]]
    peak = max((m for m in mib if m == m), default=0.0)  # m == m: not NaN
    top = 1.3 * peak if peak else 1.0
    if limits:
        watermark = max(limits) / 2**20
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
    depth_axes.legend(handles + more_handles, labels + more_labels, loc="upper left",
                      fontsize=8, framealpha=0.9)  # fmt: skip
    figure.suptitle(f"{figures.session.title}: queue depth and broker memory", y=1.04)
    return _png(figure)


def sweep_chart(sweeps: Sequence[tuple[str, Sweep]]) -> bytes:
    """A setting against throughput (left) and e2e latency (right), one line per session."""
    setting = sweeps[0][1].setting
    figure, (through, lat) = plt.subplots(1, 2, figsize=(11, 3.8))
    markers = "osD^v<>"
    for index, (title, sweep) in enumerate(sweeps):
        rows = sorted(sweep.rows, key=lambda p: p.setting(setting) or 0)
        xs = [p.setting(setting) or 0 for p in rows]
        marker = markers[index % len(markers)]
        through.plot(xs, [p.client.get("consume_rate_mean") or 0 for p in rows],
                     marker=marker, label=title)  # fmt: skip
        for q, style in (("p99", "-"), ("p95", "--"), ("p75", ":")):
            values = [p.latency_ms(SWEEP_LATENCY, q) for p in rows]
            lat.plot(xs, [float("nan") if v is None else v for v in values], ls=style,
                     marker=marker, color=f"C{index}",
                     label=f"{q}" + (f" {title}" if len(sweeps) > 1 else ""))  # fmt: skip
        if sweep.recommendation.value is not None:
            chosen = [p for p in rows if p.setting(setting) == sweep.recommendation.value]
            if chosen:
                through.scatter([sweep.recommendation.value],
                                [chosen[0].client.get("consume_rate_mean") or 0], s=180,
                                facecolors="none", edgecolors="#d62728", lw=2, zorder=5,
                                label="recommended" if index == 0 else None)  # fmt: skip
    name = SETTING_TITLES[setting]
    for axes in (through, lat):
        positive = [v for _, s in sweeps for p in s.rows if (v := p.setting(setting) or 0) > 0]
        if positive and max(positive) / min(positive) > 10:
            _plain_log_x(axes)
        axes.set_xlabel(name)
        axes.grid(alpha=0.3, which="both")
    through.set_ylabel("msg/s consumed")
    through.set_ylim(bottom=0)
    through.legend(fontsize=8)
    lat.set_ylabel("e2e latency ms (log)")
    _plain_log_axis(lat)
    lat.legend(fontsize=8, ncols=2 if len(sweeps) > 1 else 1)
    figure.suptitle(f"{name} against throughput and latency", y=1.02)
    figure.tight_layout()
    return _png(figure)
