"""What follows a run: one typed protocol for every part that takes the run's updates.

The recorder, the cockpit, the headless progress lines and the /metrics endpoint all take
the same updates from the controller: the run's start, each worker's per-second snapshot,
the one-a-second :class:`Tick`, every :class:`RunEvent`, every broker sample, the
Prometheus series kept at the end, and the :class:`RunSummary`. A sink implements the
methods it needs (subclass :class:`NullSink` for the rest); the controller calls them in
that order, on its loop, and a sink must not block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.events import RunEvent
from flowdeck.engine.progress import RunSummary, Tick
from flowdeck.engine.snapshot import ClientSnapshot
from flowdeck.engine.spec import RunSpec

#: One Prometheus sample of the run's range query: (unix time, metric, labels JSON, value).
PrometheusRow = tuple[float, str, str, float]

#: What a front-end listener sees: the updates a screen or a printer shows.
Update = Tick | BrokerSample | RunEvent | RunSummary
Listener = Callable[[Update], None]


@dataclass(frozen=True, slots=True)
class RunStarted:
    """The run's common time origin, once every worker is ready to start load."""

    spec: RunSpec
    started_at: float
    workers: int


class Sink(Protocol):
    """A part that follows a run as it goes; see the module docstring."""

    def on_start(self, run: RunStarted) -> None: ...

    def on_snapshot(self, snapshot: ClientSnapshot) -> None: ...

    def on_tick(self, tick: Tick) -> None: ...

    def on_event(self, event: RunEvent) -> None: ...

    def on_broker_sample(self, sample: BrokerSample) -> None: ...

    def on_prometheus_range(self, rows: Sequence[PrometheusRow]) -> None: ...

    def on_finish(self, summary: RunSummary) -> None: ...


class NullSink:
    """A sink that takes every update and does nothing: override what a sink needs."""

    def on_start(self, run: RunStarted) -> None:
        return None

    def on_snapshot(self, snapshot: ClientSnapshot) -> None:
        return None

    def on_tick(self, tick: Tick) -> None:
        return None

    def on_event(self, event: RunEvent) -> None:
        return None

    def on_broker_sample(self, sample: BrokerSample) -> None:
        return None

    def on_prometheus_range(self, rows: Sequence[PrometheusRow]) -> None:
        return None

    def on_finish(self, summary: RunSummary) -> None:
        return None


def deliver(sink: Sink, update: Update) -> None:
    """Hand one front-end update to ``sink`` by its kind: what a run that is followed from
    elsewhere (a remote run, a test's fake) does for the sinks it keeps."""
    if isinstance(update, Tick):
        sink.on_tick(update)
    elif isinstance(update, RunEvent):
        sink.on_event(update)
    elif isinstance(update, RunSummary):
        sink.on_finish(update)
    else:
        sink.on_broker_sample(update)


class ListenerSink(NullSink):
    """A one-function listener (``Controller.add_listener``) as a sink: it sees ticks,
    events, broker samples and the summary, the updates a screen shows."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener

    def __repr__(self) -> str:
        return f"ListenerSink({self.listener!r})"

    def on_tick(self, tick: Tick) -> None:
        self.listener(tick)

    def on_event(self, event: RunEvent) -> None:
        self.listener(event)

    def on_broker_sample(self, sample: BrokerSample) -> None:
        self.listener(sample)

    def on_finish(self, summary: RunSummary) -> None:
        self.listener(summary)
