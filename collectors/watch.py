"""BrokerWatch: the polling loop shared by both collectors.

The loop never overlaps itself (the next poll is scheduled when the last one finished),
polls the heavy figures once per statistics interval (just after the broker recomputes
them, when it knows when that is), checks alarms every second in between when the source
can do that cheaply, and backs off while the source is in trouble, then recovers by
itself. It never raises for the broker's trouble; it stops when ``stop`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from flowdeck.collectors.model import BrokerSample

log = logging.getLogger(__name__)

#: How long after the broker's expected recomputation a full poll is made.
_AFTER_COLLECTION_S = 0.3


@runtime_checkable
class BrokerSource(Protocol):
    """What BrokerWatch polls: ManagementCollector and PrometheusCollector."""

    @property
    def statistics_interval(self) -> float: ...

    async def sample(self) -> BrokerSample: ...


@runtime_checkable
class AlarmSource(Protocol):
    """A source that can read the alarms alone, cheaply and promptly."""

    async def sample_alarms(self) -> BrokerSample: ...


class BrokerWatch:
    """Polls ``source`` until stopped and hands every sample to ``on_sample``.

    ``interval`` forces the full-poll period (default: the source's statistics interval,
    re-read after every poll since a collector learns it). ``alarm_interval`` is the
    period of the cheap alarm check; an alarm-only sample is handed on only when an alarm
    appears or clears. ``max_backoff`` caps the wait between polls of a failing source.
    """

    def __init__(
        self,
        source: BrokerSource,
        on_sample: Callable[[BrokerSample], None],
        *,
        interval: float | None = None,
        alarm_interval: float = 1.0,
        max_backoff: float = 10.0,
    ) -> None:
        if interval is not None and interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self.source = source
        self.on_sample = on_sample
        self.interval = interval
        self.alarm_interval = alarm_interval
        self.max_backoff = max_backoff
        self.polls = 0
        self.alarm_polls = 0
        self.failures = 0
        self._alarms_seen: tuple[bool, bool] | None = None

    @property
    def full_interval(self) -> float:
        return self.interval or max(0.5, self.source.statistics_interval)

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        next_full = loop.time()
        next_alarm = next_full + self.alarm_interval
        can_check_alarms = isinstance(self.source, AlarmSource)
        while not stop.is_set():
            now = loop.time()
            if now >= next_full:
                sample = await self._poll_full()
                next_full = loop.time() + self._delay_after(sample)
                next_alarm = loop.time() + self.alarm_interval
            elif can_check_alarms and self.failures == 0 and now >= next_alarm:
                await self._poll_alarms()
                next_alarm = loop.time() + self.alarm_interval
            wake = min(next_full, next_alarm) if can_check_alarms else next_full
            timeout = max(0.0, wake - loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout)

    async def _poll_full(self) -> BrokerSample | None:
        try:
            sample = await self.source.sample()
        except Exception:
            # A collector must not raise for broker trouble; if one does, keep watching.
            log.exception("broker source %r raised; polling again after a back-off", self.source)
            self.failures += 1
            return None
        self.polls += 1
        self.failures = self.failures + 1 if sample.stale else 0
        self._alarms_seen = (sample.memory_alarm, sample.disk_alarm)
        self._hand_on(sample)
        return sample

    async def _poll_alarms(self) -> None:
        assert isinstance(self.source, AlarmSource)
        try:
            sample = await self.source.sample_alarms()
        except Exception:
            log.exception("broker source %r raised on the alarm check", self.source)
            return
        self.alarm_polls += 1
        alarms = (sample.memory_alarm, sample.disk_alarm)
        if sample.stale:
            # The next full poll says what is wrong, with back-off; do not repeat it here.
            return
        if alarms != self._alarms_seen:
            self._alarms_seen = alarms
            self._hand_on(sample)

    def _hand_on(self, sample: BrokerSample) -> None:
        try:
            self.on_sample(sample)
        except Exception:
            log.exception("a broker sample handler raised; the watch goes on")

    def _delay_after(self, sample: BrokerSample | None) -> float:
        period = self.full_interval
        if sample is None or self.failures:
            return float(min(self.max_backoff, period * 2 ** max(0, self.failures - 1)))
        if self.interval is None and sample.figures_at < sample.taken_at:
            # Poll just after the broker's next recomputation, not a whole period after
            # this poll: the figures are then as fresh as they can be.
            next_collection = sample.figures_at + period + _AFTER_COLLECTION_S
            delay = next_collection - time.time()
            if delay < period / 2:
                delay += period
            if period / 2 <= delay <= 1.5 * period + _AFTER_COLLECTION_S:
                return delay
        return period
