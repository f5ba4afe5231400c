"""Broker changes while a run goes: ``broker.KEY=VALUE`` and ``broker.reconnect``.

A broker change is a :class:`~flowdeck.engine.change.Change` like any other (the cockpit's
prompt, ``flowdeck steer``, the control API and a schedule step all give one) and opens a
phase like any other, so the report sweeps broker settings as it sweeps in-flight. Only
its target differs: not the workers' clients but the nodes of a broker flowdeck runs (a
private node or cluster, or the one ``flowdeck broker start`` left), through
:class:`~flowdeck.collectors.LocalNodes`.

The controller asks :meth:`BrokerChanges.check` before it takes the change: on a broker
flowdeck does not run it is refused in one line, nothing changed. Then
:meth:`BrokerChanges.apply` sets the setting on every running node on a thread
(``rabbitmqctl eval``, about a second a node) and says what it did: the value on each node
before and read back after, who takes it at once, and what applies it to the whole run,
offered in the words the operator types (``broker.reconnect``, or ``fault restart N`` for
the credit-flow credit, which queues keep until they start again). The controller opens
the change's phase once the nodes have it.

``broker.reconnect`` closes the run's client connections on every node (told by the run's
tag in their names); the workers reconnect with back-off, and their new connections and
channels take the settings in force.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flowdeck.collectors import Broker, LocalNodes, SourceError
from flowdeck.collectors.broker_settings import RECONNECT, BrokerSetting, broker_setting
from flowdeck.engine.change import Change, Setting, broker_assignment
from flowdeck.engine.errors import SpecError
from flowdeck.engine.spec import ScheduleStep

__all__ = ["BrokerChangeDone", "BrokerChanges"]


@dataclass(frozen=True, slots=True)
class BrokerChangeDone:
    """What a broker change did: whether the nodes took it, one line for the operator and
    the event's detail."""

    taken: bool
    message: str
    detail: dict[str, Any] = field(default_factory=dict)


class BrokerChanges:
    """Applies a run's broker changes to the nodes of ``broker``; see the module docstring.
    ``run_tag`` is the tag in the run's connection names (``broker.reconnect``)."""

    def __init__(self, broker: Broker, run_tag: str) -> None:
        self.broker = broker
        self.run_tag = run_tag

    def check(self, change: Change) -> None:
        """Refuse a broker change on a broker flowdeck does not run (SpecError, one line;
        nothing is changed)."""
        if change.setting is Setting.BROKER and self.broker.local is None:
            raise SpecError(
                "broker",
                f"{change.describe()} refused: {self.broker.redacted} is not a node flowdeck "
                "runs, so nothing was changed; set broker settings on a private node or "
                "cluster (flowdeck broker start --set KEY=VALUE, or a run without --uri)",
            )

    def check_schedule(self, steps: Sequence[ScheduleStep]) -> None:
        """Refuse a schedule with broker steps the broker cannot take, before anything
        starts."""
        for step in steps:
            try:
                self.check(step.change)
            except SpecError as exc:
                raise SpecError(
                    "schedule", f"schedule step at {step.at:g} s: {exc.message}"
                ) from None

    async def apply(self, change: Change) -> BrokerChangeDone:
        """Set the change on every running node (on a thread); never raises for the
        broker's trouble: a change not taken says why."""
        local = self.broker.local
        assert local is not None, "check() refuses a broker change on a broker not run here"
        if change.label == RECONNECT:
            return await self._reconnect(local)
        row, term = broker_assignment(change.label)
        try:
            done = await asyncio.to_thread(local.set_broker_setting, row.key, term)
        except SourceError as exc:
            return BrokerChangeDone(
                False,
                f"{change.describe()} not set: {exc}",
                {"broker_setting": row.key, "value": term, "stage": "failed"},
            )
        nodes = f"{len(done.after)} node{'s' if len(done.after) != 1 else ''}"
        before = sorted({value or row.default for value in done.before.values()})
        detail: dict[str, Any] = {
            "broker_setting": row.key,
            "value": term,
            "before": dict(done.before),
            "after": dict(done.after),
            "took_s": round(done.took, 3),
            "applied_by": row.applied_by,
            "offer": self._offer(row),
            "stage": "done" if done.taken else "not taken",
        }
        if not done.taken:
            read = ", ".join(f"{node} {value or 'unset'}" for node, value in done.after.items())
            return BrokerChangeDone(
                False, f"{change.describe()} not taken: the nodes read back {read}", detail
            )
        return BrokerChangeDone(
            True,
            f"{change.describe()} set on {nodes} (was {', '.join(before)}) in "
            f"{done.took:.1f} s: {row.reaches}. {self._advice(row, term, before)}",
            detail,
        )

    async def _reconnect(self, local: LocalNodes) -> BrokerChangeDone:
        reason = "flowdeck: broker.reconnect, so the run's clients take the broker settings"
        try:
            closed = await asyncio.to_thread(local.close_connections, self.run_tag, reason)
        except SourceError as exc:
            return BrokerChangeDone(False, f"broker.reconnect failed: {exc}", {"stage": "failed"})
        total = sum(closed.values())
        nodes = len(closed)
        return BrokerChangeDone(
            True,
            f"broker.reconnect: closed {total} of the run's connections on {nodes} "
            f"node{'s' if nodes != 1 else ''}; the clients reconnect with back-off and their "
            "new connections take the broker settings in force",
            {"reconnect": True, "closed": dict(closed), "stage": "done"},
        )

    def _offer(self, row: BrokerSetting) -> str:
        """What applies a setting to the whole run, as the operator types it."""
        if row.applied_by == "reconnect":
            return f"broker.{RECONNECT}"
        local = self.broker.local
        count = len(local.nodes) if local is not None else 1
        return ", ".join(f"fault restart {number}" for number in range(1, count + 1))

    def _advice(self, row: BrokerSetting, term: str, before: Sequence[str]) -> str:
        """What the operator does next for the whole run to have it."""
        if row.applied_by == "reconnect":
            return f"The run's clients take it when they reconnect: {self._offer(row)}"
        advice = (
            "The run's queues keep theirs until they start again: restart the node(s) to "
            f"apply it to the whole run ({self._offer(row)})"
        )
        if row.key == "credit_flow_default_credit" and _stalls(term, before):
            advice += (
                "; until then a publisher that reconnects into one of the run's queues "
                "stalls in flow (the queue grants more credit only after more messages than "
                "the new credit lets it send)"
            )
        return advice


def _stalls(term: str, before: Sequence[str]) -> bool:
    """A credit ``{Initial,_}`` smaller than a queue's kept ``{_,MoreCreditAfter}``."""
    row = broker_setting("credit_flow_default_credit")

    def pair(text: str) -> tuple[int, int]:
        initial, more_after = row.term(text).strip("{}").split(",")
        return int(initial), int(more_after)

    initial = pair(term)[0]
    return any(initial < pair(old)[1] for old in before)
