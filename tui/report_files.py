"""A written report's per-phase tables read back from its directory, for the cockpit.

The report job (``flowdeck report --out DIR``) writes a .csv per table; this joins a
session's three per-phase tables (``<key>-throughput``, ``<key>-latency``, ``<key>-flow``)
into one row per phase and reads the recommendation lines of its ``<key>-sweep-<setting>``
tables. The report screen shows the result; the sessions screen reads it when a report job
ends (neither imports the other).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from flowdeck.figures.verdict import Verdict
from flowdeck.spark_reports.tables import Cell
from flowdeck.tui.model import SWEEP_SETTINGS

HTML = "report.html"
THROUGHPUT = "-throughput.csv"
#: The settings a phase can differ by, as the throughput table names its columns.
SETTING_COLUMNS = ("inflight", "prefetch", "ack every", "publishers", "consumers")
#: The latency the sweep tables judge by (the report's ``SWEEP_LATENCY``).
E2E = "e2e actual"


@dataclass(frozen=True, slots=True)
class PhaseRow:
    """One phase as the report wrote it: its cells by the report's column names."""

    index: int
    label: str
    settings: dict[str, Cell]
    target: Cell
    publish: Cell
    consume: Cell
    p50: Cell
    p99: Cell
    verdict: str
    why: str

    @property
    def drain(self) -> bool:
        return self.verdict == str(Verdict.DRAIN)


@dataclass(frozen=True, slots=True)
class SessionReport:
    """One session's part of a report: its phases, the row to highlight, and the
    recommendation lines (the last line of each sweep's reasoning, as the job prints)."""

    key: str
    title: str
    phases: tuple[PhaseRow, ...]
    best: int | None
    recommendations: tuple[str, ...]

    @property
    def varying(self) -> tuple[str, ...]:
        """The settings that took more than one value over the phases that are not the
        drain (all of them when none did: a run at one setting still says what it was)."""
        load = [p for p in self.phases if not p.drain] or list(self.phases)
        differ = tuple(c for c in SETTING_COLUMNS if len({p.settings.get(c) for p in load}) > 1)
        return differ or SETTING_COLUMNS[:3]


@dataclass(frozen=True, slots=True)
class ReportTables:
    """What the screen shows of a report directory."""

    out_dir: Path
    sessions: tuple[SessionReport, ...]

    @property
    def html_path(self) -> Path:
        return self.out_dir / HTML


class ReportUnreadable(Exception):
    """The directory holds no report the screen can read; the message says why."""


def parse_cell(text: str) -> Cell:
    """A CSV cell back as the report held it: empty is None, numbers are numbers."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_rows(path: Path) -> list[dict[str, Cell]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [{k: parse_cell(v) for k, v in row.items()} for row in csv.DictReader(handle)]


def table_title(csv_path: Path) -> str:
    """The session's title as the report heads its tables (``## <title>: throughput…``)."""
    markdown = csv_path.with_suffix(".md")
    if markdown.is_file():
        first = markdown.read_text(encoding="utf-8").split("\n", 1)[0]
        if first.startswith("#") and ": " in first:
            return first.lstrip("# ").rsplit(": ", 1)[0]
    return csv_path.name.removesuffix(THROUGHPUT)


def reasoning(markdown: Path) -> list[str]:
    """A sweep table's reasoning: the ``- `` lines after the table's last row."""
    lines = markdown.read_text(encoding="utf-8").splitlines()
    last_row = max((i for i, line in enumerate(lines) if line.startswith("|")), default=-1)
    return [line[2:] for line in lines[last_row + 1 :] if line.startswith("- ")]


def read_session(out_dir: Path, key: str, throughput: Path) -> SessionReport:
    e2e = {
        int(str(row["phase"])): row
        for row in read_rows(out_dir / f"{key}-latency.csv")
        if row["latency"] == E2E
    }
    flow = {int(str(row["phase"])): row for row in read_rows(out_dir / f"{key}-flow.csv")}
    phases = []
    best = None
    for position, row in enumerate(read_rows(throughput)):
        if row.get("recommended"):
            best = position
        index = int(str(row["phase"]))
        latency = e2e.get(index, {})
        judged = flow.get(index, {})
        phases.append(
            PhaseRow(
                index=index,
                label=str(row["label"] or ""),
                settings={c: row.get(c) for c in SETTING_COLUMNS},
                target=row["target msg/s"],
                publish=row["publish mean"],
                consume=row["consume mean"],
                p50=latency.get("p50"),
                p99=latency.get("p99"),
                verdict=str(judged.get("verdict") or ""),
                why=str(judged.get("why") or ""),
            )
        )
    order = {setting.value: n for n, setting in enumerate(SWEEP_SETTINGS)}
    sweeps = sorted(
        out_dir.glob(f"{key}-sweep-*.md"),
        key=lambda p: order.get(p.stem.removeprefix(f"{key}-sweep-"), len(order)),
    )
    lines = [steps[-1] for steps in map(reasoning, sweeps) if steps]
    return SessionReport(
        key=key,
        title=table_title(throughput),
        phases=tuple(phases),
        best=best,
        recommendations=tuple(lines),
    )


def read_report(out_dir: Path) -> ReportTables:
    """Every session's per-phase figures in a report directory, in the report's order
    (``report.md`` names its tables in it)."""
    if not out_dir.is_dir():
        raise ReportUnreadable(f"no report directory at {out_dir}")
    found = {p.name.removesuffix(THROUGHPUT): p for p in out_dir.glob(f"*{THROUGHPUT}")}
    if not found:
        raise ReportUnreadable(
            f"{out_dir} holds no per-phase table (*{THROUGHPUT}); was the report job "
            "interrupted? Run it again with r on the sessions screen"
        )
    summary = out_dir / "report.md"
    text = summary.read_text(encoding="utf-8") if summary.is_file() else ""
    keys = sorted(found, key=lambda k: (text.find(f"{table_title(found[k])}: "), k))
    try:
        sessions = tuple(read_session(out_dir, key, found[key]) for key in keys)
    except (OSError, KeyError, ValueError) as exc:
        raise ReportUnreadable(f"{out_dir} does not read as a flowdeck report: {exc!r}") from None
    return ReportTables(out_dir, sessions)


def latest_report(reports_root: Path) -> Path | None:
    """The newest directory under ``reports_root`` that holds a finished report."""
    if not reports_root.is_dir():
        return None
    done = [p for p in reports_root.iterdir() if (p / HTML).is_file()]
    return max(done, key=lambda p: (p / HTML).stat().st_mtime, default=None)
