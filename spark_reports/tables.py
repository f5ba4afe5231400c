"""Report tables and their Markdown and CSV forms."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field

Cell = str | int | float | None


@dataclass(frozen=True, slots=True)
class Table:
    """A table of the report. ``name`` is its file stem; numbers stay numbers until
    written, so the CSV keeps them exact and the Markdown/HTML format them."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    note: str = ""
    reasoning: tuple[str, ...] = field(default=())

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow(["" if cell is None else _csv_cell(cell) for cell in row])
        return out.getvalue()

    def to_markdown(self, heading_level: int = 2) -> str:
        lines = [f"{'#' * heading_level} {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        lines.append("| " + " | ".join(_escape(c) for c in self.columns) + " |")
        lines.append("|" + "|".join(_align(self.rows, i) for i in range(len(self.columns))) + "|")
        for row in self.rows:
            lines.append("| " + " | ".join(_escape(format_cell(c)) for c in row) + " |")
        if self.reasoning:
            lines += ["", *[f"- {line}" for line in self.reasoning]]
        return "\n".join(lines) + "\n"


def _csv_cell(cell: str | int | float) -> str | int | float:
    if isinstance(cell, float):
        return round(cell, 3)
    return cell


def format_cell(cell: Cell) -> str:
    """How a figure reads: integers plain, decimals to at most 3 significant places."""
    if cell is None:
        return "–"
    if isinstance(cell, bool):
        return "yes" if cell else "no"
    if isinstance(cell, int):
        return str(cell)
    if isinstance(cell, float):
        if cell == int(cell) and abs(cell) < 1e15:
            return str(int(cell))
        if abs(cell) >= 100:
            return f"{cell:.1f}"
        if abs(cell) >= 1:
            return f"{cell:.2f}"
        return f"{cell:.3f}"
    return cell


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _align(rows: Sequence[Sequence[Cell]], index: int) -> str:
    numeric = any(isinstance(row[index], int | float) for row in rows)
    return "---:" if numeric else "---"
