"""How ``flowdeck run`` ends: thresholds, the per-phase table, the JSON summary, JUnit.

``--threshold`` (repeatable) adds pass/fail criteria to the spec's ``thresholds``; they are
read before anything starts (a bad one: one line, exit 2) and checked over the summary and
the per-phase table when the run ends. Exit codes: 0 all passed, 99 one failed (k6's
convention), 98 the consumers took far fewer messages than were published and the rest did
not wait in the run's queues (engine.delivery; the summary's last line says where they
went), 1 the run itself failed. ``--junit FILE`` writes one JUnit test case per threshold
for CI systems.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from flowdeck.collectors import printable
from flowdeck.engine import (
    THRESHOLDS_FAILED_EXIT,
    UNDELIVERED_EXIT,
    RunSpec,
    RunSummary,
    SpecError,
    ThresholdResult,
    evaluate_thresholds,
    parse_thresholds,
    spec_from_mapping,
    write_junit,
)
from flowdeck.figures import RunFigures

if TYPE_CHECKING:
    pass


def add_threshold_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "thresholds (CI)",
        "Exit 99 when a threshold fails, 0 when all pass, 1 when the run itself failed.",
    )
    group.add_argument(
        "--threshold",
        metavar="EXPR",
        action="append",
        default=[],
        help="a pass/fail criterion, e.g. 'e2e_p99 < 50ms', 'lost == 0', "
        "'consume_rate >= 0.98 * target', 'phase:inflight=200 e2e_p99 < 100ms' "
        "(repeatable; added to the spec's thresholds; metrics: docs/engine.md, Thresholds)",
    )
    group.add_argument(
        "--junit", metavar="FILE", help="write the thresholds' results as JUnit XML to FILE"
    )


def with_thresholds(spec: RunSpec, args: argparse.Namespace) -> RunSpec:
    """The spec with the ``--threshold`` flags added to its own; SpecError (exit 2) for a
    threshold that does not read or a ``--junit`` file that cannot be written, before the
    run starts."""
    added = list(getattr(args, "threshold", None) or [])
    if added:
        spec = spec_from_mapping({"thresholds": [*spec.thresholds, *added]}, spec)
    junit = getattr(args, "junit", None)
    if junit:
        folder = Path(junit).expanduser().parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # write_junit makes the missing folders
        if Path(junit).is_dir() or not os.access(folder, os.W_OK):
            raise SpecError("junit", f"cannot write the JUnit file {junit}; choose another --junit")
    return spec


def conclude(
    args: argparse.Namespace,
    spec: RunSpec,
    summary: RunSummary,
    figures: RunFigures | None,
    out: TextIO,
) -> int:
    """Check the thresholds, print the summary (text on ``out`` or JSON on stdout), write
    the JUnit file; the exit code."""

    phases = () if figures is None else figures.phases
    results = evaluate_thresholds(
        parse_thresholds(spec.thresholds), summary, phases, target_rate=spec.target_rate
    )
    try:
        if args.json:
            document = summary_document(summary, spec.redacted(), figures, results)
            print(json.dumps(document, indent=2))
        else:
            print_summary(summary, out)
            if figures is not None:
                print_phases(figures, out)
            print_thresholds(results, out)
            if summary.undelivered:  # the last line: where the messages went
                out.write(f"undelivered: {summary.undelivered}\n")
                out.flush()
    except OSError:
        pass  # the terminal was closed (SIGHUP): the session holds the summary
    if args.junit:
        write_junit(
            Path(args.junit).expanduser(), results, run_name=spec.name, duration=summary.duration
        )
    if summary.outcome == "failed":
        return 1
    if summary.undelivered:
        return UNDELIVERED_EXIT
    return THRESHOLDS_FAILED_EXIT if any(not r.passed for r in results) else 0


def summary_document(
    summary: RunSummary,
    spec: Mapping[str, Any],
    figures: RunFigures | None,
    thresholds: Sequence[ThresholdResult],
) -> dict[str, Any]:
    """The JSON summary a script reads: the summary, the spec as it ran (``spec`` must be
    redacted: ``RunSpec.redacted()``), the per-phase table and the recommendations with the
    report's figures (``figures.run``), and every threshold's result (``thresholds_passed``
    false when one failed)."""
    phases = () if figures is None else figures.phases
    return {
        **summary.to_json(),
        "phases": len(phases) or summary.phases,
        "spec": dict(spec),
        "phase_table": [phase.to_json() for phase in phases],
        "recommendations": [
            {
                "setting": sweep.setting,
                "value": sweep.recommendation.value,
                "reasoning": list(sweep.recommendation.reasoning),
            }
            for sweep in (() if figures is None else figures.sweeps)
        ],
        "capacity": None
        if figures is None or figures.capacity is None
        else {
            "rate": figures.capacity.rate,
            "per_publisher": figures.capacity.per_publisher,
            "broke_at": figures.capacity.broke_at,
            "reasoning": list(figures.capacity.reasoning),
        },
        "thresholds": [result.to_json() for result in thresholds],
        "thresholds_passed": all(result.passed for result in thresholds),
    }


def rate_basis(summary: RunSummary) -> str:
    """The line under the message table saying what its mean rates divide by."""
    active = summary.active
    return (
        "mean rate = count / the clients' own active time: "
        f"published over {active.publish_seconds:.2f} s (first to last send), "
        f"confirmed over {active.confirm_seconds:.2f} s (first send to last confirm), "
        f"consumed over {active.consume_seconds:.2f} s (first to last delivery)"
    )


def print_phases(figures: RunFigures, out: TextIO) -> None:
    """The per-phase table and the recommendations: the report's figures (``figures.run``:
    msg/s on the summary's basis, latency merged per phase, the verdict rules)."""
    phases = figures.phases
    if not phases:
        return
    header = (
        f"{'phase':<24}{'seconds':>8}{'target':>10}{'publish':>10}{'confirm':>10}"
        f"{'consume':>10}{'e2e p50':>9}{'p99':>9}{'p99.9':>9}  verdict"
    )
    lines = [
        f"{len(phases)} phase(s) (msg/s = the phase's messages / the clients' active time in it; "
        "latency in ms)",
        header,
    ]
    for phase in phases:
        e2e = phase.percentiles()
        target = "-" if phase.target_rate is None else f"{phase.target_rate:,.0f}"
        label = f"{phase.index} {phase.label}"[:23]
        verdict = "" if phase.verdict is None else phase.verdict.value
        lines.append(
            f"{label:<24}{phase.seconds:>8}{target:>10}{phase.figure('publish_rate_mean'):>10,.1f}"
            f"{phase.figure('confirm_rate_mean'):>10,.1f}{phase.figure('consume_rate_mean'):>10,.1f}"
            + "".join(f"{ms_text(e2e and getattr(e2e, q)):>9}" for q in ("p50", "p99", "p999"))
            + f"  {verdict}"
        )
    for sweep in figures.sweeps:
        lines.append(sweep.recommendation.reasoning[-1])
    if figures.capacity is not None:
        lines.append(figures.capacity.reasoning[-1])
    out.write("\n".join(lines) + "\n")
    out.flush()


def ms_text(value: float | None) -> str:
    """Milliseconds as every table of the command line prints them (- when not known)."""
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def print_thresholds(results: Sequence[ThresholdResult], out: TextIO) -> None:
    """Every threshold's result, failures marked, then the count."""
    if not results:
        return
    failed = sum(1 for r in results if not r.passed)
    lines = [f"thresholds: {len(results) - failed} passed, {failed} failed"]
    for result in results:
        mark = "pass" if result.passed else "FAIL"
        lines.append(f"  {mark}  {result.title}: {result.reason}")
    out.write("\n".join(lines) + "\n")
    out.flush()


__all__ = [
    "add_threshold_arguments",
    "conclude",
    "print_phases",
    "print_thresholds",
    "rate_basis",
    "with_thresholds",
]


#: The run's latency table's columns, by their Percentiles names.
QUANTILE_COLUMNS = ("p50", "p75", "p95", "p99", "p999", "max")


def print_summary(summary: RunSummary, out: TextIO) -> None:
    s = summary.safety
    rows = [
        ("published", s.published, summary.publish_rate),
        ("confirmed", s.confirmed, summary.confirm_rate),
        ("consumed", s.consumed, summary.consume_rate),
        ("nacked", s.nacked, None),
        ("returned", s.returned, None),
        ("redelivered", s.redelivered, None),
        ("duplicates", s.duplicates, None),
        *([("replayed (stream, read again)", s.replayed, None)] if s.replayed else []),
        ("unconfirmed", s.unconfirmed, None),
        ("lost (confirmed, never consumed)", s.lost, None),
    ]
    if s.rejected or s.dead_lettered or s.dropped:  # consumers that reject (RunSpec.reject)
        rows[-1:-1] = [
            ("rejected by consumers", s.rejected, None),
            ("  of them requeued", s.requeued, None),
            ("dead-lettered (taken off the DLQ)", s.dead_lettered, None),
            ("dropped (rejected, not in DLQ)", s.dropped, None),
        ]
    lines = [
        "",
        f"run {printable(summary.name)} {summary.outcome} ({printable(summary.stop_reason)}) "
        f"after {summary.duration:.1f} s",
        f"{'messages':<34}{'count':>12}{'mean rate':>14}",
    ]
    for label, count, rate in rows:
        rate_text = f"{rate:,.1f}/s" if rate is not None else ""
        lines.append(f"{label:<34}{count:>12,}{rate_text:>14}")
    lines.append(rate_basis(summary))
    lines.extend(f"incomplete: {line}" for line in summary.incomplete)
    if not summary.safety.confirms:
        lines.append("(confirms off: the broker confirmed nothing, so loss cannot be assessed)")
    if summary.latency:
        lines.append(
            f"{'latency (ms)':<28}{'count':>10}{'p50':>9}{'p75':>9}{'p95':>9}{'p99':>9}"
            f"{'p99.9':>9}{'max':>9}"
        )
        for (kind, basis), p in sorted(summary.latency.items()):
            lines.append(
                f"{kind.value + ' from ' + basis.value + ' send':<28}{p.count:>10,}"
                + "".join(
                    f"{ms_text(getattr(p, a)):>9}"
                    for a in ("p50", "p75", "p95", "p99", "p999", "max")
                )
            )
    if summary.session_dir and Path(summary.session_dir).is_dir():
        lines.append(f"session: {printable(summary.session_dir)}")
    if summary.recording_error:
        lines.append(f"recording: {printable(summary.recording_error)}")
    for error in summary.errors:
        lines.append(f"error: {printable(error)}")
    out.write("\n".join(lines) + "\n")
    out.flush()
