"""The run's broker sources on a thread of their own, off the loop that steers the run.

Polling the management API of a busy broker means reading and parsing a JSON document per
statistics interval (every queue's figures: hundreds of kB with a hundred queues), and
building a sample from it; with Prometheus beside it, a scrape more. On the controller's
loop that work is one long callback at a time, and whatever else shares that loop waits
for it: in the cockpit, the operator's key (seen: key -> screen p99 several times the
median at the seed's benchmark #3, the management poll among the loop's busiest work).

:class:`SourcesThread` runs a :class:`~flowdeck.engine.sources.BrokerSources` on an event
loop of its own in a daemon thread. Every coroutine of the sources' surface runs there and
is awaited from the caller's loop; the three callbacks (sample, event, kept series) hop
back to the caller's loop in the order they were made, so the controller sees exactly
what it saw before, in the same order. The Python work still shares the interpreter, but
a thread gives the interpreter back every switch interval (5 ms), where a callback on the
shared loop runs to its end. The thread starts with the first call and ends after
:meth:`keep_range` or :meth:`aclose`, the last calls of a run.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from flowdeck.collectors import Broker, ManagementCollector
from flowdeck.collectors.model import BrokerSample
from flowdeck.engine.events import RunEvent
from flowdeck.engine.sinks import PrometheusRow
from flowdeck.engine.sources import BrokerSources
from flowdeck.engine.spec import RunSpec

__all__ = ["SourcesThread"]

_T = TypeVar("_T")
_A = TypeVar("_A")


class SourcesThread:
    """:class:`BrokerSources` with the same surface, run on its own thread and loop (see the
    module docstring)."""

    def __init__(
        self,
        spec: RunSpec,
        *,
        broker: Broker,
        on_sample: Callable[[BrokerSample], None],
        on_event: Callable[[RunEvent], None],
        on_range: Callable[[Sequence[PrometheusRow]], None],
        management: ManagementCollector | None = None,
        run_tag: str = "",
    ) -> None:
        self._owner: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sources = BrokerSources(
            spec,
            broker=broker,
            on_sample=self._back(on_sample),
            on_event=self._back(on_event),
            on_range=self._back(on_range),
            management=management,
            run_tag=run_tag,
        )

    # -- the sources' surface ------------------------------------------------------------------

    @property
    def management_sample(self) -> BrokerSample | None:
        """The management API's last fresh sample (None before the first)."""
        return self._sources.management_sample

    @property
    def thread(self) -> threading.Thread | None:
        """The thread the sources run on (None before the first call and after the last)."""
        return self._thread

    async def check_capacity(self, *, skip: bool = False) -> None:
        await self._call(self._sources.check_capacity(skip=skip))

    async def prepare_queues(self) -> None:
        await self._call(self._sources.prepare_queues())

    async def queue_leaders(self) -> dict[str, tuple[str, int]]:
        return await self._call(self._sources.queue_leaders())

    async def stream_figures(self) -> dict[str, int] | None:
        return await self._call(self._sources.stream_figures())

    async def stream_port(self) -> int:
        return await self._call(self._sources.stream_port())

    async def start(self) -> None:
        await self._call(self._sources.start())

    async def stop(self) -> None:
        await self._call(self._sources.stop())

    async def keep_range(self, started: float, ended: float) -> None:
        """Keep the Prometheus series of the run, then end the thread (the run's last call)."""
        try:
            await self._call(self._sources.keep_range(started, ended))
        finally:
            await self._end()

    async def aclose(self) -> None:
        """Close every collector, then end the thread (a run that could not start)."""
        try:
            await self._call(self._sources.aclose())
        finally:
            await self._end()

    # -- inside --------------------------------------------------------------------------------

    def _back(self, callback: Callable[[_A], None]) -> Callable[[_A], None]:
        """``callback`` called on the caller's loop, in the order the sources made the calls."""

        def hop(value: _A) -> None:
            owner = self._owner
            if owner is None or owner.is_closed():
                callback(value)  # no loop to go back to: called where it was made
            elif threading.current_thread() is self._thread:
                owner.call_soon_threadsafe(callback, value)
            else:
                callback(value)

        return hop

    async def _call(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Run ``work`` on the sources' loop and wait for it here; cancelling the wait
        cancels the work."""
        self._owner = asyncio.get_running_loop()
        loop = self._running_loop()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None or self._thread is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()
                # What the last calls left behind (a cancelled watch's clean-up) ends here.
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()

            thread = threading.Thread(target=serve, name="flowdeck-broker-sources", daemon=True)
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread
        return self._loop

    async def _end(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
