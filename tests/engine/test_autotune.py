"""The autopilot's decisions, fed fake ticks, snapshots and broker polls: no broker, no loop."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from flowdeck.collectors.model import BrokerSample, QueueSample
from flowdeck.engine.autotune import (
    PLAIN_LADDER,
    Autopilot,
    Bounds,
    Hold,
    Search,
    State,
    Steadiness,
    SteadyRule,
    StepResult,
    backlog_of,
    ladder,
)
from flowdeck.engine.change import Change, apply_change
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.latency import LatencyKind, SendBasis, encode, new_histogram, record
from flowdeck.engine.phase_figures import PhaseTable
from flowdeck.engine.progress import Tick
from flowdeck.engine.settings import Setting
from flowdeck.engine.sinks import RunStarted, Sink
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings
from flowdeck.engine.spec import RunSpec, settings_of
from flowdeck.figures import PhaseLoad, Verdict, ranked_throughput, recommend, variation
from flowdeck.figures.verdict import MIN_SECONDS

SETTINGS = Settings.of(inflight=1, prefetch=100, ack_every=1, rate=1000, publishers=1, consumers=1)


# -- the ladder ----------------------------------------------------------------------------------


def test_the_inflight_ladder_is_the_seeds_percentages_of_the_rate_and_below() -> None:
    # 1% 2% 5% 10% 20% 50% 100% 200% of 1000, and 0.1% 0.2% 0.5% below them
    assert ladder(Setting.INFLIGHT, SETTINGS) == (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
    # benchmark #4: 60 msg/s per publisher -> 5% is 3, 10% is 6, 20% is 12, 100% is 60
    bench4 = ladder(Setting.INFLIGHT, SETTINGS.changed(rate=60))
    assert {3, 6, 12, 60, 120} <= set(bench4) and bench4[0] == 1


def test_the_ack_ladder_stays_within_half_the_prefetch() -> None:
    assert ladder(Setting.ACK_EVERY, SETTINGS.changed(prefetch=60)) == (1, 3, 6, 12, 30)
    assert ladder(Setting.PREFETCH, SETTINGS.changed(rate=0)) == PLAIN_LADDER


def test_the_three_windows_and_the_rate_are_tuned() -> None:
    with pytest.raises(SpecError, match="the autopilot tunes inflight, prefetch, ack_every, rate"):
        ladder(Setting.PUBLISHERS, SETTINGS)
    assert ladder(Setting.RATE, SETTINGS) == ()  # the rate search has no ladder


# -- steady --------------------------------------------------------------------------------------


def test_steady_needs_the_hold_and_a_flat_window() -> None:
    rule = SteadyRule(min_hold_s=6, window=4, max_cv=0.10, max_trend=0.10, max_hold_s=20)
    flat = [500.0, 505, 498, 502, 499, 501]
    assert rule.check(flat[:5], held_s=5).hold is Hold.HOLDING
    steady = rule.check(flat, held_s=6)
    assert steady.hold is Hold.STEADY and "over the last 4 s" in steady.text
    # a climb with little spread is a trend, not steady
    climbing = [400.0, 420, 440, 460, 480, 500]
    cv, trend = variation(climbing[-4:])
    assert cv < 0.10 < trend
    assert rule.check(climbing, held_s=6).hold is Hold.HOLDING
    noisy = [100.0, 300, 120, 280] * 5
    given_up = rule.check(noisy, held_s=20)
    assert given_up.hold is Hold.UNSTEADY and given_up.text.startswith("not steady after 20 s")


def test_nothing_flowing_is_steady_at_zero() -> None:
    assert variation([0.0, 0.0, 0.0]) == (0.0, 0.0)
    rule = SteadyRule.holding(3)
    assert rule.max_hold_s == 9
    # Held past its minimum, a step still waits for the seconds a verdict needs.
    assert rule.check([0.0] * (MIN_SECONDS - 1), held_s=4).hold is Hold.HOLDING
    assert rule.check([0.0] * MIN_SECONDS, held_s=5).hold is Hold.STEADY


def test_a_hold_longer_than_the_longest_is_refused() -> None:
    with pytest.raises(SpecError, match="hold must be more than 0 s"):
        SteadyRule(min_hold_s=30, max_hold_s=20)


# -- the search ----------------------------------------------------------------------------------


def step(
    value: int,
    consumed: float,
    *,
    target: float = 1000,
    p99: float = 5.0,
    depth_slope: float | None = 0.0,
    backlog: int | None = 0,
) -> StepResult:
    """A judged step as the autopilot makes it (verdict from the report's rules)."""
    load = PhaseLoad(
        publish_rate=consumed,
        consume_rate=consumed,
        confirm_rate=consumed,
        target_rate=target,
        pending_confirms_mean=float(value),
        inflight=value,
        publishers=1,
        blocked_s=0,
        alarm_s=0,
        depth_start=0.0,
        depth_end=0.0 if not depth_slope else 10 * depth_slope,
        depth_slope=depth_slope,
    )
    from flowdeck.figures.verdict import judge

    verdict, reason = judge(load)
    point = ranked_throughput(value, consumed, target, p99, verdict, f"inflight={value}")
    return StepResult(
        value, value, 6, Steadiness(Hold.STEADY, "steady"), load, verdict, reason, point, p99,
        backlog,
    )  # fmt: skip


def test_the_search_stops_two_steps_past_the_knee_and_picks_the_reports_value() -> None:
    search = Search(Setting.INFLIGHT, (1, 2, 5, 10, 20, 50))
    figures = {1: 220.0, 2: 430.0, 5: 990.0, 10: 1000.0, 20: 1001.0}
    ended = None
    while ended is None:
        value = search.next_value()
        assert value is not None
        ended = search.add(step(value, figures[value]))
    assert [s.value for s in search.steps] == [1, 2, 5, 10, 20]
    assert ended.startswith("throughput stopped rising: 2 steps")
    choice = search.choice()
    assert choice.value == 5  # the smallest within 95% of the best
    assert choice == recommend("inflight", [s.point for s in search.steps])


def test_a_step_catching_up_on_a_backlog_is_never_the_choice() -> None:
    search = Search(Setting.INFLIGHT, (1, 2, 5, 10, 20, 50))
    for value, consumed in ((1, 220.0), (2, 430.0), (5, 1300.0), (10, 1000.0), (20, 1001.0)):
        search.add(step(value, consumed))
    # 5 consumed 1300 of a 1000 msg/s target: a backlog's throughput, not the setting's
    assert search.steps[2].point.catching_up and search.choice().value == 10
    # held again at 10 as the autopilot confirms it: the choice stays
    assert search.confirm(step(10, 1000.0)) is None
    assert (
        search.choice().value == 10 == recommend("inflight", [s.point for s in search.steps]).value
    )


def test_a_rise_beyond_the_tolerance_keeps_it_climbing() -> None:
    search = Search(Setting.INFLIGHT, (1, 2, 5, 10))
    assert search.add(step(1, 300, target=0)) is None
    assert search.add(step(2, 310, target=0)) is None  # +3%: flat 1
    assert search.add(step(5, 600, target=0)) is None  # +94%: flat again 0
    assert search.flat == 0
    assert search.add(step(10, 610, target=0)) == "the ladder ends at inflight=10"


def test_an_overloaded_step_or_a_bound_ends_the_search() -> None:
    overloaded = Search(Setting.INFLIGHT, (1, 2, 5))
    assert overloaded.add(step(1, 500)) is None
    ended = overloaded.add(step(2, 900, depth_slope=200.0))
    assert ended is not None and "inflight=2 is overloaded (queue depth growing" in ended
    # an overloaded step says nothing of capacity: the best is the best that kept up
    assert overloaded.choice().value == 1

    p99 = Search(Setting.INFLIGHT, (1, 2, 5), Bounds(max_p99_ms=50))
    assert p99.add(step(1, 500, p99=20)) is None
    ended = p99.add(step(2, 1000, p99=80))
    assert ended == "inflight=2: e2e p99 80.00 ms is past the bound 50 ms"
    assert p99.choice().value == 1  # the best within the operator's p99 bound

    backlog = Search(Setting.INFLIGHT, (1, 2, 5), Bounds(max_backlog=1000))
    ended = backlog.add(step(1, 500, backlog=5000))
    assert ended == "inflight=1: backlog 5,000 messages is past the bound 1,000"


def test_bounds_are_checked() -> None:
    with pytest.raises(SpecError, match="p99 bound must be above 0 ms"):
        Bounds(max_p99_ms=0)
    with pytest.raises(SpecError, match="backlog bound must be 0 or more"):
        Bounds(max_backlog=-1)


# -- queue depth from broker polls ---------------------------------------------------------------


def poll(at: float, ready: int, *, source: str = "management", stale: str = "") -> BrokerSample:
    queue = QueueSample(name="q", vhost="/", type="quorum", ready=ready, unacked=0, consumers=1)
    return BrokerSample(
        source=source,  # type: ignore[arg-type]
        taken_at=at,
        figures_at=at,
        statistics_interval=1.0,
        queues=(queue,),
        stale_reason=stale,
    )


def test_the_backlog_is_the_last_fresh_poll_and_its_recent_slope() -> None:
    table = PhaseTable()
    table.begin(100.0)
    for poll_ in [poll(100 + i, 1000 - 100 * i) for i in range(6)]:
        table.add_poll(poll_)
    table.add_poll(poll(105.5, 999, stale="timeout"))
    backlog = backlog_of(table.figures())
    assert backlog is not None and backlog.depth == 500
    assert backlog.slope == pytest.approx(-100.0) and backlog.draining
    assert backlog_of(None) is None


# -- driving a run (a fake one) ------------------------------------------------------------------


E2E = (LatencyKind.END_TO_END, SendBasis.ACTUAL)


@dataclass
class FakeRun:
    """The controller's public surface: changes apply at once and open a phase."""

    spec: RunSpec
    started_at: float = 1000.0
    running: bool = True
    settings: Settings = field(init=False)
    sinks: list[Sink] = field(default_factory=list)
    changes: list[tuple[Change, str]] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)
    now: float = 1000.0
    phase: int = 0

    def __post_init__(self) -> None:
        self.settings = settings_of(self.spec)
        # The run's own per-phase figures, following it from the start (as the controller's).
        self.phase_table = PhaseTable()
        self.phase_table.begin(self.started_at)
        self.sinks.append(self.phase_table)

    @property
    def requested_settings(self) -> Settings:
        return self.settings

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def request(self, change: Change, source: str = "operator") -> int:
        self.changes.append((change, source))
        change_id = len(self.changes)
        detail = {"source": source, "setting": change.setting.value, "change": change.describe()}
        self.emit(RunEvent(self.now, EventKind.CHANGE_REQUESTED, "asked", change_id, detail))
        self.settings = apply_change(self.settings, change)
        self.phase += 1
        label = {"index": self.phase, "label": change.describe()}
        self.emit(RunEvent(self.now + 0.01, EventKind.PHASE, "phase", change_id, label))
        return change_id

    def report_event(self, kind: EventKind, message: str) -> RunEvent:
        event = RunEvent(self.now, kind, message)
        self.emit(event)
        return event

    def emit(self, event: RunEvent) -> None:
        self.events.append(event)
        for sink in list(self.sinks):
            sink.on_event(event)

    def said(self) -> list[str]:
        return [e.message for e in self.events if e.kind is EventKind.INFO]


def steps_asked(run: FakeRun) -> list[tuple[float | None, str]]:
    """The setting's values the run was asked for, in order (the marks that end each
    step's phase left out), with their sources."""
    return [(c.value, source) for c, source in run.changes if c.setting is not Setting.MARK]


def marks(run: FakeRun) -> list[str]:
    return [c.label for c, _ in run.changes if c.setting is Setting.MARK]


def assert_steps_judged_on_final_figures(run: FakeRun, autopilot: Autopilot) -> None:
    """Each step's verdict and figures are those of its phase in the finished run: the
    step was judged once its phase had ended (by its mark) and every row of it was in."""
    figures = run.phase_table.figures()
    assert figures is not None
    for result in autopilot.search.steps:
        phase = figures.phases[result.phase]
        assert (phase.verdict, phase.seconds, phase.load) == (
            result.verdict, result.held_s, result.load,
        ), (result, phase)  # fmt: skip


class Knee:
    """One publisher at 1000 msg/s whose window of ``inflight`` messages takes 5 ms a round
    trip: msg/s = min(1000, inflight / 0.005); e2e latency 2 ms + 1 ms per message waiting."""

    def __init__(self, run: FakeRun) -> None:
        self.run = run
        self.totals = Counters()
        self.second = 0

    def second_passes(self) -> None:
        run = self.run
        self.second += 1
        run.now = run.started_at + self.second
        inflight = run.settings.inflight
        rate = min(1000, inflight / 0.005)
        count = int(rate)
        self.totals = self.totals + Counters(
            published=count, confirmed=count, consumed=count, acked=count
        )
        histogram = new_histogram()
        for _ in range(count):
            record(histogram, 2000 + 1000 * inflight)
        snapshot = ClientSnapshot(
            worker=0,
            at=run.now - 0.001,
            interval=1.0,
            counters=self.totals,
            pending_confirms=inflight,
            unacked=0,
            connections=2,
            blocked=0,
            settings=run.settings,
            target_rate=1000,
            latency={E2E: encode(histogram)},
        )
        tick = Tick(
            at=run.now,
            elapsed=float(self.second),
            duration=300,
            target_rate=1000,
            publish_rate=rate,
            confirm_rate=rate,
            consume_rate=rate,
            nack_rate=0,
            return_rate=0,
            totals=self.totals,
            pending_confirms=inflight,
            unacked=0,
            connections=2,
            blocked=0,
            settings=run.settings,
        )
        for sink in list(run.sinks):
            sink.on_snapshot(snapshot)
            sink.on_broker_sample(poll(run.now - 0.5, 0))
            sink.on_tick(tick)


def knee_run() -> FakeRun:
    spec = RunSpec(rate=1000, inflight=1, publishers=1, consumers=1, uri="amqp://x")
    return FakeRun(spec)


def test_the_autopilot_steps_holds_judges_and_leaves_the_run_at_the_knee() -> None:
    run = knee_run()
    autopilot = Autopilot(run, "inflight", hold_s=3)
    autopilot.on_start(RunStarted(run.spec, run.started_at, 0))
    autopilot.attach()
    knee = Knee(run)
    for _ in range(60):
        if not autopilot.active:
            break
        knee.second_passes()
    assert autopilot.state is State.DONE
    asked = steps_asked(run)
    # 1: 200 msg/s, 2: 400, 5: 1000 (the knee), 10 and 20: no better, then back to 5
    assert asked == [(1, "autotune"), (2, "autotune"), (5, "autotune"), (10, "autotune"),
                     (20, "autotune"), (5, "autotune")]  # fmt: skip
    assert autopilot.chosen == 5 and run.settings.inflight == 5
    # each step's phase ended by a mark before it was judged: its figures were final
    assert marks(run) == [*(f"after autotune step {n}" for n in range(1, 6)),
                          "after confirming 5"]  # fmt: skip
    assert_steps_judged_on_final_figures(run, autopilot)
    said = run.said()
    assert said[0].startswith("autotune inflight: trying 1, 2, 5, 10, 20, 50,")
    # p99 at the recording's precision (2 significant digits), as the report gives it
    assert said[1].startswith("autotune step 1 inflight=1: 200.0 msg/s, e2e p99 3.01 ms")
    assert "back-pressured; steady: cv 0.0%, trend 0.0% over the last 4 s" in said[1]
    assert "autotune: confirming inflight=5, held like a step" in said
    assert autopilot.search.confirmed == {5}
    assert said[-1].startswith("autotune: inflight=5 chosen (msg/s 1,000.0, p99 7.01 ms): ")
    assert "throughput stopped rising" in said[-1] and "recommended inflight=5" in said[-1]
    # each step: held until the 5 whole seconds a verdict needs came after its change and
    # the last 4 were steady (the second in which the change came is not the step's, though
    # its phase counts it), and judged by its phase's figures
    assert all(s.held_s == MIN_SECONDS + 1 for s in autopilot.search.steps)


def test_a_p99_bound_stops_the_climb_and_the_choice_respects_it() -> None:
    run = knee_run()
    autopilot = Autopilot(run, Setting.INFLIGHT, hold_s=3, max_p99_ms=6.5)
    autopilot.attach()
    autopilot.on_start(RunStarted(run.spec, run.started_at, 0))
    knee = Knee(run)
    for _ in range(60):
        if not autopilot.active:
            break
        knee.second_passes()
    # 5 has p99 7 ms: past the bound; within it, 2 is the best (400 msg/s at 4 ms)
    assert [value for value, _ in steps_asked(run)] == [1, 2, 5, 2]
    assert autopilot.chosen == 2 and run.settings.inflight == 2
    assert "inflight=5: excluded (p99 7.01 ms is above 6.5 ms)" in (
        autopilot.recommendation.reasoning if autopilot.recommendation else ()
    )


def test_an_operator_change_of_the_setting_stops_the_autopilot() -> None:
    run = knee_run()
    autopilot = Autopilot(run, "inflight", hold_s=3)
    autopilot.attach()
    knee = Knee(run)
    # step 1 (from the run's first second with messages published) held 6 s, judged once
    # its phase's rows are in: step 2 runs
    for _ in range(8):
        knee.second_passes()
    run.request(Change(Setting.INFLIGHT, 40), "operator")
    assert autopilot.state is State.STOPPED
    assert run.said()[-1] == (
        "autotune stopped: the operator set inflight=40: inflight stays at the value in force; "
        "best so far inflight=1 (200.0 msg/s)"
    )
    knee.second_passes()
    assert [value for value, _ in steps_asked(run)] == [1, 2, 40]


def test_armed_before_the_run_it_begins_once_the_run_has_started() -> None:
    run = knee_run()
    run.running = False
    autopilot = Autopilot(run, "prefetch")
    autopilot.attach()
    assert autopilot.state is State.ARMED and not run.changes

    async def start() -> None:
        run.running = True
        run.emit(RunEvent(run.now, EventKind.RUN_STARTED, "run started"))
        assert not run.changes  # not inside the controller's own start
        await asyncio.sleep(0)

    asyncio.run(start())
    # Nothing published yet (its clients still connecting): the first step would have
    # those seconds in its phase. It begins with the run's first second of messages.
    assert autopilot.state is State.WAITING and not run.changes
    Knee(run).second_passes()
    assert autopilot.state is State.SEARCHING
    assert run.changes == [(Change(Setting.PREFETCH, 1), "autotune")]


def test_a_refused_step_stops_it_with_the_reason() -> None:
    run = knee_run()

    def refuse(change: Change, source: str = "operator") -> int:
        raise FlowdeckError("changes apply only while the run is running")

    run.request = refuse  # type: ignore[method-assign]
    autopilot = Autopilot(run, "inflight")
    autopilot.attach()
    Knee(run).second_passes()  # the first messages: the first step is asked for
    assert autopilot.state is State.STOPPED
    assert run.said()[-1] == (
        "autotune stopped: inflight=1 was refused: changes apply only while the run is running"
    )


def test_a_run_that_ends_mid_search_says_the_best_so_far() -> None:
    run = knee_run()
    autopilot = Autopilot(run, "inflight", hold_s=3)
    autopilot.attach()
    knee = Knee(run)
    for _ in range(10):
        knee.second_passes()
    autopilot.on_finish(None)  # type: ignore[arg-type]
    assert run.said()[-1].startswith("autotune ended with the run: inflight stays")
    assert Verdict.BACK_PRESSURED.value in run.said()[1]


def test_started_mid_run_it_judges_its_first_step_by_that_step_alone() -> None:
    """The cockpit's key starts the autopilot mid-run: 20 s at in-flight 50 (1,000 msg/s)
    came first, and the first step (in-flight 1: 200 msg/s) must read 200, not the run's
    totals since its start."""
    run = knee_run()
    run.settings = run.settings.changed(inflight=50)
    knee = Knee(run)
    for _ in range(20):
        knee.second_passes()
    autopilot = Autopilot(run, "inflight", hold_s=3)
    autopilot.attach()
    for _ in range(15):
        if len(autopilot.search.steps) >= 1:
            break
        knee.second_passes()
    first = autopilot.search.steps[0]
    assert first.value == 1
    assert first.point.throughput == pytest.approx(200.0, rel=0.02)
    assert "autotune step 1 inflight=1: 200.0 msg/s" in run.said()[1]


def published_by(run: FakeRun, published: int) -> ClientSnapshot:
    """A snapshot of the run's worker that has published ``published`` messages."""
    return ClientSnapshot(
        worker=0, at=run.now - 0.001, interval=1.0, counters=Counters(published=published),
        pending_confirms=0, unacked=0, connections=2, blocked=0, settings=run.settings,
        target_rate=run.spec.target_rate,
    )  # fmt: skip


def test_the_first_step_waits_for_the_runs_first_messages() -> None:
    """At a run's start the clients connect before they publish (a second or more through
    a slow link on a busy machine): a first step begun then has those seconds in its phase
    and reads under its rate, where the session, measured from the first send, does not."""
    spec = RunSpec(rate=100, inflight=100, publishers=1, consumers=1, uri="amqp://x")
    run = FakeRun(spec)
    autopilot = Autopilot(run, "rate", hold_s=3)
    autopilot.attach()
    assert autopilot.state is State.WAITING and not run.changes
    broker = Saturation(run, capacity=1500)
    broker.second_passes()
    assert autopilot.state is State.SEARCHING
    assert [value for value, _ in steps_asked(run)] == [100]
    opened = next(e.at for e in run.events if e.kind is EventKind.PHASE)
    assert opened >= run.started_at + 1  # after the first second of messages


def test_with_publishers_that_never_send_it_stops_and_says_so() -> None:
    run = knee_run()
    autopilot = Autopilot(run, "inflight", hold_s=3)
    autopilot.attach()
    silent = Tick(
        at=run.now, elapsed=0.0, duration=600, target_rate=1000, publish_rate=0,
        confirm_rate=0, consume_rate=0, nack_rate=0, return_rate=0, totals=Counters(),
        pending_confirms=0, unacked=0, connections=2, blocked=0, settings=run.settings,
    )  # fmt: skip
    for second in range(200):
        if not autopilot.active:
            break
        autopilot.on_tick(dataclasses.replace(silent, at=run.started_at + second))
    assert autopilot.state is State.STOPPED and not run.changes
    assert run.said()[-1].startswith("autotune cannot judge: the publishers sent nothing in ")


def test_it_waits_for_a_draining_backlog_before_its_first_step() -> None:
    run = knee_run()
    autopilot = Autopilot(run, "inflight", hold_s=3)
    depth = [50_000]

    def draining_poll(at: float) -> BrokerSample:
        depth[0] = max(0, depth[0] - 10_000)
        return poll(at, depth[0])

    # mid-run: the run has published, and the queues hold 40,000 messages, draining
    # 10,000 a second
    run.phase_table.add_snapshot(published_by(run, 50_000))
    run.phase_table.add_poll(poll(run.now - 1, 50_000))
    run.phase_table.add_poll(draining_poll(run.now))
    autopilot.attach()
    assert autopilot.state is State.WAITING and not run.changes
    assert run.said()[-1].startswith("autotune inflight waits: a backlog of 40,000 messages")
    for second in range(1, 8):
        run.now = run.started_at + second
        sample = draining_poll(run.now)
        run.phase_table.add_poll(sample)
        autopilot.on_broker_sample(sample)
        if run.changes:
            break
    # it began once the queues were back under the backlog threshold
    assert autopilot.state is State.SEARCHING and depth[0] < 100
    assert run.changes == [(Change(Setting.INFLIGHT, 1), "autotune")]


# -- the rate search: the broker's capacity -------------------------------------------------------


class Saturation:
    """One publisher at the run's rate into consumers that take at most ``capacity`` msg/s:
    above it the queue grows by the difference every second and e2e latency climbs with
    it; the broker polls report the queue each second."""

    def __init__(
        self,
        run: FakeRun,
        capacity: float | Callable[[Settings], float],
        poll_lag: int = 0,
        before_queues: bool = False,
        unacked: Callable[[Settings, float], float] | None = None,
    ) -> None:
        self.run = run
        #: Messages the consumers hold unacked at the run's settings and msg/s (None: 0).
        self.unacked_at = unacked
        #: msg/s the consumers can take (or what they take at the run's settings).
        self.capacity_at = capacity if callable(capacity) else lambda _settings: capacity
        self.totals = Counters()
        self.second = 0
        self.depth = 0.0
        #: The polls report the queue as it was this many seconds ago (a real broker's
        #: statistics lag it by an emission interval or two).
        self.poll_lag = poll_lag
        self.depths: list[float] = []
        #: The backlog waits before the queues (credit flow): the polls see empty queues.
        self.before_queues = before_queues

    def second_passes(self) -> None:
        run = self.run
        self.second += 1
        run.now = run.started_at + self.second
        rate = run.settings.rate
        capacity = self.capacity_at(run.settings)
        consumed = min(capacity, rate + self.depth)
        self.depth = max(0.0, self.depth + rate - consumed)
        published, taken = int(rate), int(consumed)
        self.totals = self.totals + Counters(
            published=published, confirmed=published, consumed=taken, acked=taken
        )
        histogram = new_histogram()
        wait_us = int(1_000_000 * self.depth / capacity)
        for _ in range(max(1, taken)):
            record(histogram, 2000 + wait_us)
        unacked = 0 if self.unacked_at is None else round(self.unacked_at(run.settings, consumed))
        snapshot = ClientSnapshot(
            worker=0, at=run.now - 0.001, interval=1.0, counters=self.totals,
            pending_confirms=1, unacked=unacked, connections=2, blocked=0, settings=run.settings,
            target_rate=rate, latency={E2E: encode(histogram)},
        )  # fmt: skip
        tick = Tick(
            at=run.now, elapsed=float(self.second), duration=600, target_rate=rate,
            publish_rate=rate, confirm_rate=rate, consume_rate=consumed, nack_rate=0,
            return_rate=0, totals=self.totals, pending_confirms=1, unacked=unacked, connections=2,
            blocked=0, settings=run.settings,
        )  # fmt: skip
        self.depths.append(self.depth)
        polled = self.depths[max(0, len(self.depths) - 1 - self.poll_lag)]
        if self.before_queues:
            polled = 0.0
        for sink in list(run.sinks):
            sink.on_snapshot(snapshot)
            sink.on_broker_sample(poll(run.now - 0.5, int(polled)))
            sink.on_tick(tick)


def drive(
    autopilot: Autopilot, broker: Saturation, seconds: int = 600
) -> list[tuple[Change, float]]:
    """Let seconds pass until the autopilot is done (at most ``seconds``); each change it
    asked for, with the queue's depth when it did."""
    run = broker.run
    asked: list[tuple[Change, float]] = []
    request = run.request

    def recording(change: Change, source: str = "operator") -> int:
        asked.append((change, broker.depth))
        return request(change, source)

    run.request = recording  # type: ignore[method-assign]
    for _ in range(seconds):
        if not autopilot.active:
            break
        broker.second_passes()
    return asked


def test_the_rate_search_finds_where_consumers_stop_keeping_up() -> None:
    spec = RunSpec(rate=100, inflight=100, publishers=1, consumers=1, uri="amqp://x")
    run = FakeRun(spec)
    autopilot = Autopilot(run, "rate", hold_s=3)
    autopilot.attach()
    broker = Saturation(run, capacity=1500)
    for _ in range(600):
        if not autopilot.active:
            break
        broker.second_passes()
    assert autopilot.state is State.DONE, run.said()
    asked = [value for value, _ in steps_asked(run)]
    # doubling while the consumers keep up, then bisecting past 1,500 msg/s; after each
    # failed probe the run goes back to a rate that held until the queue has drained
    assert asked[:5] == [100, 200, 400, 800, 1600], asked
    assert asked[5] == 800  # back to what held: the backlog of the 1,600 probe drains
    found = autopilot.capacity
    assert found is not None and found.rate is not None and found.broke_at is not None
    assert 1300 <= found.rate <= 1500 < found.broke_at <= 1700, found.reasoning
    assert autopilot.chosen == found.per_publisher == run.settings.rate
    said = run.said()
    assert said[0].startswith("autotune rate: finding the highest rate this broker sustains")
    assert said[-1].startswith(f"autotune rate: this broker sustains {found.rate:,.0f} msg/s")
    # the answer is the run's own figures' capacity: what the report gives on the session
    figures = run.phase_table.figures()
    assert figures is not None and figures.capacity == found
    assert_steps_judged_on_final_figures(run, autopilot)


def test_after_a_failed_probe_it_holds_a_rate_that_held_though_the_polls_lag() -> None:
    # On the seed redo's cluster each recovery lasted 0.3-0.9 s: a broker poll arriving
    # while waiting started the next probe, its queue figures a few seconds old (empty),
    # so every probe after the first failure was judged on the last one's backlog.
    spec = RunSpec(rate=100, inflight=100, publishers=1, consumers=1, uri="amqp://x")
    run = FakeRun(spec)
    autopilot = Autopilot(run, "rate", hold_s=3)
    autopilot.attach()
    broker = Saturation(run, capacity=1500, poll_lag=6)
    for _ in range(600):
        if not autopilot.active:
            break
        broker.second_passes()
    assert autopilot.state is State.DONE, run.said()
    asked = [(e.at, e.detail["change"]) for e in run.events if e.kind is EventKind.CHANGE_REQUESTED]
    recoveries = [i for i, (_, change) in enumerate(asked) if change == "rate=800"][1:]
    assert recoveries, asked
    for i in recoveries:
        if i + 1 < len(asked):
            held = asked[i + 1][0] - asked[i][0]
            assert held >= autopilot.rule.min_hold_s, (asked[i], asked[i + 1])
    found = autopilot.capacity
    assert found is not None and found.rate is not None
    assert 1300 <= found.rate <= 1500, found.reasoning


def test_a_recovery_waits_for_a_backlog_the_polls_do_not_see() -> None:
    # On the seed redo's mirrored queues the backlog of a failed probe waited before the
    # queues (publishers in credit flow) and the polls read them empty: each probe after
    # the first failure began on it, p99 5-6 s at 4,200-4,500 msg/s. The clients' own
    # rates show it: consumers take more than publishers send until it has drained.
    spec = RunSpec(rate=100, inflight=100, publishers=1, consumers=1, uri="amqp://x")
    run = FakeRun(spec)
    autopilot = Autopilot(run, "rate", hold_s=3)
    autopilot.attach()
    broker = Saturation(run, capacity=1000, before_queues=True)
    asked = drive(autopilot, broker)
    assert autopilot.state is State.DONE, run.said()
    at_request = [
        (float(change.value or 0), depth)
        for change, depth in asked
        if change.setting is not Setting.MARK
    ]
    failed = [i for i, (rate, _) in enumerate(at_request) if rate == 1600]
    assert failed and at_request[failed[0] + 1][0] == 800, at_request
    # every probe after a recovery (back at 800, which held) starts from drained queues
    after = [at_request[i + 1] for i in range(failed[0], len(at_request) - 1)
             if at_request[i][0] == 800]  # fmt: skip
    assert after and all(depth == 0 for _, depth in after), at_request
    assert any("a backlog drains before the queues" in said for said in run.said())
    found = autopilot.capacity
    assert found is not None and found.rate is not None
    assert 800 <= found.rate <= 1000, found.reasoning


# -- a step that measured a backlog --------------------------------------------------------------


def test_an_inconclusive_step_is_taken_again_once_and_its_p99_is_not_held_against_the_bound() -> (
    None
):
    search = Search(Setting.PREFETCH, (1, 2, 5, 10), Bounds(max_p99_ms=50))
    assert search.add(step(1, 500)) is None
    # 2 drained a backlog: consumed 800 of 500 msg/s, p99 15 s (the backlog's)
    point = ranked_throughput(2, 800, 500, 15_000, Verdict.DRAINING, "prefetch=2")
    draining = dataclasses.replace(
        step(2, 800, target=500, p99=15_000), verdict=Verdict.DRAINING, point=point
    )
    assert draining.verdict.inconclusive and not Verdict.OVERLOADED.inconclusive
    assert search.add(draining) is None
    assert search.retry == 2 and search.next_value() == 2
    # taken again and inconclusive again: the climb goes on, neither beaten nor tied
    assert search.add(draining) is None
    assert search.retry is None and search.next_value() == 5 and search.flat == 0
    assert search.add(step(5, 500, target=500)) is None
    assert search.next_value() == 10


def test_a_step_that_drained_the_backlog_of_the_one_before_is_taken_again_from_empty_queues() -> (
    None
):
    # On a busy CI machine prefetch 1 held two consumers working 5 ms a message to 250 of
    # 350 msg/s, and every later step drained the backlog it left ("draining a backlog",
    # e2e p99 15 s): the ladder ran to its end and nothing was recommended.
    spec = RunSpec(rate=350, prefetch=1, publishers=1, consumers=2, uri="amqp://x")
    run = FakeRun(spec)
    autopilot = Autopilot(run, "prefetch", hold_s=3)
    autopilot.attach()
    # Each consumer holds a message for its work (5 ms) and the ack's way (2 ms), up to
    # its prefetch: msg/s × 7 ms unacked (Little), at most prefetch × 2.
    broker = Saturation(
        run,
        capacity=lambda settings: min(400.0, 250.0 * settings.prefetch),
        unacked=lambda settings, consumed: min(2.0 * settings.prefetch, consumed * 0.007),
    )
    asked = drive(autopilot, broker)
    assert autopilot.state is State.DONE, run.said()
    taken = [(s.value, s.verdict) for s in autopilot.search.steps]
    assert taken[0] == (1, Verdict.OVERLOADED), taken
    assert taken[1] == (2, Verdict.DRAINING) and taken[2] == (2, Verdict.SUSTAINABLE), taken
    assert "autotune takes prefetch=2 again" in marks(run)
    # the value stayed in force while the backlog drained, and the step began again from
    # empty queues
    assert [value for value, _ in steps_asked(run)][:2] == [1, 2]
    assert any(said.startswith("autotune prefetch waits: a backlog of") for said in run.said())
    again = next(
        depth for change, depth in asked if change.label == "autotune takes prefetch=2 again"
    )
    assert again < 100, asked
    assert autopilot.chosen == 2 == run.settings.prefetch, run.said()
    assert_steps_judged_on_final_figures(run, autopilot)
