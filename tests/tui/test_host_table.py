"""The per-host rows in the cockpit: the live screen's hosts tab (each worker's host,
clients, msg/s and CPU now, a lost worker as lost and when), the summary's per-host table,
and the launch form's Spark listen address and TLS fields with `flowdeck run`'s checks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static, TabbedContent

from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.spark_workers import HostRow, SparkPlacement
from flowdeck.engine.spec import RunSpec
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens.launch import LaunchScreen, field_id
from flowdeck.tui.screens.live import LiveScreen
from flowdeck.tui.screens.summary import SummaryScreen, summary_renderable
from flowdeck.tui.widgets.host_table import HostPanel
from tests.engine.test_tls import make_certificates
from tests.tui.fakes import T0, WORKER_CPU, WORKER_RATE, FakeControl, make_summary, type_into
from tests.tui.test_live_pilot import rich_text


async def live(pilot: Any, fake: FakeControl, seconds: int) -> LiveScreen:
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, LiveScreen)
    screen.history.clock = T0 + seconds
    fake.emit_tick(seconds)
    await pilot.pause()
    await pilot.pause()
    return screen


def by_worker(rows: tuple[HostRow, ...]) -> dict[int, HostRow]:
    return {row.worker: row for row in rows}


@pytest.mark.slow
async def test_hosts_tab_shows_each_worker_now_and_a_lost_one_as_lost() -> None:
    fake = FakeControl(workers=2, snapshots=True)
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        fake.connect(0, "spark-a", 4101)
        fake.connect(1, "spark-b", 4202)
        screen = await live(pilot, fake, 6)
        await pilot.press("h")
        await pilot.pause()
        assert screen.query_one(TabbedContent).active == "hosts"
        panel = screen.query_one(HostPanel)
        rows = by_worker(panel.rows)
        assert [(r.host, r.pid) for r in rows.values()] == [("spark-a", 4101), ("spark-b", 4202)]
        # The fake's 4 publishers and 4 consumers, shared by the two workers.
        assert [(r.publishers, r.consumers) for r in rows.values()] == [(2, 2), (2, 2)]
        for worker, row in rows.items():
            assert row.publish_rate == pytest.approx((worker + 1) * WORKER_RATE)
            assert row.consume_rate == pytest.approx((worker + 1) * WORKER_RATE)
            assert row.cpu_percent == pytest.approx(100 * (worker + 1) * WORKER_CPU)
            assert row.published == 6 * (worker + 1) * WORKER_RATE
            assert not row.lost
        shown = rich_text(panel.shown, width=panel.size.width)
        assert "spark-a" in shown and "spark-b" in shown
        assert "20%" in shown and "40%" in shown

        fake.lose(1, "spark-b", 4202)  # at run time 0:06
        fake.emit_tick(3)
        screen.redraw()
        await pilot.pause()
        rows = by_worker(panel.rows)
        assert rows[1].lost and rows[1].lost_at == T0 + 6
        assert rows[1].published == 6 * 2 * WORKER_RATE  # its last snapshot's count
        assert rows[0].publish_rate == pytest.approx(WORKER_RATE) and not rows[0].lost
        shown = rich_text(panel.shown, width=panel.size.width)
        assert "LOST 0:06" in shown

        await fake.stop()
        for _ in range(20):
            await pilot.pause(0.05)
            if isinstance(app.screen, SummaryScreen):
                break
        summary = app.screen
        assert isinstance(summary, SummaryScreen)
        # Over the run: each worker's first to last snapshot.
        hosts = by_worker(summary.hosts)
        assert hosts[0].publish_rate == pytest.approx(WORKER_RATE)
        assert hosts[1].lost and hosts[1].published == 12 * WORKER_RATE
        text = rich_text(summary_renderable(summary.summary, summary.hosts), width=150)
        assert "per host: 2 workers on 2 hosts" in text
        assert "spark-a" in text and "LOST 0:06" in text


async def test_one_local_worker_has_no_hosts_tab() -> None:
    fake = FakeControl(workers=1, snapshots=True)
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await live(pilot, fake, 3)
        tabs = screen.query_one(TabbedContent)
        assert tabs.get_tab("hosts").display is False
        await pilot.press("h")
        await pilot.pause()
        assert tabs.active == "events"
        assert not screen.history.hosts.shown


async def test_local_worker_processes_are_rows_on_this_host() -> None:
    import socket

    fake = FakeControl(workers=2, snapshots=True)
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await live(pilot, fake, 4)
        assert screen.query_one(TabbedContent).get_tab("hosts").display is True
        await pilot.press("h")
        await pilot.pause()
        rows = screen.query_one(HostPanel).rows
        assert [row.host for row in rows] == [socket.gethostname()] * 2
        assert [row.pid for row in rows] == [0, 0]  # not said: shown as -


def test_the_summary_takes_the_placements_per_host_figures() -> None:
    """At a Spark run's end the placement says each host's figures over the run (its event's
    ``hosts``, as `flowdeck run` prints them): the summary shows those, not the live ones."""
    from flowdeck.tui.model import RunHistory

    history = RunHistory()
    rows = [
        HostRow(0, "spark-a", 11, 2, 2, 5000, 4990, 1000.0, 998.0, 1.2, 10.0, False),
        HostRow(1, "spark-b", 12, 2, 2, 3000, 2990, 600.0, 598.0, None, None, True),
    ]
    history.add_event(
        RunEvent(
            T0 + 4,
            EventKind.ERROR,
            "worker 1 on spark-b (pid 12) lost",
            detail={"worker_lost": 1, "host": "spark-b", "pid": 12},
        )
    )
    history.add_event(
        RunEvent(
            T0 + 10,
            EventKind.INFO,
            "per-host figures",
            detail={"hosts": [row.to_json() for row in rows]},
        )
    )
    final = history.hosts.run_rows()
    assert [(r.host, r.published, r.publish_rate, r.lost) for r in final] == [
        ("spark-a", 5000, 1000.0, False),
        ("spark-b", 3000, 600.0, True),
    ]
    assert final[0].cpu_percent == pytest.approx(12.0)
    assert final[1].lost_at == T0 + 4
    text = rich_text(summary_renderable(make_summary("", "/tmp/s"), final), width=150)
    assert "12%" in text and "LOST" in text
    # One worker: no table.
    alone = rich_text(summary_renderable(make_summary("", "/tmp/s"), final[:1]), width=150)
    assert "per host" not in alone


# -- the launch form's listen address and TLS -------------------------------------------------


def spec() -> RunSpec:
    return RunSpec(name="tui-spark-listen", uri="amqp://guest:guest@127.0.0.1:5672/%2F",
                   publishers=1, consumers=1, duration=5, workers=2)  # fmt: skip


def errors(screen: LaunchScreen) -> dict[str, str]:
    return {
        name: str(screen.query_one(f"#error-{name}", Static).render())
        for name in ("spark_master", "spark_listen", "spark_cert_file")
    }


@pytest.mark.slow
async def test_the_listen_address_and_tls_are_checked_as_run_checks_them(
    tmp_path: Path, prepared: list[Any]
) -> None:
    certs = make_certificates(tmp_path)
    app = FlowdeckApp(spec=spec(), sessions_root=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        await type_into(pilot, "spark-listen", "10.0.0.5:0")
        assert errors(screen)["spark_master"] == (
            "✗ spark listen and spark cert file need spark master"
        )
        await type_into(pilot, "spark-master", "local[2]")
        assert errors(screen) == {
            "spark_master": "",
            "spark_listen": "✗ spark listen 10.0.0.5:0 is beyond this machine and the run's "
            "token would cross the network in clear: give spark cert file and spark key file",
            "spark_cert_file": "",
        }
        await type_into(pilot, "spark-listen", "somewhere")
        assert errors(screen)["spark_listen"] == (
            "✗ spark listen must be HOST:PORT (e.g. 10.0.0.5:0), got 'somewhere'"
        )
        await type_into(pilot, "spark-listen", "127.0.0.1:0")
        await type_into(pilot, "spark-key-file", str(certs.server_key))
        assert errors(screen)["spark_cert_file"] == "✗ spark key file needs spark cert file"
        await type_into(pilot, "spark-cert-file", str(tmp_path / "none.pem"))
        assert errors(screen)["spark_cert_file"] == (
            f"✗ worker link certificate {tmp_path / 'none.pem'} does not exist; check spark "
            "cert file"
        )
        await type_into(pilot, "spark-cert-file", str(certs.server_cert))
        await type_into(pilot, "spark-listen", "127.0.0.1:0")
        assert errors(screen) == dict.fromkeys(
            ("spark_master", "spark_listen", "spark_cert_file"), ""
        )
        await type_into(pilot, field_id("workers"), "3")
        assert errors(screen)["spark_master"] == (
            "✗ local[2] runs 2 task(s) at once and workers 3 needs 3: use local[3]"
        )
        await type_into(pilot, field_id("workers"), "2")
        await pilot.press("ctrl+r")
        deadline = time.monotonic() + 30
        while not prepared and time.monotonic() < deadline:
            await pilot.pause(0.05)
    assert len(prepared) == 1
    placement = prepared[0]._placement
    assert isinstance(placement, SparkPlacement)
    assert (placement.master, placement.workers, str(placement.listen)) == (
        "local[2]",
        2,
        "127.0.0.1:0",
    )
    assert placement._server_tls is not None  # the link serves TLS with the cert typed
    assert placement._server_cert == certs.server_cert.read_text()


@pytest.mark.slow
async def test_no_local_worker_is_booted_for_a_run_that_goes_to_spark() -> None:
    app = FlowdeckApp(spec=spec())
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        pool = app.worker_pool
        deadline = time.monotonic() + 30
        while pool.idle < 2 and time.monotonic() < deadline:  # the form's 2 workers, booted
            await pilot.pause(0.05)
        assert pool.idle == 2
        await type_into(pilot, "spark-master", "local[2]")
        deadline = time.monotonic() + 10
        while pool.idle and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert pool.idle == 0  # ended: Spark tasks will run the load
        screen.on_screen_resume()  # back from a run: still none for a Spark run
        await pilot.pause(0.5)
        assert pool.idle == 0
        await type_into(pilot, "spark-master", "")
        deadline = time.monotonic() + 30
        while pool.idle < 2 and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert pool.idle == 2  # local workers again


# -- how the tab looks ------------------------------------------------------------------------


def hosts_app() -> tuple[FlowdeckApp, FakeControl]:
    fake = FakeControl(workers=3, snapshots=True)
    return FlowdeckApp(control=fake), fake


async def hosts_shown(pilot: Any, fake: FakeControl, *keys: str) -> None:
    await pilot.pause()
    fake.connect(0, "spark-worker-a.example", 4101)
    fake.connect(1, "spark-worker-b.example", 4202)
    fake.connect(2, "spark-worker-c.example", 4303)
    screen = await live(pilot, fake, 8)
    fake.lose(2, "spark-worker-c.example", 4303)
    fake.emit_tick(4)
    screen.history.clock = T0 + 12
    await pilot.pause()
    for key in keys:
        await pilot.press(key)
    # A key can wait a timer tick behind the one before it (the app's typed-ahead keys):
    # wait for the tab itself rather than a fixed number of pauses.
    tabs = pilot.app.screen.query_one(TabbedContent)
    for _ in range(200):
        if tabs.active == "hosts":
            break
        await pilot.pause(0.02)
    await pilot.pause()


def test_hosts_tab_160x48(snap_compare: Any) -> None:
    app, fake = hosts_app()

    async def run_before(pilot: Any) -> None:
        await hosts_shown(pilot, fake, "h")

    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)


@pytest.mark.slow
def test_hosts_tab_80x24(snap_compare: Any) -> None:
    app, fake = hosts_app()

    async def run_before(pilot: Any) -> None:
        await hosts_shown(pilot, fake, "v", "h")

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
