"""Consumers that behave like applications, against the real broker: work time per message
(steered live), rejections with and without requeue, poison messages and dead-lettering.

Rates are taken between the worker's own snapshots (their ``at`` times) and compared as
ratios within one run: the work time sets them, not the machine.
"""

from __future__ import annotations

import pytest

from flowdeck.engine.change import Change, Setting, parse_change
from flowdeck.engine.errors import SpecError
from flowdeck.engine.snapshot import ClientSnapshot
from tests.engine.test_worker import Run, base_spec, run_spec

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


def consume_rate(snapshots: list[ClientSnapshot]) -> float:
    """Consumed msg/s between the first and last of ``snapshots`` (the worker's clock)."""
    first, last = snapshots[0], snapshots[-1]
    return (last.counters.consumed - first.counters.consumed) / (last.at - first.at)


def test_work_is_a_live_setting_in_milliseconds() -> None:
    assert parse_change("work=5ms") == Change(Setting.WORK, 5)
    assert parse_change("work=0.25s") == Change(Setting.WORK, 250)
    assert parse_change("work_time=+500us") == Change(Setting.WORK, 0.5, relative=True)
    assert parse_change("nack=10%") == Change(Setting.REJECT, 10)
    with pytest.raises(SpecError, match=r"work needs a number, or one with a unit \(ms, s, us"):
        parse_change("work=5 parsecs")


async def test_work_time_sets_the_consume_rate_and_prefetch_one_waits_for_each_ack(
    shared_uri: str, unique_name: str
) -> None:
    # 4 consumers working 5 ms a message take 4 / 5 ms = 800 msg/s while the queue never
    # empties (published at 1,000/s); prefetch 1 adds a round trip to the broker per
    # message; work 10 ms halves the rate.
    consumers, work_ms = 4, 5.0
    spec = base_spec(
        unique_name,
        shared_uri,
        publishers=1,
        consumers=consumers,
        rate=1000.0,
        prefetch=50,
        work=work_ms,
        confirms=False,
    )
    phases: dict[str, list[ClientSnapshot]] = {}

    async def phase(run: Run, name: str) -> None:
        await run.seconds(2)  # settle after the change
        start = len(run.snapshots)
        await run.seconds(5)
        phases[name] = run.snapshots[start - 1 :]

    async def script(run: Run) -> None:
        await phase(run, "prefetch 50")
        await run.change(Change(Setting.PREFETCH, 1))
        await phase(run, "prefetch 1")
        await run.change(Change(Setting.PREFETCH, 50))
        await run.change(parse_change("work=10ms"))
        await phase(run, "work 10 ms")

    _run, report, _ = await run_spec(spec, shared_uri, script, drain=1.0)
    rates = {name: consume_rate(snapshots) for name, snapshots in phases.items()}
    print("consume rates (msg/s):", {k: round(v, 1) for k, v in rates.items()})
    predicted = consumers * 1000 / work_ms
    assert rates["prefetch 50"] == pytest.approx(predicted, rel=0.05), rates
    assert rates["work 10 ms"] == pytest.approx(predicted / 2, rel=0.05), rates
    # Prefetch 1: each message waits for the ack of the one before to reach the broker.
    assert rates["prefetch 1"] < rates["prefetch 50"] * 0.97, rates
    assert all(s.settings.value("work") == 10.0 for s in phases["work 10 ms"][1:])
    assert report.counters.duplicates == 0
    assert report.counters.rejected == 0
