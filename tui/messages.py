"""Messages the cockpit's screens and widgets send, named for what happened."""

from __future__ import annotations

from textual.message import Message

from flowdeck.collectors import BrokerSample
from flowdeck.engine import Change, RunEvent, RunSummary, Tick


class TickReceived(Message):
    """The run's once-a-second aggregate arrived (live or replayed)."""

    def __init__(self, tick: Tick) -> None:
        super().__init__()
        self.tick = tick


class BrokerSampleReceived(Message):
    """A collector polled the broker (or failed to, then the sample is stale)."""

    def __init__(self, sample: BrokerSample) -> None:
        super().__init__()
        self.sample = sample


class EventReceived(Message):
    """Something happened in the run: a change, a phase, an alarm, an error."""

    def __init__(self, event: RunEvent) -> None:
        super().__init__()
        self.event = event


class RunFinished(Message):
    """The run ended; the summary holds the data-safety accounting."""

    def __init__(self, summary: RunSummary) -> None:
        super().__init__()
        self.summary = summary


class RunFailed(Message):
    """The run could not start or broke off; ``reason`` says why, for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class ChangeRequested(Message):
    """The operator asked for a change (key, palette or prompt)."""

    def __init__(self, change: Change) -> None:
        super().__init__()
        self.change = change
