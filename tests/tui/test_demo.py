"""Demo mode: the tour's steps as data, and the demo screen played by a presenter's keys
on a fake run, at 80x24 and 160x48 (plus a snapshot of the small screen)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flowdeck.engine.change import Change, Setting
from flowdeck.engine.spec import settings_of
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.launcher import PreparedRun
from flowdeck.tui.screens.demo import (
    BigFigures,
    DemoScreen,
    TourIntroScreen,
    big_value,
)
from flowdeck.tui.tour import P99, Tour, bench2_tour, changes_to, in_flight_limit
from flowdeck.tui.widgets.figure_strip import Figure
from tests.tui.fakes import T0, FakeControl, make_sample
from tests.tui.test_live_pilot import rich_text


@pytest.fixture
def tour() -> Tour:
    return bench2_tour()


def text_of(widget: Any) -> str:
    """What a Static shows, as plain text (tables and Text alike)."""
    return rich_text(widget.content, width=160)


def header_text(screen: DemoScreen) -> str:
    return text_of(screen.query_one("#tour-header"))


# -- the tour as data --------------------------------------------------------------------


def test_tour_follows_the_seeds_benchmark_2_percentages(tour: Tour) -> None:
    rate = tour.spec.rate
    assert rate == 2000
    limits = [step.changes[0].value for step in tour.steps]
    acks = [step.changes[1].value for step in tour.steps]
    # no limit, 1 %, 100 %, 200 %, 200 % with multiple-flag acks, the 5 % rule of thumb
    assert limits == [0, 20, 2000, 4000, 4000, 100]
    assert acks == [1, 1, 1, 1, 200, 200]
    assert all(step.caption and step.look_at and step.watch for step in tour.steps)
    # the run starts in the first step's settings; nothing else of the preset's schedule
    assert (tour.spec.inflight, tour.spec.ack_every, tour.spec.schedule) == (0, 1, ())
    assert tour.spec.publishers == 4 and tour.spec.queues == 2


def test_in_flight_limit_is_a_percentage_of_the_target_rate() -> None:
    assert in_flight_limit(2000, 1) == 20
    assert in_flight_limit(30, 6) == 2
    assert in_flight_limit(10, 1) == 1  # never 0: 0 means no limit


def test_changes_to_sends_only_what_differs(tour: Tour) -> None:
    start = settings_of(tour.spec)
    assert changes_to(tour.steps[0], start) == ()
    assert changes_to(tour.steps[1], start) == (Change(Setting.INFLIGHT, 20),)
    at_multiple = settings_of(tour.spec.with_change(Change(Setting.ACK_EVERY, 200)))
    assert changes_to(tour.steps[0], at_multiple) == (Change(Setting.ACK_EVERY, 1),)


def test_a_bad_scale_is_refused_in_one_line() -> None:
    from flowdeck.engine import SpecError

    with pytest.raises(SpecError, match="scale must be in"):
        bench2_tour(scale=0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("4012/s", ("4012", "msg/s")),
        ("48.6 ms", ("48.6", "ms")),
        ("2.4k ms", ("2.4", "s")),
        ("36.3k ↑", ("36.3k↑", "")),
        ("–", ("-", "")),
    ],
)
def test_big_digits_carry_the_number_and_the_label_its_unit(
    value: str, expected: tuple[str, str]
) -> None:
    assert big_value(Figure("x", "x", value, 1.0)) == expected


# -- the demo screen on a fake run ---------------------------------------------------------


async def open_demo(
    pilot: Any, fake: FakeControl, tour: Tour, seconds: int = 3, *, early_key: str = ""
) -> DemoScreen:
    """Push the demo screen on the fake run and play ``seconds`` of it; ``early_key`` is
    pressed before the run's first figures are in."""
    app = pilot.app
    await pilot.pause()
    screen = DemoScreen(fake, tour)
    app.push_screen(screen)
    await pilot.pause()
    if early_key:
        await pilot.press(early_key)
        await pilot.pause()
    screen.history.clock = T0 + seconds
    fake.emit_tick(seconds)
    fake.emit(make_sample(T0 + seconds - 1, queues=2))
    await pilot.pause()
    return screen


def check_small_layout(screen: DemoScreen, tour: Tour) -> None:
    """80x24: figures, caption and the throughput chart fit; no room for latency."""
    for selector in ("#tour-header", "#big-figures", "#caption", "#throughput"):
        widget = screen.query_one(selector)
        assert widget.display and widget.region.height > 0, selector
        assert widget.region.right <= 80 and widget.region.bottom <= 23, selector
    assert screen.query_one("#throughput").region.height >= 7
    assert not screen.query_one("#latency").display
    # the step's figures are marked ▶, readable without colour
    labels = [text_of(label) for label in screen.query_one(BigFigures).query("Label")]
    assert sum("▶" in label for label in labels) == len(tour.steps[0].watch)


def check_large_layout(screen: DemoScreen) -> None:
    """160x48: the latency chart too, and the figures' long names."""
    assert screen.query_one("#latency").display
    assert screen.query_one("#latency").region.height >= 7
    p99 = screen.query_one(f"#big-{P99.replace(' ', '-')}")
    assert "▶ e2e p99" in text_of(p99.query_one("Label"))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_presenter_keys_walk_the_tour_and_steer_the_run(
    size: tuple[int, int], tour: Tour
) -> None:
    fake = FakeControl(spec=tour.spec)
    app = FlowdeckApp(spec=tour.spec)
    async with app.run_test(size=size) as pilot:
        # a key before the first figures waits for the run: changes need a running run
        screen = await open_demo(pilot, fake, tour, early_key="space")
        assert fake.requests == [] and screen.index == 0
        assert "STEP 1/6" in header_text(screen) and "No back pressure" in header_text(screen)
        assert "8,000 msg/s" in text_of(screen.query_one("#caption"))
        if size == (80, 24):
            check_small_layout(screen, tour)
        else:
            check_large_layout(screen)

        await pilot.press("space")
        await pilot.pause()
        assert fake.requests == [Change(Setting.INFLIGHT, 20)]
        assert "STEP 2/6" in header_text(screen)
        assert "at most 20 messages unconfirmed" in text_of(screen.query_one("#caption"))

        for key in ("n", "right", "pagedown"):  # a clicker sends → or PageDown
            await pilot.press(key)
        await pilot.pause()
        assert fake.requests[1:] == [
            Change(Setting.INFLIGHT, 2000),
            Change(Setting.INFLIGHT, 4000),
            Change(Setting.ACK_EVERY, 200),
        ]
        assert screen.index == 4

        await pilot.press("p")  # back: the earlier step's settings, not a repeat of all
        await pilot.pause()
        assert fake.requests[-1] == Change(Setting.ACK_EVERY, 1)
        assert screen.index == 3

        await pilot.press("space", "space", "space")  # the third goes past the last step
        await pilot.pause()
        assert screen.index == 5
        assert fake.requests[-2:] == [
            Change(Setting.ACK_EVERY, 200),
            Change(Setting.INFLIGHT, 100),
        ]
        assert len(fake.requests) == 7
        assert "STEP 6/6" in header_text(screen)


async def test_intro_starts_the_tour_once_the_broker_is_up(
    tour: Tour, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Space pressed while the node boots is remembered; the run starts when it is up."""
    fake = FakeControl(spec=tour.spec)
    boot = threading.Event()

    def prepare_run(spec: Any, *args: Any, **kwargs: Any) -> PreparedRun:
        assert kwargs["cleanup"] is True  # a tour leaves no backlog on a shared broker
        boot.wait(10)
        return PreparedRun(fake, None)

    monkeypatch.setattr("flowdeck.tui.launcher.prepare_run", prepare_run)
    app = FlowdeckApp(spec=tour.spec)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.push_screen(TourIntroScreen(tour))
        await pilot.pause()
        intro = app.screen
        assert isinstance(intro, TourIntroScreen)
        assert "starting a private RabbitMQ node" in text_of(intro.query_one("#status"))
        await pilot.press("space")
        await pilot.pause()
        assert "the tour starts once it is up" in text_of(intro.query_one("#status"))
        boot.set()
        for _ in range(50):
            await pilot.pause(0.05)
            if isinstance(app.screen, DemoScreen):
                break
        assert isinstance(app.screen, DemoScreen)
        await pilot.pause()
        assert fake.started


# -- snapshot ----------------------------------------------------------------------------------


def test_demo_80x24_second_step(snap_compare: Any, tour: Tour) -> None:
    fake = FakeControl(spec=tour.spec)
    app = FlowdeckApp(spec=tour.spec)

    async def run_before(pilot: Any) -> None:
        screen = await open_demo(pilot, fake, tour, seconds=20)
        await pilot.press("space")
        fake.apply_pending()
        for second in range(21, 41):
            screen.history.clock = T0 + second
            fake.emit_tick()
            if second % 5 == 0:
                fake.emit(make_sample(T0 + second - 1, queues=2))
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


async def test_broker_samples_reach_the_demo_screen_without_a_node_strip(tour: Tour) -> None:
    """The tour's screen is a live screen with its own layout: a broker sample must update
    what it shows, not stop the app looking for a live screen's widget it does not have."""
    fake = FakeControl(spec=tour.spec)
    app = FlowdeckApp(spec=tour.spec)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_demo(pilot, fake, tour)
        for second in (4, 5):
            fake.emit(make_sample(T0 + second, queues=2))
            await pilot.pause()
        assert app.is_running and app.screen is screen
        assert [sample.taken_at for sample in screen.history.broker.values()] == [T0 + 5]
