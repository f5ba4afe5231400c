"""Thresholds: pass/fail criteria over a run's summary and its phases, for CI.

A threshold is one comparison written as an operator would say it::

    e2e_p99 < 50ms
    lost == 0
    consume_rate >= 0.98 * target
    phase:inflight=200 e2e_p99 < 100ms
    phase:* consume_rate >= 98% * target

It is read by a small recursive-descent parser (never ``eval``) into a tree of numbers,
metric names, ``+ - * /``, parentheses and one comparison, and checked at once: unknown
names, a time compared with a plain count, a bare number where a time needs a unit are
errors naming the problem, raised as :class:`SpecError` before the run starts. Times are
milliseconds inside (``50ms``, ``0.05s``, ``50000us`` are the same); ``98%`` is 0.98.

Without a ``phase:`` prefix a threshold reads the run's summary; with one it reads the
per-phase table (:mod:`engine.phase_figures`): ``phase:LABEL`` the phases with that label
(``inflight=200``, a mark's label, ``drain``; quote a label with spaces),
``phase:N`` the phase with that index, ``phase:*`` every phase but the drain. Each phase
gives one result. A threshold whose metric was not measured (no latency, no target) or
whose phase the run never had fails: a CI gate must not pass on a figure it never saw.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.latency_kinds import LatencyKind, SendBasis

if TYPE_CHECKING:
    from flowdeck.engine.progress import RunSummary
    from flowdeck.figures import PhaseFigures
    from flowdeck.figures.latency import Percentiles

#: k6's convention: the exit code of a run that ended but failed a threshold.
THRESHOLDS_FAILED_EXIT = 99


class Dim(Enum):
    """What a value measures: a plain number (count, rate, ratio) or a time (ms)."""

    NUMBER = "number"
    TIME = "time"
    #: A literal without a unit: takes the dimension of what it meets.
    FREE = "free"


@dataclass(frozen=True, slots=True)
class Metric:
    """A name a threshold can use: its dimension, unit shown, scopes and meaning."""

    name: str
    dim: Dim
    unit: str
    run: bool
    phase: bool
    help: str


def _metrics() -> dict[str, Metric]:
    rows = [
        Metric(
            "target",
            Dim.NUMBER,
            "msg/s",
            True,
            True,
            "target publish rate (rate x publishers; a phase's: mean over its seconds); "
            "unknown without a rate limit",
        ),
        Metric(
            "publish_rate",
            Dim.NUMBER,
            "msg/s",
            True,
            True,
            "run: published / publish_time; phase: the same within the phase",
        ),
        Metric(
            "confirm_rate",
            Dim.NUMBER,
            "msg/s",
            True,
            True,
            "run: confirmed / (first send to last confirm); phase: the same within the phase",
        ),
        Metric(
            "consume_rate",
            Dim.NUMBER,
            "msg/s",
            True,
            True,
            "run: consumed / (first to last delivery); phase: the same within the phase",
        ),
        *(
            Metric(
                f"{what}_rate_{stat}",
                Dim.NUMBER,
                "msg/s",
                False,
                True,
                f"phase: {label} of the per-second {what} rates",
            )
            for what in ("publish", "confirm", "consume")
            for stat, label in (("min", "lowest"), ("sd", "population standard deviation"))
        ),
        *(
            Metric(name, Dim.NUMBER, "", True, False, help_text)
            for name, help_text in (
                ("published", "messages published"),
                ("confirmed", "messages the broker confirmed"),
                ("consumed", "messages consumed"),
                ("nacked", "messages the broker nacked"),
                ("returned", "messages returned unroutable"),
                ("redelivered", "deliveries flagged redelivered"),
                ("duplicates", "deliveries of a message already consumed"),
                ("unconfirmed", "published, neither confirmed nor nacked at the end"),
                ("lost", "confirmed and never consumed"),
                ("errors", "errors the run reported"),
                ("phases", "phases the run had"),
            )
        ),
        Metric(
            "lost_ratio",
            Dim.NUMBER,
            "",
            True,
            False,
            "lost / confirmed (unknown with confirms off); e.g. lost_ratio < 0.01%",
        ),
        Metric("duration", Dim.TIME, "", True, True, "start to end (a phase: its length)"),
        Metric(
            "publish_time", Dim.TIME, "", True, False, "the workers' first send to their last send"
        ),
        Metric(
            "pending_confirms_mean",
            Dim.NUMBER,
            "",
            False,
            True,
            "phase: mean of the per-second pending confirms",
        ),
        Metric(
            "pending_confirms_max",
            Dim.NUMBER,
            "",
            False,
            True,
            "phase: most pending confirms in a second",
        ),
        Metric("unacked_mean", Dim.NUMBER, "", False, True, "phase: mean unacked deliveries"),
        Metric("unacked_max", Dim.NUMBER, "", False, True, "phase: most unacked deliveries"),
        Metric(
            "blocked_time",
            Dim.TIME,
            "",
            False,
            True,
            "phase: seconds with a connection blocked by the broker",
        ),
    ]
    for kind, kind_text in (
        (LatencyKind.END_TO_END, "end-to-end"),
        (LatencyKind.CONFIRM, "confirm"),
    ):
        for basis in SendBasis:
            prefix = _latency_prefix(kind, basis)
            for stat in LATENCY_STATS:
                rows.append(
                    Metric(
                        f"{prefix}_{stat}",
                        Dim.TIME,
                        "",
                        True,
                        True,
                        f"{kind_text} latency {stat}, from the {basis.value} send",
                    )
                )
    return {m.name: m for m in rows}


LATENCY_STATS = ("p50", "p75", "p95", "p99", "p999", "max")


def _latency_prefix(kind: LatencyKind, basis: SendBasis) -> str:
    return kind.value if basis is SendBasis.ACTUAL else f"{kind.value}_{basis.value}"


#: Every metric a threshold can name, in the order the docs list them.
METRICS: dict[str, Metric] = _metrics()

# -- the grammar ------------------------------------------------------------------------------
#
#   threshold  := [ "phase:" selector ] comparison
#   comparison := sum ( "<" | "<=" | ">" | ">=" | "==" | "!=" ) sum
#   sum        := product ( ("+" | "-") product )*
#   product    := unary ( ("*" | "/") unary )*
#   unary      := "-" unary | NUMBER [ "ms" | "s" | "us" | "%" ] | NAME | "(" sum ")"

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)[ \t]*(?P<unit>ms|us|µs|s|%)?(?![\w.])"
    r"|(?P<bad>[\d.][\w.]*)"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op><=|>=|==|!=|<|>|\+|-|\*|/|\(|\))"
    r")"
)
_TIME_UNITS = {"ms": 1.0, "s": 1000.0, "us": 0.001, "µs": 0.001}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9),
    "!=": lambda a, b: not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9),
}


@dataclass(frozen=True, slots=True)
class Number:
    value: float  # milliseconds for a time
    dim: Dim
    text: str


@dataclass(frozen=True, slots=True)
class Name:
    metric: Metric


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Expr


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str
    left: Expr
    right: Expr


Expr = Number | Name | Negate | BinOp


@dataclass(frozen=True, slots=True)
class Threshold:
    """One parsed threshold: ``text`` as written, the phase it reads (None: the run's
    summary; ``*``: every load phase; a label or an index), and its comparison."""

    text: str
    phase: str | None
    op: str
    left: Expr
    right: Expr

    @property
    def dim(self) -> Dim:
        return _dim(self.left) if _dim(self.left) is not Dim.FREE else _dim(self.right)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # number, name, op, end
    text: str
    position: int
    unit: str = ""


def _tokens(text: str, offset: int) -> list[Token]:
    out: list[Token] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            where = position + len(text[position:]) - len(text[position:].lstrip())
            raise _problem(f"unexpected {text[where]!r} at column {offset + where + 1}")
        if match.group("bad") is not None:
            raise _problem(
                f"{match.group('bad')!r} at column {offset + match.start('bad') + 1} is not a "
                "number with a unit (ms, s, us or %)"
            )
        for kind in ("number", "name", "op"):
            if match.group(kind) is not None:
                out.append(
                    Token(
                        kind,
                        match.group(kind),
                        offset + match.start(kind) + 1,
                        match.group("unit") or "" if kind == "number" else "",
                    )
                )
        position = match.end()
    out.append(Token("end", "", offset + len(text) + 1))
    return out


class _Problem(Exception):
    """A threshold that does not read; the message is one line without the threshold."""


def _problem(message: str) -> _Problem:
    return _Problem(message)


class _Parser:
    def __init__(self, tokens: list[Token], scope_phase: bool) -> None:
        self.tokens = tokens
        self.at = 0
        self.phase = scope_phase

    def peek(self) -> Token:
        return self.tokens[self.at]

    def take(self) -> Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def comparison(self) -> tuple[str, Expr, Expr]:
        left = self.sum()
        token = self.take()
        if token.kind != "op" or token.text not in _COMPARE:
            found = "the end" if token.kind == "end" else repr(token.text)
            raise _problem(
                f"expected a comparison (<, <=, >, >=, ==, !=) at column {token.position}, "
                f"found {found}"
            )
        right = self.sum()
        end = self.peek()
        if end.kind != "end":
            raise _problem(
                f"unexpected {end.text!r} at column {end.position}: one comparison per threshold"
            )
        return token.text, left, right

    def sum(self) -> Expr:
        expr = self.product()
        while self.peek().kind == "op" and self.peek().text in "+-":
            op = self.take().text
            expr = BinOp(op, expr, self.product())
        return expr

    def product(self) -> Expr:
        expr = self.unary()
        while self.peek().kind == "op" and self.peek().text in "*/":
            op = self.take().text
            expr = BinOp(op, expr, self.unary())
        return expr

    def unary(self) -> Expr:
        token = self.take()
        if token.kind == "op" and token.text == "-":
            return Negate(self.unary())
        if token.kind == "op" and token.text == "(":
            expr = self.sum()
            closing = self.take()
            if closing.text != ")":
                raise _problem(f"missing ')' at column {closing.position}")
            return expr
        if token.kind == "number":
            value = float(token.text)
            if token.unit in _TIME_UNITS:
                return Number(value * _TIME_UNITS[token.unit], Dim.TIME, token.text + token.unit)
            if token.unit == "%":
                return Number(value / 100.0, Dim.FREE, token.text + "%")
            return Number(value, Dim.FREE, token.text)
        if token.kind == "name":
            metric = METRICS.get(token.text)
            scope = "phase" if self.phase else "run"
            if metric is None or not (metric.phase if self.phase else metric.run):
                names = ", ".join(
                    n for n, m in METRICS.items() if (m.phase if self.phase else m.run)
                )
                hint = ""
                if metric is not None:
                    hint = " (run only: drop phase:)" if self.phase else " (per phase: add phase:*)"
                raise _problem(
                    f"unknown {scope} metric {token.text!r}{hint}; {scope} metrics: {names}"
                )
            return Name(metric)
        found = "the end" if token.kind == "end" else repr(token.text)
        raise _problem(f"expected a number or a metric at column {token.position}, found {found}")


def _dim(expr: Expr) -> Dim:
    """The dimension of ``expr``; _Problem for arithmetic that mixes what cannot mix."""
    if isinstance(expr, Number):
        return expr.dim
    if isinstance(expr, Name):
        return expr.metric.dim
    if isinstance(expr, Negate):
        return _dim(expr.operand)
    left, right = _dim(expr.left), _dim(expr.right)
    if expr.op in "+-":
        if Dim.FREE in (left, right):
            return right if left is Dim.FREE else left
        if left is not right:
            raise _problem(f"cannot {'add' if expr.op == '+' else 'subtract'} a time and a number")
        return left
    if expr.op == "*":
        if left is Dim.TIME and right is Dim.TIME:
            raise _problem("cannot multiply a time by a time")
        if Dim.TIME in (left, right):
            if Dim.NUMBER in (left, right):
                raise _problem("multiply a time only by a plain number (e.g. 2 * e2e_p50)")
            return Dim.TIME
        return Dim.NUMBER if Dim.NUMBER in (left, right) else Dim.FREE
    # division
    if right is Dim.TIME:
        if left is not Dim.TIME:
            raise _problem("cannot divide a number by a time")
        return Dim.NUMBER  # a ratio of two times
    if left is Dim.TIME:
        if right is Dim.NUMBER:
            raise _problem("divide a time only by a plain number or a time")
        return Dim.TIME
    return Dim.NUMBER if Dim.NUMBER in (left, right) else Dim.FREE


def _names(expr: Expr) -> list[Metric]:
    if isinstance(expr, Name):
        return [expr.metric]
    if isinstance(expr, Negate):
        return _names(expr.operand)
    if isinstance(expr, BinOp):
        return _names(expr.left) + _names(expr.right)
    return []


def _is_zero(expr: Expr) -> bool:
    return isinstance(expr, Number) and expr.value == 0


def _check(op: str, left: Expr, right: Expr) -> None:
    dims = (_dim(left), _dim(right))
    if not _names(left) and not _names(right):
        raise _problem("compares no metric; name one, e.g. e2e_p99 < 50ms")
    if Dim.TIME in dims and Dim.NUMBER in dims:
        raise _problem("compares a time with a number; compare times with times")
    if Dim.TIME in dims and Dim.FREE in dims:
        free = right if dims[1] is Dim.FREE else left
        if not _is_zero(free):
            timed = left if free is right else right
            what = _names(timed)[0].name if _names(timed) else "that side"
            raise _problem(
                f"{what} is a time: give the number a unit (ms, s or us), e.g. {what} {op} 50ms"
            )


def parse_threshold(text: str) -> Threshold:
    """A threshold from its text; SpecError (one line, naming the problem) if it does not
    read. See the module docstring for the grammar."""
    if not isinstance(text, str):
        raise SpecError("thresholds", f"a threshold must be text, got {text!r}")
    stripped = text.strip()
    if not stripped:
        raise SpecError("thresholds", "empty threshold; e.g. --threshold 'e2e_p99 < 50ms'")
    phase: str | None = None
    body, offset = stripped, 0
    try:
        if stripped.startswith("phase:"):
            phase, body, offset = _phase_selector(stripped)
        op, left, right = _Parser(_tokens(body, offset), phase is not None).comparison()
        _check(op, left, right)
    except _Problem as exc:
        raise SpecError("thresholds", f"threshold {stripped!r}: {exc}") from None
    return Threshold(stripped, phase, op, left, right)


def _phase_selector(text: str) -> tuple[str, str, int]:
    rest = text[len("phase:") :]
    if rest.startswith('"'):
        end = rest.find('"', 1)
        if end < 0:
            raise _problem("the phase label's closing quote is missing")
        label, after = rest[1:end], rest[end + 1 :]
    else:
        parts = rest.split(None, 1)
        label = parts[0] if parts else ""
        after = rest[len(label) :]
    if not label.strip():
        raise _problem("phase: needs a label, an index or *, e.g. phase:inflight=200 e2e_p99 < 5ms")
    if not after.strip():
        raise _problem(f"a comparison must follow phase:{label}, e.g. phase:{label} e2e_p99 < 5ms")
    if not after[:1].isspace():
        raise _problem("put a space between the phase and the comparison")
    offset = len(text) - len(after)
    return label, after, offset


def parse_thresholds(texts: Iterable[str]) -> tuple[Threshold, ...]:
    return tuple(parse_threshold(text) for text in texts)


# -- evaluation ---------------------------------------------------------------------------------

Values = Mapping[str, float | None]


class _Missing(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _value(expr: Expr, values: Values) -> float:
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Name):
        value = values.get(expr.metric.name)
        if value is None:
            raise _Missing(expr.metric.name)
        return float(value)
    if isinstance(expr, Negate):
        return -_value(expr.operand, values)
    left, right = _value(expr.left, values), _value(expr.right, values)
    if expr.op == "+":
        return left + right
    if expr.op == "-":
        return left - right
    if expr.op == "*":
        return left * right
    return left / right if right else math.inf if left > 0 else -math.inf if left < 0 else math.nan


@dataclass(frozen=True, slots=True)
class ThresholdResult:
    """One threshold checked over the run or one phase: both sides' values and the verdict.

    ``value`` is the left side and ``bound`` the right side, in ``unit`` (times in ms);
    None when a metric was not measured. ``scope`` is ``run`` or the phase read.
    """

    threshold: str
    scope: str
    passed: bool
    value: float | None
    bound: float | None
    unit: str
    reason: str

    @property
    def title(self) -> str:
        return self.threshold if self.scope == "run" else f"{self.threshold} [{self.scope}]"

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "scope": self.scope,
            "passed": self.passed,
            "value": _finite(self.value),
            "bound": _finite(self.bound),
            "unit": self.unit,
            "reason": self.reason,
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _unit(expr: Expr) -> str:
    if isinstance(expr, Number):
        return "ms" if expr.dim is Dim.TIME else ""
    if isinstance(expr, Name):
        return "ms" if expr.metric.dim is Dim.TIME else expr.metric.unit
    if isinstance(expr, Negate):
        return _unit(expr.operand)
    left, right = _unit(expr.left), _unit(expr.right)
    if expr.op == "/" and left and left == right:
        return ""
    return left or right


def format_value(value: float | None, unit: str) -> str:
    """A value as the summary shows it: times in ms or s, rates with msg/s."""
    if value is None:
        return "not measured"
    if not math.isfinite(value):
        return str(value)
    if unit == "ms":
        return f"{value / 1000:,.3g} s" if abs(value) >= 10_000 else f"{value:,.4g} ms"
    text = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"
    return f"{text} {unit}".rstrip()


def check(threshold: Threshold, values: Values, scope: str = "run") -> ThresholdResult:
    """One threshold over one set of values (the run's or a phase's)."""
    unit = _unit(threshold.left) or _unit(threshold.right)
    try:
        left = _value(threshold.left, values)
        right = _value(threshold.right, values)
    except _Missing as exc:
        return ThresholdResult(
            threshold.text,
            scope,
            False,
            None,
            None,
            unit,
            f"{exc.name} was not measured in {'this run' if scope == 'run' else scope}",
        )
    passed = not math.isnan(left) and not math.isnan(right) and _COMPARE[threshold.op](left, right)
    shown_left = format_value(left, unit)
    shown_right = format_value(right, unit)
    relation = threshold.op if passed else f"not {threshold.op}"
    return ThresholdResult(
        threshold.text,
        scope,
        passed,
        left,
        right,
        unit,
        f"{_side_text(threshold.left)} = {shown_left}, {relation} {shown_right}",
    )


def _side_text(expr: Expr) -> str:
    if isinstance(expr, Number):
        return expr.text
    if isinstance(expr, Name):
        return expr.metric.name
    if isinstance(expr, Negate):
        return f"-{_side_text(expr.operand)}"
    return f"({_side_text(expr.left)} {expr.op} {_side_text(expr.right)})"


def run_values(summary: RunSummary, target_rate: float) -> dict[str, float | None]:
    """The run-scope metrics of a summary; ``target_rate`` 0 = no rate limit (unknown)."""
    s = summary.safety
    values: dict[str, float | None] = {
        "target": target_rate or None,
        "publish_rate": summary.publish_rate,
        "confirm_rate": summary.confirm_rate,
        "consume_rate": summary.consume_rate,
        "published": s.published,
        "confirmed": s.confirmed,
        "consumed": s.consumed,
        "nacked": s.nacked,
        "returned": s.returned,
        "redelivered": s.redelivered,
        "duplicates": s.duplicates,
        "unconfirmed": s.unconfirmed,
        "lost": s.lost,
        "lost_ratio": (s.lost / s.confirmed) if s.confirms and s.confirmed else None,
        "errors": len(summary.errors),
        "phases": summary.phases,
        "duration": summary.duration * 1000.0,
        "publish_time": summary.active.publish_seconds * 1000.0,
    }
    values.update(_latency_values(summary.latency))
    return values


def phase_values(phase: PhaseFigures) -> dict[str, float | None]:
    """The phase-scope metrics of one row of the per-phase table."""
    figure = phase.client.get
    duration = phase.duration_s

    def ms(seconds: Any) -> float | None:
        return None if seconds is None else float(seconds) * 1000.0

    values: dict[str, float | None] = {
        "target": phase.target_rate,
        "publish_rate": phase.figure("publish_rate_mean"),
        "confirm_rate": phase.figure("confirm_rate_mean"),
        "consume_rate": phase.figure("consume_rate_mean"),
        "duration": ms(duration),
        "pending_confirms_mean": figure("pending_confirms_mean"),
        "pending_confirms_max": figure("pending_confirms_max"),
        "unacked_mean": figure("unacked_mean"),
        "unacked_max": figure("unacked_max"),
        "blocked_time": ms(figure("blocked_s") or 0),
    }
    for what in ("publish", "confirm", "consume"):
        for stat in ("min", "sd"):
            values[f"{what}_rate_{stat}"] = figure(f"{what}_rate_{stat}")
    latency = {}
    for kind in LatencyKind:
        for basis in SendBasis:
            found = phase.percentiles((kind.value, basis.value))
            if found is not None:
                latency[(kind, basis)] = found
    values.update(_latency_values(latency))
    return values


def _latency_values(
    latency: Mapping[tuple[LatencyKind, SendBasis], Percentiles],
) -> dict[str, float | None]:
    values: dict[str, float | None] = {}
    for kind in LatencyKind:
        for basis in SendBasis:
            p = latency.get((kind, basis))
            for stat in LATENCY_STATS:
                values[f"{_latency_prefix(kind, basis)}_{stat}"] = (
                    getattr(p, stat) if p is not None else None
                )
    return values


def _phase_scope(phase: PhaseFigures) -> str:
    return f"phase {phase.index} ({phase.label})"


def _matches(selector: str, phase: PhaseFigures) -> bool:
    if selector == "*":
        return not phase.is_drain
    if selector.isdigit():
        return phase.index == int(selector)
    return phase.label == selector


def evaluate_thresholds(
    thresholds: Sequence[Threshold],
    summary: RunSummary,
    phases: Sequence[PhaseFigures],
    *,
    target_rate: float,
) -> list[ThresholdResult]:
    """Every threshold over the run's summary or its phases: one result per threshold and
    phase read, in the order given."""
    run = run_values(summary, target_rate)
    results: list[ThresholdResult] = []
    for threshold in thresholds:
        if threshold.phase is None:
            results.append(check(threshold, run))
            continue
        chosen = [p for p in phases if _matches(threshold.phase, p)]
        if not chosen:
            known = ", ".join(f"{p.index}:{p.label}" for p in phases) or "none"
            results.append(
                ThresholdResult(
                    threshold.text,
                    f"phase {threshold.phase}",
                    False,
                    None,
                    None,
                    "",
                    f"the run had no phase {threshold.phase!r} (its phases: {known})",
                )
            )
            continue
        for phase in chosen:
            results.append(check(threshold, phase_values(phase), _phase_scope(phase)))
    return results


def write_junit(
    path: Path, results: Sequence[ThresholdResult], *, run_name: str, duration: float
) -> None:
    """A JUnit XML report: one test case per threshold result, failures named, so a CI
    system shows which criterion failed. FlowdeckError (one line) if it cannot be written."""
    import xml.etree.ElementTree as ET  # only a run with --junit needs it

    failures = sum(1 for r in results if not r.passed)
    suites = ET.Element(
        "testsuites",
        name="flowdeck",
        tests=str(len(results)),
        failures=str(failures),
        time=f"{duration:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"flowdeck thresholds: {run_name}",
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{duration:.3f}",
    )
    for result in results:
        case = ET.SubElement(
            suite, "testcase", classname=f"flowdeck.{run_name}", name=result.title, time="0"
        )
        if result.passed:
            ET.SubElement(case, "system-out").text = result.reason
        else:
            failure = ET.SubElement(
                case, "failure", type="threshold", message=f"{result.title}: {result.reason}"
            )
            failure.text = result.reason
    ET.indent(suites)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        raise FlowdeckError(
            f"cannot write the JUnit file {path}: {exc.strerror or exc}; choose another --junit"
        ) from None
