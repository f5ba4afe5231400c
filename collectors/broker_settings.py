"""The broker-side settings flowdeck sets on nodes it runs: one row each.

The seed's levers on the broker's side of flow control (its RabbitMQ 3.8.3 section: the
credit flow credit, quorum queues' command soft limit) and the statistics interval are
``rabbit`` application settings. flowdeck sets them on a private node or cluster it runs:
at its start (``flowdeck broker start --set KEY=VALUE``, written to the node's
``advanced.config``), and live (a ``broker.KEY=VALUE`` change, by
``application:set_env`` through ``rabbitmqctl eval``, kept for the node's next start too).

A live change does not reach everything at once: each of these settings is read by a
broker process when it starts or first uses it, and kept for its life. Found on RabbitMQ
3.10.8 by reading the processes' own state back (``rabbitmqctl eval`` of their process
dictionaries and ``sys:get_state``) before and after ``set_env`` (docs/collectors.md):

* ``credit_flow_default_credit``: each connection's reader, each channel and each queue
  process caches it the first time it uses credit flow. New connections and channels take
  a new value; open connections and existing queues keep theirs. A credit smaller than a
  queue's own "more credit after" stalls every new publisher into that queue (it never
  grants credit to a sender that has run out first): only a node restart applies it to the
  whole run.
* ``quorum_commands_soft_limit``: read per channel when it first sends to a quorum queue;
  new channels take it, so a reconnect applies it.
* ``collect_statistics_interval``: read by each connection, channel and queue process when
  it starts its statistics timer; new connections and channels take it at once, queues at
  their next start.

Values are Erlang terms, checked and written in one canonical form here, so nothing else
ever builds a term from what an operator typed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from flowdeck.collectors.errors import SourceError

#: What applies a live change to the whole run: its clients reconnecting, or the nodes
#: starting again (queues included).
AppliedBy = Literal["reconnect", "restart"]

_INTEGER = re.compile(r"\s*(\d+)\s*")
_PAIR = re.compile(r"\s*\{?\s*(\d+)\s*,\s*(\d+)\s*\}?\s*")


def _whole(low: int, high: int, unit: str = "") -> Callable[[str, str], str]:
    def parse(key: str, text: str) -> str:
        found = _INTEGER.fullmatch(text)
        value = int(found.group(1)) if found else None
        if value is None or not low <= value <= high:
            raise SourceError(
                f"{key} must be a whole number {low}..{high}{unit}, got {text.strip()!r}"
            )
        return str(value)

    return parse


def _credit(key: str, text: str) -> str:
    found = _PAIR.fullmatch(text)
    if found is None:
        raise SourceError(
            f"{key} is {{InitialCredit,MoreCreditAfter}} such as {{400,200}} or the seed's "
            f"{{100,50}}, got {text.strip()!r}"
        )
    initial, more_after = int(found.group(1)), int(found.group(2))
    if not 1 <= more_after <= initial <= 1_000_000:
        raise SourceError(
            f"{key} {{{initial},{more_after}}}: the credit after which more is granted must "
            "be 1..InitialCredit (a sender out of credit before its receiver grants more "
            "waits for ever); e.g. {400,200}"
        )
    return f"{{{initial},{more_after}}}"


@dataclass(frozen=True, slots=True)
class BrokerSetting:
    """One ``rabbit`` application setting flowdeck sets on nodes it runs."""

    key: str
    help: str
    #: RabbitMQ 3.10.8's value when nothing sets it, as the node says it.
    default: str
    example: str
    #: Who takes a live change at once (said in the change's answer and the docs).
    reaches: str
    #: What applies a live change to the whole run.
    applied_by: AppliedBy
    parse: Callable[[str, str], str]

    def term(self, text: str) -> str:
        """``text`` as the canonical Erlang term; SourceError saying what is wanted."""
        return self.parse(self.key, text)


BROKER_SETTINGS: tuple[BrokerSetting, ...] = (
    BrokerSetting(
        "credit_flow_default_credit",
        "credit flow between a connection's reader, its channels and the queues: "
        "{InitialCredit,MoreCreditAfter} messages",
        default="{400,200}",
        example="{100,50}",
        reaches="new connections and channels; open connections and existing queues keep "
        "the credit they started with",
        applied_by="restart",
        parse=_credit,
    ),
    BrokerSetting(
        "quorum_commands_soft_limit",
        "commands a channel may have in flight to one quorum queue before it applies "
        "back-pressure (credit flow) to its publisher",
        default="32",
        example="256",
        reaches="channels that send to a quorum queue for the first time (new connections)",
        applied_by="reconnect",
        parse=_whole(1, 1_000_000),
    ),
    BrokerSetting(
        "collect_statistics_interval",
        "how often connections, channels and queues emit their statistics, ms",
        default="5000",
        example="1000",
        reaches="new connections and channels at once; queues at their next start",
        applied_by="reconnect",
        parse=_whole(100, 3_600_000, " ms"),
    ),
)

BY_KEY: Mapping[str, BrokerSetting] = {row.key: row for row in BROKER_SETTINGS}
#: The word a live change starts with (``broker.KEY=VALUE``), and the one that reconnects
#: the run's clients so their new connections take the settings in force.
CHANGE_PREFIX = "broker."
RECONNECT = "reconnect"


def broker_setting(key: str) -> BrokerSetting:
    """The row of ``key`` (``rabbit.`` in front is allowed); SourceError naming the known."""
    name = key.strip().removeprefix("rabbit.")
    row = BY_KEY.get(name)
    if row is None:
        known = ", ".join(BY_KEY)
        raise SourceError(f"unknown broker setting {key.strip()!r}; flowdeck sets: {known}")
    return row


def parse_assignment(text: str) -> tuple[BrokerSetting, str]:
    """``KEY=VALUE`` as (its row, the canonical Erlang term); SourceError saying why not."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise SourceError(
            f"a broker setting is KEY=VALUE such as credit_flow_default_credit={{100,50}}, "
            f"got {text.strip()!r}"
        )
    row = broker_setting(key)
    return row, row.term(value)
