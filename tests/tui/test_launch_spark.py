"""The launch form's Spark master field: what it accepts, what it refuses (next to the
field, in the form's words), and that the master typed reaches the run's controller as
`flowdeck run --spark-master` passes it. No Spark starts: the run is prepared, not run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, Static

from flowdeck.engine.spark_workers import SparkPlacement
from flowdeck.engine.spec import RunSpec
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens.launch import LaunchScreen, field_id
from tests.tui.fakes import launch_spec, type_into


def spec(uri: str, queue_prefix: str) -> RunSpec:
    return launch_spec(uri, queue_prefix, "tui-spark")


def error_of(screen: LaunchScreen) -> str:
    return str(screen.query_one("#error-spark_master", Static).render())


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(60)
async def test_the_spark_master_typed_reaches_the_run(
    shared_uri: str, unique_name: str, tmp_path: Path, prepared: list[Any]
) -> None:
    app = FlowdeckApp(spec=spec(shared_uri, unique_name), sessions_root=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        assert screen.spark_master is None  # empty: local worker processes

        await type_into(pilot, "spark-master", "yarn")
        assert error_of(screen) == (
            "✗ spark master must be spark://HOST:PORT or local[N], got 'yarn'"
        )
        await type_into(pilot, "spark-master", "local[2]")
        await type_into(pilot, field_id("workers"), "3")
        assert error_of(screen) == (
            "✗ local[2] runs 2 task(s) at once and workers 3 needs 3: use local[3]"
        )
        await pilot.press("ctrl+r")  # refused: nothing is prepared
        await type_into(pilot, field_id("workers"), "-1")
        await type_into(pilot, "spark-master", "spark://10.0.0.5:7077")
        assert error_of(screen) == (
            "✗ spark master spark://10.0.0.5:7077 needs workers N (how many load workers)"
        )

        await type_into(pilot, field_id("workers"), "2")
        await type_into(pilot, "spark-master", " local[2] ")
        assert error_of(screen) == ""
        assert screen.spark_master == "local[2]"
        await pilot.press("ctrl+r")
        deadline = time.monotonic() + 30
        while not prepared and time.monotonic() < deadline:
            await pilot.pause(0.05)
    assert len(prepared) == 1
    control = prepared[0]
    placement = control._placement
    assert isinstance(placement, SparkPlacement)
    assert (placement.master, placement.workers, control.workers) == ("local[2]", 2, 2)
    assert control.spec.workers == 2


@pytest.mark.slow
async def test_loading_a_preset_keeps_the_broker_in_the_form(shared_uri: str) -> None:
    """`flowdeck cockpit --uri …` then Enter on another preset: the preset says what load to
    run, not where, so the broker fields stay (they used to empty, and the next launch went
    to a private node)."""
    from textual.widgets import OptionList

    from flowdeck.collectors import redact

    app = FlowdeckApp(spec=spec(shared_uri, "keep-broker"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        await type_into(pilot, field_id("prometheus_url"), "http://127.0.0.1:9090")
        presets = screen.query_one("#preset-list", OptionList)
        chosen = next(i for i in range(presets.option_count)
                      if presets.get_option_at_index(i).id == "bench2-sweep")  # fmt: skip
        presets.highlighted = chosen
        presets.focus()
        await pilot.press("enter")
        await pilot.pause()
        form = {
            name: screen.query_one(f"#{field_id(name)}", Input).value
            for name in ("name", "uri", "management_url", "prometheus_url")
        }
        assert form == {
            "name": "bench2-sweep",
            "uri": redact(shared_uri),  # shown with its password masked
            "management_url": "",
            "prometheus_url": "http://127.0.0.1:9090",
        }
        assert screen.values()["uri"] == shared_uri  # and launched with it


def test_the_cockpit_takes_flowdeck_uri_as_run_and_the_demo_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """FLOWDECK_URI fills the form's uri (a given --uri or a spec file's own uri wins), so
    the launch shows where the run goes instead of quietly starting a private node."""
    from flowdeck.cli import build_parser
    from flowdeck.cli.cockpit import initial_spec

    monkeypatch.setenv("FLOWDECK_URI", "amqp://guest:guest@127.0.0.1:5672/%2F")
    given = build_parser().parse_args(["cockpit", "--uri", "amqp://other:5672/%2F"])
    assert initial_spec(build_parser().parse_args(["cockpit"])).uri == (
        "amqp://guest:guest@127.0.0.1:5672/%2F"
    )
    assert initial_spec(given).uri == "amqp://other:5672/%2F"
    own = tmp_path / "own.toml"
    own.write_text('uri = "amqp://own:5672/%2F"\n', encoding="utf-8")
    assert initial_spec(build_parser().parse_args(["cockpit", "--spec", str(own)])).uri == (
        "amqp://own:5672/%2F"
    )
    monkeypatch.delenv("FLOWDECK_URI")
    assert initial_spec(build_parser().parse_args(["cockpit"])).uri == ""


@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(300)
# Its Spark tasks run on this process's SparkContext (local[2]): on the process of the
# suite's one Spark session, never beside a second JVM of its own (tests/conftest.py). On
# another test process its two tasks once never connected within 150 s.
@pytest.mark.xdist_group("spark")
async def test_a_spark_run_launched_from_the_cockpit_shows_both_workers_live(
    shared_uri: str, unique_name: str, tmp_path: Path
) -> None:
    """local[2] and 2 workers typed in the form, Ctrl+R: the two Spark tasks connect back,
    and the live hosts tab shows each with its host, its publish and consume msg/s and its
    process's CPU while the run goes; no local worker process is booted or taken; the
    summary shows the placement's per-host table."""
    from flowdeck.tui.screens.live import LiveScreen
    from flowdeck.tui.screens.summary import SummaryScreen
    from flowdeck.tui.widgets.host_table import HostPanel

    run = RunSpec(
        name="tui-spark-hosts",
        uri=shared_uri,
        queues=2,
        queue_pattern=f"{unique_name}-%d",
        durable=False,
        publishers=2,
        rate=100.0,
        consumers=2,
        duration=120,
        workers=2,
    )
    app = FlowdeckApp(spec=run, sessions_root=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        launch = app.screen
        assert isinstance(launch, LaunchScreen)
        await type_into(pilot, "spark-master", "local[2]")
        assert error_of(launch) == ""
        await pilot.press("ctrl+r")
        deadline = time.monotonic() + 150
        while not isinstance(app.screen, LiveScreen) and time.monotonic() < deadline:
            await pilot.pause(0.2)
        live = app.screen
        assert isinstance(live, LiveScreen)

        def both_live() -> bool:
            rows = live.history.hosts.rows()
            return (
                len(rows) == 2
                and all(r.publish_rate > 0 and r.consume_rate > 0 for r in rows)
                and all(r.cpu_percent is not None and r.pid for r in rows)
            )

        while not both_live() and time.monotonic() < deadline:
            await pilot.pause(0.5)
        await pilot.press("h")
        await pilot.pause(1.5)  # the next tick redraws the tab
        panel = live.query_one(HostPanel)
        rows = panel.rows
        assert len(rows) == 2, rows
        assert [row.worker for row in rows] == [0, 1]
        for row in rows:
            assert row.host and row.pid and not row.lost
            assert (row.publishers, row.consumers) == (1, 1)
            assert row.publish_rate > 0 and row.consume_rate > 0
            assert row.cpu_percent is not None and row.cpu_percent > 0
        # The rows' rates are each worker's share: together near the run's 2 x 100 msg/s.
        assert 0.5 < sum(row.publish_rate for row in rows) / 200 < 1.5
        assert app.worker_pool.idle == 0
        assert app.worker_pool.taken == 0

        live.stop_control()
        deadline = time.monotonic() + 90
        while not isinstance(app.screen, SummaryScreen) and time.monotonic() < deadline:
            await pilot.pause(0.5)
        summary = app.screen
        assert isinstance(summary, SummaryScreen)
        assert [row.worker for row in summary.hosts] == [0, 1]
        assert sum(row.published for row in summary.hosts) == summary.summary.safety.published
        assert all(row.cpu_percent is not None for row in summary.hosts)
