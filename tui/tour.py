"""The demo's guided tour as data: the seed's benchmark #2 story, one step per key press.

"Quorum Queues and Flow Control - Stress Tests" tells its benchmark #2 in four beats: with
no back pressure the queues fill; confirms with an in-flight limit of 1 % of the target
rate give low latency; at 100-200 % latency climbs again; multiple-flag acks help a
little. The tour replays those beats on one live run, each step a caption, the settings it
puts in force and the figures to look at, so a presenter can tell the story in front of
an audience with one key. Everything here is pure (no Textual, no I/O) so it is tested
without a screen and the story can be read in one place.

The engine cannot switch publisher confirms off while a run goes (``confirms`` is a
RunSpec field, not a steerable setting), so the first step stands for the seed's runs
without confirms with an in-flight limit of 0 (no limit): confirms still come back and
are counted, but no publisher ever waits for one, which is what takes the back pressure
away.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flowdeck.engine import Change, RunSpec, Setting, Settings, preset, setting_value

#: The preset the tour runs: the seed's benchmark #2 (20 publishers x 2000 msg/s, 10 quorum
#: queues, 20 consumers, 1 kB persistent messages, prefetch 2000).
TOUR_PRESET = "bench2"
#: Scale that overloads a laptop's broker about twice over (4 publishers x 2000 msg/s into
#: 2 quorum queues; a 2-core machine takes some 4,000-5,000 msg/s of it), so every beat of
#: the story shows. A bigger machine wants a bigger scale.
DEFAULT_TOUR_SCALE = 0.2
#: A demo runs until the presenter stops it; the run ends by itself after an hour.
DEFAULT_TOUR_SECONDS = 3600.0

#: Names of the figures a step points at (as ``tui.widgets.figure_strip.figures`` names them).
PUBLISH = "publish"
CONSUME = "consume"
P99 = "e2e p99"
PENDING = "pending"
DEPTH = "queue depth"


@dataclass(frozen=True, slots=True)
class TourStep:
    """One beat of the story: what the audience is told, what changes, what to look at."""

    title: str
    #: What this step does and why, in two or three sentences.
    caption: str
    #: What the audience should see happen on the figures and the chart.
    look_at: str
    #: The tour's settings in this step, absolute: going back to a step puts them all back.
    changes: tuple[Change, ...]
    #: The big figures to point at (highlighted on screen).
    watch: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Tour:
    """A run spec and the steps played on it, in order."""

    title: str
    #: Shown while the broker comes up, before the first step.
    intro: str
    spec: RunSpec
    steps: tuple[TourStep, ...]

    def step(self, index: int) -> TourStep:
        return self.steps[index]

    def clamp(self, index: int) -> int:
        """``index`` kept within the steps."""
        return min(max(index, 0), len(self.steps) - 1)


def in_flight_limit(rate: float, percent: float) -> int:
    """The in-flight limit that is ``percent`` of a publisher's target ``rate`` (the seed's
    way of choosing limits: 1 % of 2000 msg/s is 20); at least 1."""
    return max(1, round(rate * percent / 100))


def changes_to(step: TourStep, requested: Settings) -> tuple[Change, ...]:
    """The changes that put ``step``'s settings in force when the run has asked for
    ``requested`` so far (the controller's ``requested_settings``): only those that differ,
    so going back and forth never sends a change that changes nothing."""
    return tuple(
        change
        for change in step.changes
        if change.value is None or setting_value(requested, change.setting) != change.value
    )


def bench2_tour(
    scale: float = DEFAULT_TOUR_SCALE,
    duration: float = DEFAULT_TOUR_SECONDS,
    uri: str = "",
    management_url: str = "",
    prometheus_url: str = "",
) -> Tour:
    """The benchmark #2 tour, its run scaled by ``scale`` (SpecError when it cannot be).

    With no ``uri`` the run goes to a private RabbitMQ node the cockpit starts.
    """
    base = preset(TOUR_PRESET, scale)
    rate = base.rate
    one_percent = in_flight_limit(rate, 1)
    five_percent = in_flight_limit(rate, 5)
    full = in_flight_limit(rate, 100)
    double = in_flight_limit(rate, 200)
    # The seed's multiple-flag runs acked every 10 % of the prefetch.
    multiple = max(2, base.prefetch // 10)
    total = rate * base.publishers
    queues = f"{base.queues} quorum queue{'s' if base.queues != 1 else ''}"

    def settings(inflight: int, ack_every: int) -> tuple[Change, ...]:
        return (
            Change(Setting.INFLIGHT, float(inflight)),
            Change(Setting.ACK_EVERY, float(ack_every)),
        )

    steps = (
        TourStep(
            "No back pressure",
            f"{base.publishers} publishers try {total:,.0f} msg/s into {queues}: more than "
            "this broker can take. With no in-flight limit no publisher ever waits for a "
            "confirm, as in the seed's runs without confirms: nothing slows them down.",
            "publish runs ahead of consume: queue depth and pending confirms climb, and "
            "p99 climbs with them, into seconds.",
            settings(0, 1),
            (PUBLISH, CONSUME, DEPTH, P99),
        ),
        TourStep(
            f"Confirms, in-flight 1 % ({one_percent})",
            f"Each publisher now keeps at most {one_percent} messages unconfirmed (1 % of "
            f"its {rate:,.0f} msg/s) and waits for the broker before it sends more: "
            "confirms have become back pressure.",
            "first the backlog drains (depth falls, publish near 0), then publish equals "
            "consume at the broker's pace and p99 drops to milliseconds.",
            settings(one_percent, 1),
            (PENDING, DEPTH, P99),
        ),
        TourStep(
            f"In-flight 100 % ({full})",
            f"A whole second's worth of messages in flight per publisher ({full}): the "
            "broker holds far more at once and its buffers fill.",
            "pending confirms jump; publish may edge up, but consume does not keep up: "
            "queue depth climbs and p99 goes back to seconds.",
            settings(full, 1),
            (PENDING, P99, PUBLISH),
        ),
        TourStep(
            f"In-flight 200 % ({double})",
            f"Twice that ({double}): more in flight buys no throughput, only latency. "
            "The seed saw the same past 100 %: queues start filling.",
            "p99 higher still; consume falls behind publish in bursts.",
            settings(double, 1),
            (P99, DEPTH, CONSUME),
        ),
        TourStep(
            f"Multiple-flag acks (every {multiple})",
            f"Consumers now ack once every {multiple} deliveries with the multiple flag "
            f"(10 % of the prefetch of {base.prefetch}): one ack frame instead of "
            f"{multiple}, less work for the broker per message.",
            "consume a little higher, latency a little lower: the seed found the multiple "
            "flag helpful, not game changing.",
            settings(double, multiple),
            (CONSUME, P99),
        ),
        TourStep(
            f"The rule of thumb: in-flight 5 % ({five_percent})",
            "The seed's advice: an in-flight limit of 1-10 % of the target rate (towards "
            "10 % with few fast publishers, 1 % with hundreds), multiple-flag acks, and "
            "never load a broker hard without publisher confirms.",
            "steady msg/s at millisecond latency. Every step is a phase of the recorded "
            "session: flowdeck report shows them side by side.",
            settings(five_percent, multiple),
            (PUBLISH, CONSUME, P99),
        ),
    )
    spec = base
    for change in steps[0].changes:
        spec = spec.with_change(change)
    spec = replace(
        spec,
        name="tour-bench2",
        description=f"guided tour of the seed's benchmark #2 (scale {scale:g})",
        queue_pattern="flowdeck-tour-%d",
        uri=uri,
        management_url=management_url,
        prometheus_url=prometheus_url,
        schedule=(),
    ).with_duration(duration)
    intro = (
        "Benchmark #2 of 'Quorum Queues and Flow Control - Stress Tests', live: "
        f"{base.publishers} publishers x {rate:,.0f} msg/s into {queues}, "
        f"{base.consumers} consumers, 1 kB persistent messages, prefetch {base.prefetch}. "
        f"{len(steps)} steps, from no back pressure to the seed's rule of thumb; "
        "the presenter moves on with space and back with p."
    )
    return Tour("flowdeck tour: confirms as flow control", intro, spec, steps)
