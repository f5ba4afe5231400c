"""The broker's own counts over the run's queues: what they took in, what was acked, what
is left. The check on the run's accounting when a worker's report never came.

A worker lost mid-run (its process killed, its host gone) leaves the accounting without
the sequences its consumers took: messages other workers published and it consumed would
count as lost. The broker counted them as acked, though. The management API keeps, per
queue and since the queue was declared, ``message_stats.publish`` (messages routed into
it), ``ack`` (acknowledged by consumers; ``deliver_no_ack``/``get_no_ack`` for auto-ack)
and ``messages`` (ready + unacked now). Read once as the run starts and once after it, the
difference is the run's.

The figures come from the broker's statistics, collected every ``collect_statistics_interval``
(5 s by default): the read after the run waits one interval past the run's last activity,
and, while the counts do not add up, until they hold still for an interval.
A channel that dies with its connection can take its last interval's publish count along,
so a queue's ``publish`` may be short of what was routed into it; what was acked plus what
is left is a floor under it.

A collaborator of the controller (see ``engine.run_context``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from flowdeck.engine.tls import http_context

if TYPE_CHECKING:
    from flowdeck.collectors import Broker
    from flowdeck.engine.run_context import RunContext

__all__ = ["QueueCounter", "QueueCounts"]

#: The management API's answer is awaited this long, each read.
READ_TIMEOUT = 5.0
_COLUMNS = (
    "name,messages,message_stats.publish,message_stats.ack,"
    "message_stats.deliver_no_ack,message_stats.get_no_ack"
)


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """The broker's counts over the run's queues, summed."""

    #: Messages routed into the queues (``message_stats.publish``).
    routed: int
    #: Messages consumers acknowledged, or took without acknowledging (auto-ack).
    acked: int
    #: Messages still in the queues (ready + unacked) when read.
    left: int

    def since(self, before: QueueCounts) -> QueueCounts:
        """The counts of what happened after ``before`` was read (``left`` as now)."""
        return QueueCounts(self.routed - before.routed, self.acked - before.acked, self.left)

    @property
    def never_acked(self) -> int:
        """Messages the queues took in and no consumer acknowledged: the most the broker's
        counters allow to be lost (those left in the queues included). The queues took in
        at least what was acked plus what is left, whatever a short ``publish`` says."""
        return max(0, max(self.routed, self.acked + self.left) - self.acked)

    def to_json(self) -> dict[str, int]:
        return {**asdict(self), "never_acked": self.never_acked}


def counts_of(queues: Sequence[Mapping[str, Any]], names: Sequence[str]) -> QueueCounts:
    """The counts of the queues named ``names`` in a ``/api/queues`` answer."""
    wanted = set(names)
    routed = acked = left = 0
    for queue in queues:
        if queue.get("name") not in wanted:
            continue
        stats = queue.get("message_stats") or {}
        routed += _count(stats.get("publish"))
        acked += sum(_count(stats.get(k)) for k in ("ack", "deliver_no_ack", "get_no_ack"))
        left += _count(queue.get("messages"))
    return QueueCounts(routed, acked, left)


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


async def read_counts(broker: Broker, names: Sequence[str]) -> QueueCounts:
    """The counts of the queues ``names`` now; OSError/httpx errors/ValueError when the
    management API does not answer well."""
    import httpx

    verify = await asyncio.to_thread(http_context, broker.uri)
    url = f"{broker.usual_management_url.rstrip('/')}/api/queues/{quote(broker.vhost, safe='')}"
    async with httpx.AsyncClient(
        auth=broker.management_login, verify=verify, timeout=READ_TIMEOUT
    ) as client:
        response = await client.get(url, params={"columns": _COLUMNS})
        response.raise_for_status()
        answer = response.json()
    if not isinstance(answer, list):
        raise ValueError(f"{url} is not a list of queues")
    return counts_of([q for q in answer if isinstance(q, Mapping)], names)


class QueueCounter:
    """Reads the run's queues' counts as it starts and, when asked, after it ended."""

    def __init__(self) -> None:
        self._run: RunContext | None = None
        self._names: tuple[str, ...] = ()
        self._before: asyncio.Task[QueueCounts] | None = None

    def bind(self, run: RunContext) -> None:
        self._run = run

    def begin(self, names: Sequence[str]) -> None:
        """Read the counts before the load starts, in the background."""
        if self._run is None or self._before is not None:
            return
        self._names = tuple(names)
        self._before = asyncio.create_task(
            read_counts(self._run.broker, self._names), name="flowdeck-queue-counts"
        )

    async def after(
        self, last_activity: float, statistics_interval: float
    ) -> tuple[QueueCounts | None, str]:
        """The run's counts, read once the broker's statistics cover ``last_activity``;
        or None and why they could not be read."""
        if self._run is None or self._before is None:
            return None, "the run's queues were not counted as it started"
        try:
            before = await self._before
        except Exception as exc:
            return None, f"the management API did not answer as the run started ({_why(exc)})"
        wait = last_activity + statistics_interval + 1.0 - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            now = await _settled(self._run.broker, self._names, before, statistics_interval)
        except Exception as exc:
            return None, f"the management API did not answer after the run ({_why(exc)})"
        return now.since(before), ""

    def close(self) -> None:
        """Let go of the read made as the run started, when nothing needs it."""
        task = self._before
        if task is None:
            return
        if not task.done():
            task.cancel()
        elif not task.cancelled():
            task.exception()  # taken, so a failed read is not reported as never retrieved


async def _settled(
    broker: Broker, names: Sequence[str], before: QueueCounts, statistics_interval: float
) -> QueueCounts:
    """The counts once they add up (every message routed in acked or left), or once
    they held still for a whole statistics interval: a busy broker's statistics lag the
    run by more than an interval (a five-process test suite's read 234 routed, 179 acked,
    0 left one interval past the run, with nothing lost), and counts read too early make
    what was acked look lost. Bounded: three intervals past the first read."""
    now = await read_counts(broker, names)
    held_since = time.monotonic()
    give_up = held_since + 3 * statistics_interval
    while now.since(before).never_acked > 0 and time.monotonic() < give_up:
        if time.monotonic() - held_since >= statistics_interval:
            break  # still for a whole interval: what the broker counted
        await asyncio.sleep(min(1.0, statistics_interval / 5))
        later = await read_counts(broker, names)
        if later != now:
            now, held_since = later, time.monotonic()
    return now


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
