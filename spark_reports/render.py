"""The self-contained HTML report (inline CSS, charts as inline base64 PNG, each chart's
PNG and SVG files named under it) and the charts' part of report.md."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from flowdeck.figures import sweep, verdict
from flowdeck.figures.verdict import Verdict
from flowdeck.spark_reports.figures import MEAN_MEANING, SessionFigures
from flowdeck.spark_reports.tables import Table, format_cell

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#212121;
background:#fafafa}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{font-size:26px;margin:0 0 4px}
h2{font-size:20px;margin:36px 0 8px;border-bottom:2px solid #e0e0e0}
h3{font-size:16px;margin:22px 0 6px}
.meta{color:#616161}
table{border-collapse:collapse;margin:6px 0 4px;font-size:12.5px;background:#fff}
th,td{border:1px solid #e0e0e0;padding:3px 7px;vertical-align:top}
th{background:#eeeeee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto}
.note{color:#616161;font-size:12.5px;margin:2px 0}
img{max-width:100%;background:#fff;border:1px solid #e0e0e0;margin:8px 0}
ul.reasoning{font-size:13px;margin:4px 0 0 0}
.rec{font-weight:600}
"""


#: Each verdict's shade, in the charts' phase bands and the tables' rows.
VERDICT_COLOURS = {
    Verdict.SUSTAINABLE: "#e8f5e9",
    Verdict.BACK_PRESSURED: "#fff8e1",
    Verdict.THROTTLED: "#fff3e0",
    Verdict.OVERLOADED: "#ffebee",
    Verdict.DRAINING: "#f3e5f5",
    Verdict.CATCHING_UP: "#f3e5f5",
    Verdict.TOO_SHORT: "#fafafa",
    Verdict.DRAIN: "#e3f2fd",
    Verdict.PAUSED: "#eceff1",
    None: "#f5f5f5",
}


def verdict_class(verdict: str) -> str:
    """A verdict's CSS class: ``v-draining-a-backlog``."""
    return "v-" + verdict.replace(" ", "-")


#: The tables' row shades, one rule per verdict.
VERDICT_CSS = "".join(
    f".{verdict_class(str(v))}{{background:{colour}}}"
    for v, colour in VERDICT_COLOURS.items()
    if v is not None
)


@dataclass(frozen=True, slots=True)
class Chart:
    """A drawn chart: its title, the stem of its files beside report.html (``NAME.png``,
    ``NAME.svg``: the run's key and the chart's name) and their bytes."""

    title: str
    name: str
    png: bytes
    svg: bytes

    @property
    def files(self) -> tuple[str, str]:
        return (f"{self.name}.png", f"{self.name}.svg")


@dataclass(frozen=True, slots=True)
class Section:
    heading: str
    intro: str
    charts: tuple[Chart, ...]
    tables: tuple[Table, ...]


def thresholds_text() -> list[str]:
    """The verdict and recommendation rules, exactly as ``figures.verdict`` and
    ``figures.sweep`` apply them, after what the rates they compare mean."""
    lines = [f"<b>msg/s</b>: {html.escape(MEAN_MEANING)}."]
    for rule in (*verdict.rules(), *sweep.rules()):
        name, _, text = rule.partition(": ")
        lines.append(f"<b>{html.escape(name)}</b>: {html.escape(text)}.")
    return lines


def table_html(table: Table) -> str:
    verdict_column = table.columns.index("verdict") if "verdict" in table.columns else None
    parts = [f"<h3>{html.escape(table.title)}</h3>"]
    if table.note:
        parts.append(f'<p class="note">{html.escape(table.note)}</p>')
    parts.append('<div class="scroll"><table><thead><tr>')
    parts += [f"<th>{html.escape(c)}</th>" for c in table.columns]
    parts.append("</tr></thead><tbody>")
    for row in table.rows:
        css = ""
        if verdict_column is not None and row[verdict_column]:
            css = f' class="{html.escape(verdict_class(str(row[verdict_column])))}"'
        parts.append(f"<tr{css}>")
        for cell in row:
            numeric = isinstance(cell, int | float) and not isinstance(cell, bool)
            parts.append(
                f"<td{' class=n' if numeric else ''}>{html.escape(format_cell(cell))}</td>"
            )
        parts.append("</tr>")
    parts.append("</tbody></table></div>")
    if table.reasoning:
        parts.append('<ul class="reasoning">')
        for line in table.reasoning:
            css = ' class="rec"' if line.startswith("recommended") else ""
            parts.append(f"<li{css}>{html.escape(line)}</li>")
        parts.append("</ul>")
    return "".join(parts)


def chart_html(chart: Chart) -> str:
    """The chart inline, and the names of its files beside the report."""
    data = base64.b64encode(chart.png).decode("ascii")
    png, svg = (html.escape(name) for name in chart.files)
    return (
        f'<img alt="{html.escape(chart.title)}" src="data:image/png;base64,{data}">'
        f'<p class="note">{html.escape(chart.title)}: <code>{png}</code> · <code>{svg}</code>'
        " beside this page</p>"
    )


def charts_markdown(sections: Sequence[Section]) -> str:
    """The charts of ``sections`` for report.md: each as its PNG (an image a Markdown
    viewer shows, next to the page) and a link to its SVG, under its section's heading."""
    lines = ["## Charts", ""]
    for section in sections:
        if not section.charts:
            continue
        lines += [f"### {section.heading}", ""]
        for chart in section.charts:
            png, svg = chart.files
            lines += [
                f"![{chart.title}]({png})",
                "",
                f"{chart.title}: `{png}`, [`{svg}`]({svg})",
                "",
            ]
    return "\n".join(lines) if len(lines) > 2 else ""


def session_intro(figures: SessionFigures) -> str:
    m = figures.session.manifest
    started = datetime.fromtimestamp(m.start, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    spec = ", ".join(
        f"{k}={v}"
        for k, v in m.spec.items()
        if k in ("queue_type", "queues", "size", "confirm", "persistent")
        or k in {setting.name for setting in m.settings}
    )
    versions = ", ".join(f"{k} {v}" for k, v in m.versions.items())
    duration = "unknown" if figures.duration_s is None else f"{figures.duration_s:.0f} s"
    return (
        f"<p class=meta>session <code>{html.escape(m.session_id)}</code> · {started} · "
        f"{duration} · outcome {html.escape(m.outcome)} · host {html.escape(m.host)}<br>"
        f"spec: {html.escape(spec) or '–'}<br>versions: {html.escape(versions) or '–'}</p>"
    )


def render(title: str, sections: Sequence[Section], generated: str) -> str:
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{html.escape(title)}</title><style>{CSS}{VERDICT_CSS}</style></head><body><main>",
        f"<h1>{html.escape(title)}</h1><p class=meta>{html.escape(generated)}</p>",
        "<h3>How phases are judged</h3><ul class=reasoning>",
        *[f"<li>{line}</li>" for line in thresholds_text()],
        "</ul>",
    ]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.heading)}</h2>{section.intro}")
        parts += [chart_html(chart) for chart in section.charts]
        parts += [table_html(table) for table in section.tables]
    parts.append("</main></body></html>")
    return "\n".join(parts)
