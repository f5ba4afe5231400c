"""Demo mode: the tour's steps as data, the capacity probe's choice of load and the
captions' checks as pure functions of figures, and the demo screen played by a presenter's
keys (or followed by a watcher) on a fake run, at 80x24 and 160x48 (plus a snapshot of the
small screen)."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from flowdeck.engine.change import Change, Setting
from flowdeck.engine.progress import Tick
from flowdeck.engine.spec import settings_of
from flowdeck.figures import Trend, Verdict
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.launcher import PreparedRun
from flowdeck.tui.screens.demo import (
    BigFigures,
    DemoScreen,
    TourIntroScreen,
    big_value,
    caption_text,
)
from flowdeck.tui.tour import (
    OVERLOAD,
    P99,
    Observation,
    Seen,
    StepFigures,
    Tour,
    bench2_tour,
    changes_to,
    in_flight_limit,
    observe,
    overload_rate,
)
from flowdeck.tui.widgets.figure_strip import Figure
from tests.tui.fakes import T0, FakeControl, make_sample
from tests.tui.sweep_fakes import SweepPhase, sweep_updates
from tests.tui.test_live_pilot import rich_text


@pytest.fixture
def tour() -> Tour:
    """The story at the preset's load, no probe: the steps' own settings from the start."""
    return bench2_tour(probe=None)


@pytest.fixture
def probed() -> Tour:
    """The tour as ``flowdeck demo`` plays it: the broker measured first."""
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


def test_the_probe_runs_first_and_sets_the_load_from_what_the_broker_took(probed: Tour) -> None:
    """The run starts at the probe's settings (no rate limit, a confirm window); once it
    has measured, the steps' load is OVERLOAD times the capacity, and the in-flight limits
    are the seed's percentages of that rate."""
    probe = probed.probe
    assert probe is not None
    assert (probed.spec.rate, probed.spec.inflight, probed.spec.ack_every) == (
        0,
        probe.inflight,
        1,
    )
    assert probed.probing(settings_of(probed.spec))
    played = probed.at_rate(overload_rate(7980.0, probed.spec.publishers, probed.rate), 7980.0)
    assert played.rate == 3000  # 1.5 × 7,980 / 4 publishers = 2,992.5, up to 2 digits
    assert [step.changes[2] for step in played.steps] == [Change(Setting.RATE, 3000)] * 6
    assert [step.inflight for step in played.steps] == [0, 30, 3000, 6000, 6000, 150]
    assert "12,000 msg/s" in played.steps[0].caption
    assert "1.5× the 7,980 msg/s this broker took in the probe" in played.steps[0].caption
    assert not played.probing(settings_of(played.spec.with_change(Change(Setting.RATE, 3000))))


@pytest.mark.parametrize(
    ("capacity", "publishers", "rate"),
    [
        (7980.0, 4, 3000.0),  # this machine's private node: 12,000 msg/s offered
        (40_000.0, 4, 15_000.0),  # a big broker gets a big load
        (1234.0, 4, 470.0),
        (123.0, 4, 47.0),
        (10.0, 20, 1.0),  # at least 1 msg/s a publisher
        (0.0, 4, 2000.0),  # nothing consumed: the preset's rate
    ],
)
def test_the_load_offers_more_than_the_probe_measured(
    capacity: float, publishers: int, rate: float
) -> None:
    chosen = overload_rate(capacity, publishers, fallback=2000.0)
    assert chosen == pytest.approx(rate)
    if capacity:
        assert chosen * publishers >= OVERLOAD * capacity


def test_a_watcher_reads_the_step_off_the_settings_in_force(tour: Tour) -> None:
    settings = settings_of(tour.spec)
    for index, step in enumerate(tour.steps):
        in_force = settings
        for change in step.changes:
            in_force = in_force.with_value(change.setting, change.value or 0)
        assert tour.step_of(in_force) == index
    assert tour.step_of(settings.changed(inflight=7)) is None


def figures_now(**changes: Any) -> StepFigures:
    """A step's figures after WATCH_SECONDS: by default a broker keeping up at 8,000 msg/s
    with a p99 of 31.7 ms and a flat queue of 37 (what this machine's broker did with the
    preset's load)."""
    base = StepFigures(
        seconds=12,
        verdict=Verdict.SUSTAINABLE,
        reason="consumers keep up, depth flat, target reached",
        publish=7999.0,
        consume=7976.0,
        p99_ms=31.7,
        pending=40.0,
        depth=37.0,
        depth_slope=0.4,
        depth_trend=Trend.FLAT,
    )
    return replace(base, **changes)


def test_step_1_says_what_happens_when_the_broker_keeps_up(tour: Tour) -> None:
    """The issue's capture: "queue depth and pending confirms climb … p99 into seconds"
    over pub 7999 cons 7976 p99 31.7 ms depth 37. The check says the broker kept up."""
    seen = observe(tour.steps[0], figures_now(), capacity=9000.0)
    assert seen.seen is Seen.OTHERWISE
    assert "consumers keep up" in seen.text and "7,976 msg/s of 7,999 msg/s" in seen.text
    assert "queue depth 37, flat" in seen.text and "p99 31.7 ms" in seen.text
    assert "9,000 msg/s" in seen.text
    text = caption_text(tour, 0, seen).plain
    assert "look at" not in text  # the claim the screen contradicts is not shown
    assert "✗ not as the story says. On screen: consumers keep up" in text


def test_step_1_as_told_when_the_queues_fill(tour: Tour) -> None:
    overloaded = figures_now(
        verdict=Verdict.OVERLOADED,
        publish=12000.0,
        consume=8000.0,
        p99_ms=2400.0,
        depth=52000.0,
        depth_slope=3900.0,
        depth_trend=Trend.UP,
    )
    seen = observe(tour.steps[0], overloaded)
    assert seen.seen is Seen.AS_TOLD
    assert seen.text.startswith("queue depth 52,000, climbing +3,900/s")
    assert "p99 2.4 s, into seconds" in seen.text
    text = caption_text(tour, 0, seen).plain
    assert "▶ look at: publish runs ahead" in text and "✓ on screen: queue depth" in text


def test_step_1_says_where_the_overload_shows_when_the_queues_stay_flat(tour: Tour) -> None:
    """What this machine's private node did with 1.5 times its capacity and no in-flight
    limit: the queues stayed at a few thousand while p99 went to seconds, with most
    messages unconfirmed: the broker held the publishers back before the queues."""
    held = figures_now(
        verdict=Verdict.BACK_PRESSURED,
        publish=7014.0,
        consume=4889.0,
        p99_ms=14700.0,
        pending=786_000.0,
        depth=2413.0,
        depth_slope=3.0,
        target=11600.0,
    )
    seen = observe(tour.steps[0], held)
    assert seen.seen is Seen.OTHERWISE
    assert seen.text.startswith(
        "the overload shows before the queues: p99 14.7 s and 786,000 messages unconfirmed, "
        "while queue depth 2,413, flat"
    )
    assert (
        "publishers send 7,014 msg/s of the 11,600 msg/s they try and consumers take "
        "4,889 msg/s: messages wait in the publishers' connections"
    ) in seen.text
    assert "keep up" not in seen.text
    # one publisher that cannot send its 34,000 msg/s (the browser check's scale 0.05):
    # consumers take all that comes, and the text does not say otherwise
    client = figures_now(
        publish=11096.0, consume=12761.0, p99_ms=1000.0, pending=12232.0, depth=928.0,
        target=34000.0,
    )  # fmt: skip
    seen = observe(tour.steps[0], client)
    assert seen.seen is Seen.OTHERWISE
    assert "publishers send 11,096 msg/s of the 34,000 msg/s they try" in seen.text


def test_too_few_seconds_are_watched_not_judged(tour: Tour) -> None:
    seen = observe(tour.steps[0], figures_now(seconds=3))
    assert seen == Observation(Seen.WATCHING, "watching: 3 s of this step's figures so far")
    assert observe(tour.steps[0], None).seen is Seen.WATCHING


@pytest.mark.parametrize(
    ("changes", "seen", "words"),
    [
        (
            {"verdict": Verdict.DRAINING, "depth": 40000.0, "depth_slope": -6000.0,
             "depth_trend": Trend.DOWN, "publish": 300.0, "p99_ms": 5200.0},
            Seen.AS_TOLD,
            "the backlog drains: queue depth 40,000, falling -6,000/s",
        ),
        ({}, Seen.AS_TOLD, "publish equals consume at the broker's pace: 7,976 msg/s, p99 31.7"),
        (  # a few dozen messages going is no backlog draining
            {"depth": 74.0, "depth_slope": -175.0, "depth_trend": Trend.DOWN},
            Seen.AS_TOLD,
            "publish equals consume at the broker's pace",
        ),
        (
            {"verdict": Verdict.OVERLOADED, "depth_slope": 900.0, "depth_trend": Trend.UP},
            Seen.OTHERWISE,
            "the queues still fill",
        ),
    ],
)  # fmt: skip
def test_step_2_drain_then_steady(
    tour: Tour, changes: dict[str, Any], seen: Seen, words: str
) -> None:
    found = observe(tour.steps[1], figures_now(**changes))
    assert found.seen is seen and words in found.text


def test_step_2_says_when_step_1_left_no_queue_backlog(tour: Tour) -> None:
    before = figures_now(p99_ms=14700.0, depth=2413.0, consume=4889.0)
    found = observe(tour.steps[1], figures_now(p99_ms=69.4), before)
    assert found.seen is Seen.AS_TOLD
    assert found.text.endswith("(step 1's messages waited before the queues)")
    # what this machine did 27 s into step 2: above the target, making up for step 1
    ahead = figures_now(publish=22618.0, consume=22618.0, p99_ms=15.7, target=18400.0)
    found = observe(tour.steps[1], ahead, before)
    assert found.seen is Seen.AS_TOLD and found.text.endswith(
        "publishers above their 18,400 msg/s target: catching up on the schedule step 1 "
        "left them behind"
    )


def test_step_3_compares_p99_with_the_step_before(tour: Tour) -> None:
    before = figures_now(p99_ms=12.0)
    flat = observe(tour.steps[2], figures_now(p99_ms=14.0, pending=7900.0), before)
    assert flat.seen is Seen.OTHERWISE
    assert "p99 14.0 ms (it was 12.0 ms at the step before)" in flat.text
    assert "pending confirms 7,900" in flat.text
    climbing = observe(tour.steps[2], figures_now(p99_ms=850.0), before)
    assert climbing.seen is Seen.AS_TOLD and "p99 850.0 ms (it was 12.0 ms" in climbing.text


def test_acks_and_the_rule_of_thumb(tour: Tour) -> None:
    before = figures_now(consume=7000.0, p99_ms=40.0)
    assert observe(tour.steps[4], figures_now(consume=7600.0), before).seen is Seen.AS_TOLD
    same = observe(tour.steps[4], figures_now(consume=7000.0, p99_ms=40.0), before)
    assert same.seen is Seen.OTHERWISE and "no gain to see here" in same.text
    assert observe(tour.steps[5], figures_now(target=8000.0)).seen is Seen.AS_TOLD
    behind = observe(tour.steps[5], figures_now(publish=17500.0, target=11600.0))
    assert behind.seen is Seen.OTHERWISE and behind.text.startswith(
        "publishers catch up on the rate schedule they fell behind: publish 17,500 msg/s, "
        "above the 11,600 msg/s target"
    )
    draining = figures_now(verdict=Verdict.DRAINING, depth_slope=-500.0, depth_trend=Trend.DOWN)
    still = observe(tour.steps[5], draining)
    assert still.seen is Seen.OTHERWISE and "still drains" in still.text


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# -- the probe and the watcher on a fake run -----------------------------------------------


def probe_and_step_1(capacity: float, rate: float) -> tuple[SweepPhase, ...]:
    """The probe (no rate limit, consumers taking ``capacity``), then step 1 at ``rate`` per
    publisher with the consumers keeping up: a broker the story's overload does not
    overload."""
    return (
        SweepPhase("start", 200, capacity, capacity, 2.0, 8.0, 300, rate=0.0),
        SweepPhase("inflight=0", 0, 4 * rate, 4 * rate, 3.0, 31.7, 900, rate=rate),
    )


@pytest.mark.slow
async def test_the_probe_measures_then_step_1_overloads_by_what_it_measured(
    probed: Tour,
) -> None:
    fake = FakeControl(spec=probed.spec)
    app = FlowdeckApp(spec=probed.spec)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = DemoScreen(fake, probed)
        app.push_screen(screen)
        await pilot.pause()
        assert screen.probing and "MEASURING" in header_text(screen)
        updates = list(sweep_updates(probe_and_step_1(7000.0, 2700.0), transition=1))
        first = [u for u in updates if not (isinstance(u, Tick) and u.phase_index > 0)]
        screen.history.clock = T0 + 6
        for update in first[:8]:  # six seconds of the probe: still measuring
            fake.emit(update)
        await pilot.pause()
        assert screen.probing and fake.requests == []
        assert "Before the story, this broker is measured" in text_of(screen.query_one("#caption"))
        await pilot.press("space")  # the presenter is early: the tour starts by itself
        await pilot.pause()
        assert fake.requests == [] and screen.probing
        screen.history.clock = T0 + 24
        for update in updates[8:]:
            fake.emit(update)
        await pilot.pause()
        await pilot.pause()
        # 1.5 × 7,000 msg/s over 4 publishers = 2,625, up to 2,700 msg/s each
        assert not screen.probing and screen.tour.rate == 2700 and screen.tour.capacity == 7000
        assert fake.requests == [Change(Setting.INFLIGHT, 0), Change(Setting.RATE, 2700)]
        assert "STEP 1/6" in header_text(screen)
        caption = " ".join(text_of(screen.query_one("#caption")).split())
        assert "10,800 msg/s" in caption and "1.5× the 7,000 msg/s this broker took" in caption
        # the fake broker kept up with step 1: the caption says so instead of the story
        assert "✗ not as the story says. On screen: consumers keep up" in caption
        assert "look at" not in caption


@pytest.mark.slow
async def test_a_watcher_follows_the_presenters_steps_and_steers_nothing(probed: Tour) -> None:
    fake = FakeControl(spec=probed.spec)
    app = FlowdeckApp(spec=probed.spec)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = DemoScreen(fake, probed, watching=True)
        app.push_screen(screen)
        await pilot.pause()
        phases = probe_and_step_1(7000.0, 2700.0)
        updates = list(sweep_updates(phases[:1], transition=1))
        screen.history.clock = T0 + 12
        for update in updates:
            fake.emit(update)
        await pilot.pause()
        assert screen.probing and "watching the presenter's tour" in header_text(screen)
        # the presenter's step 2 is in force: 1 % of 2,700 msg/s in flight
        fake.settings = fake.settings.changed(inflight=27, rate=2700.0, ack_every=1)
        fake.emit_tick()
        await pilot.pause()
        await pilot.pause()
        assert not screen.probing and screen.index == 1 and screen.tour.rate == 2700
        assert "STEP 2/6" in header_text(screen)
        for key in ("space", "p", "s", "equals_sign"):
            await pilot.press(key)
            await pilot.pause()
        assert fake.requests == [] and app.screen is screen and screen.index == 1
