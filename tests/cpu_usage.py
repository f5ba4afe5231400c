"""What each test costs in CPU, beside --durations' wall time: on two cores the suite is
bound by CPU (three test processes were as fast as four), so a test's wall time says
little of what it takes from the others, and its CPU seconds do.

Each phase (setup, call, teardown) records the CPU seconds of the test process and of the
child processes it waited for (``flowdeck`` runs in a subprocess, Spark's JVM, pip) as a
``cpu_s`` user property: it reaches the JUnit XML as a property and, under pytest-xdist,
the main process, which names the heaviest tests at the end (``--cpu-top N``, 0 for none).
A private node is a child process too: its CPU counts where it is reaped, in the test
(or teardown) that stops it, so a module's shared node or cluster lands on its last test.
The shared broker serves every test process at once and is in none of these figures.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from typing import Any

import pytest

#: test id: its CPU seconds, in the process that reports (the main one under xdist)
_SPENT: dict[str, float] = {}


def _cpu_seconds() -> float:
    spent = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        spent += usage.ru_utime + usage.ru_stime
    return spent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-top",
        type=int,
        default=0,
        metavar="N",
        help="name the N tests that took the most CPU seconds (their own and their children's)",
    )


def _measured(item: pytest.Item) -> Iterator[None]:
    began = _cpu_seconds()
    yield
    item.user_properties.append(("cpu_s", round(_cpu_seconds() - began, 3)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    yield from _measured(item)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each phase's report carries the properties recorded so far: the last one (teardown)
    holds all three."""
    if report.when != "teardown":
        return
    _SPENT[report.nodeid] = sum(
        float(value) for name, value in report.user_properties if name == "cpu_s"
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    top = config.getoption("--cpu-top")
    if not top or not _SPENT:
        return
    total = sum(_SPENT.values())
    terminalreporter.write_sep(
        "=", f"{top} tests that took the most CPU (of {total:,.0f} s in {len(_SPENT)} tests)"
    )
    for nodeid, seconds in sorted(_SPENT.items(), key=lambda kv: -kv[1])[:top]:
        terminalreporter.write_line(f"{seconds:7.1f}s cpu  {nodeid}")
