"""The private nodes a run may break on purpose: one node of a cluster killed, stopped,
started or restarted mid-run, or cut off the others by a network partition and healed.

A node-loss drill needs a broker flowdeck runs itself: its nodes are processes on this
machine that flowdeck can SIGKILL and start again on the same ports and data. A
:class:`LocalNodes` holds such a node or cluster (a private one a run or the cockpit
started through a Provisioner, or the one ``flowdeck broker start`` left running) and is
what a schedule's ``fault`` step and the cockpit's kill key both act through. A broker
that is not flowdeck's (a remote URI) has none, and a fault on it is refused.

A partition (``partition 3``, then ``heal 3``) needs a cluster whose nodes run in network
namespaces (``LocalCluster(isolated=True)``, ``flowdeck broker start --nodes 3
--namespaces``): the node keeps running, but its link to the others and to the clients is
down until it is healed.

Starting a node takes seconds: :meth:`LocalNodes.apply` blocks, so callers on an event
loop run it on a thread. One fault runs at a time (``kill 2`` then ``start 2`` queue up).

The same handle sets broker settings on the running nodes while a run goes
(:meth:`LocalNodes.set_broker_setting`, collectors/broker_settings.py) and closes a run's
client connections so they reconnect and take them (:meth:`LocalNodes.close_connections`);
both block for the ``rabbitmqctl`` calls too (about a second each).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from flowdeck.collectors.broker_settings import broker_setting
from flowdeck.collectors.errors import SourceError

if TYPE_CHECKING:  # the node's code loads when a fault is run, not for FAULT_ACTIONS
    from typing_extensions import TypeIs

    from flowdeck.collectors.local_broker import LocalBroker, LocalCluster


def _is_cluster(held: LocalBroker | LocalCluster) -> TypeIs[LocalCluster]:
    from flowdeck.collectors.local_broker import LocalCluster

    return isinstance(held, LocalCluster)


FaultAction = Literal["kill", "stop", "start", "restart", "partition", "heal"]
#: What a fault does to its node, in the words operators type.
FAULT_ACTIONS: tuple[FaultAction, ...] = ("kill", "stop", "start", "restart", "partition", "heal")
#: The faults that cut a node's network rather than stop or start its process.
NETWORK_FAULTS: tuple[FaultAction, ...] = ("partition", "heal")


@dataclass(frozen=True, slots=True)
class FaultDone:
    """What one fault did: its node's full name, whether it changed anything, how long it
    took (seconds) and one line for the operator."""

    action: FaultAction
    ref: str
    nodename: str
    changed: bool
    took: float
    message: str


@dataclass(frozen=True, slots=True)
class BrokerSettingDone:
    """One broker setting set on every running node: its value on each node before and as
    read back after (``""``: not set, RabbitMQ's default in force), and how long it took."""

    key: str
    term: str
    before: Mapping[str, str]
    after: Mapping[str, str]
    took: float

    @property
    def taken(self) -> bool:
        """Every node reads the new value back."""
        return bool(self.after) and all(value == self.term for value in self.after.values())


#: What a run's tag may hold (it goes into an Erlang binary: hex digits only).
_TAG = re.compile(r"[0-9a-f]{4,32}")


class LocalNodes:
    """A private node or cluster flowdeck runs, for node faults; see the module docstring.

    ``detached``: the nodes belong to the user (``flowdeck broker start``), so a node this
    process starts again is left running after it exits, as ``flowdeck broker start NODE``
    leaves it; otherwise a started node stays owned by this process and dies with it.
    ``on_change`` runs after every fault that changed a node (``broker start`` keeps its
    state file up to date there: a restarted node has a new pid).
    """

    def __init__(
        self,
        nodes: LocalBroker | LocalCluster,
        *,
        detached: bool = False,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._held = nodes
        self.detached = detached
        self._on_change = on_change
        self._lock = threading.Lock()

    @property
    def nodes(self) -> tuple[LocalBroker, ...]:
        held = self._held
        return tuple(held.nodes) if _is_cluster(held) else (held,)

    @property
    def can_partition(self) -> bool:
        """True when the nodes run in network namespaces of their own, so a node's link can
        be cut (``partition``) and restored (``heal``)."""
        held = self._held
        return _is_cluster(held) and held.isolated

    def cut_off(self) -> frozenset[str]:
        """The full names of the nodes whose link is cut now (none on loopback)."""
        held = self._held
        return frozenset(held.cut_off()) if _is_cluster(held) else frozenset()

    @property
    def name(self) -> str:
        """The cluster's name, or the single node's."""
        held = self._held
        return str(held.name) if _is_cluster(held) else held.nodename

    def find(self, ref: str) -> LocalBroker:
        """The node ``ref`` names: its number (``2``), ``n2``, or its name with or without
        ``@host``. SourceError naming the nodes there are when none is called so."""
        held = self._held
        if _is_cluster(held):
            found = held.find_node(ref)
        else:
            found = held if ref in ("1", held.nodename, held.nodename.split("@")[0]) else None
        if found is not None:
            return found
        names = ", ".join(f"{n} ({node.nodename})" for n, node in enumerate(self.nodes, 1))
        raise SourceError(f"no node {ref!r} in {self.name}; it has {names}")

    def number_of(self, nodename: str) -> int | None:
        """The node's number (1, 2, ...) by its full name; None when it is not one of these."""
        for number, node in enumerate(self.nodes, 1):
            if node.nodename == nodename:
                return number
        return None

    def apply(self, action: FaultAction, ref: str) -> FaultDone:
        """Do ``action`` to node ``ref`` and wait until it is done (a start: until the node
        answers and has rejoined; a partition or heal: until its link is down or up).
        SourceError when the node is unknown or will not start, or for a partition on
        nodes that share loopback; a node already in the state asked for is left as it is
        (``changed`` false)."""
        if action not in FAULT_ACTIONS:
            raise SourceError(f"unknown node fault {action!r}; use one of {FAULT_ACTIONS}")
        node = self.find(ref)
        with self._lock:
            began = time.monotonic()
            changed = self._do(action, node)
            took = time.monotonic() - began
            if changed and self._on_change is not None:
                self._on_change()
        return FaultDone(
            action, ref, node.nodename, changed, took, _said(action, node, changed, took)
        )

    def broker_setting(self, key: str) -> dict[str, str]:
        """``key``'s value on each running node, as the node has it (``""``: not set)."""
        row = broker_setting(key)
        return {
            node.nodename: _env_value(
                node.rabbitmqctl("eval", f"application:get_env(rabbit, {row.key}).")
            )
            for node in self.nodes
            if node.running
        }

    def set_broker_setting(self, key: str, value: str) -> BrokerSettingDone:
        """Set broker setting ``key`` to ``value`` on every running node (``set_env``),
        read it back, and keep it for the nodes' next start (their ``advanced.config``).
        SourceError for an unknown key, a value it cannot take, or no node running.
        Who takes it at once is the setting's (``BrokerSetting.reaches``)."""
        row = broker_setting(key)
        term = row.term(value)
        with self._lock:
            running = [node for node in self.nodes if node.running]
            if not running:
                raise SourceError(f"no node of {self.name} is running: nothing to set")
            began = time.monotonic()
            # one call per node: the value before, the change, the value read back
            setting = (
                f'lists:flatten(io_lib:format("~w|~w", [application:get_env(rabbit, {row.key}), '
                f"begin application:set_env(rabbit, {row.key}, {term}), "
                f"application:get_env(rabbit, {row.key}) end]))."
            )
            before: dict[str, str] = {}
            after: dict[str, str] = {}
            for node in running:
                said = node.rabbitmqctl("eval", setting).strip().strip('"')
                was, _, now = said.partition("|")
                before[node.nodename], after[node.nodename] = _env_value(was), _env_value(now)
            for node in self.nodes:
                node.rabbit_settings[row.key] = term
                if row.key == "collect_statistics_interval":
                    node.stats_interval_ms = int(term)
            if self._on_change is not None:
                self._on_change()
            return BrokerSettingDone(row.key, term, before, after, time.monotonic() - began)

    def close_connections(self, run_tag: str, reason: str) -> dict[str, int]:
        """Close, on every running node, the client connections whose name carries
        ``run_tag`` (collectors/client_names.py), telling them ``reason``; how many each
        node closed. The clients reconnect by themselves."""
        if not _TAG.fullmatch(run_tag):
            raise SourceError(f"a run's tag is hex digits, got {run_tag!r}")
        said = reason.replace("\\", "").replace('"', "'")
        name_has_tag = (
            'case lists:keyfind(<<"connection_name">>, 1, Props) of '
            '{_, longstr, N} -> binary:match(N, <<" ' + run_tag + ' w">>) =/= nomatch; '
            "_ -> false end"
        )
        closing = (
            'length([rabbit_networking:close_connection(P, "' + said + '") || '
            "P <- rabbit_networking:connections_local(), "
            "case catch rabbit_reader:info(P, [client_properties]) of "
            "[{client_properties, Props}] -> " + name_has_tag + "; _ -> false end])."
        )
        closed: dict[str, int] = {}
        with self._lock:
            for node in self.nodes:
                if node.running:
                    answer = node.rabbitmqctl("eval", closing).strip()
                    closed[node.nodename] = int(answer) if answer.isdigit() else 0
        return closed

    def _do(self, action: FaultAction, node: LocalBroker) -> bool:
        if action in NETWORK_FAULTS:
            held = self._held
            if not _is_cluster(held):
                raise SourceError(
                    f"{node.nodename} is a single node: a partition needs a cluster whose "
                    "nodes run in network namespaces (flowdeck broker start --nodes 3 "
                    "--namespaces)"
                )
            if action == "partition":
                return held.partition(node.nodename)
            return held.heal(node.nodename)
        if action in ("kill", "stop"):
            if not node.running:
                return False
            if action == "kill":
                node.kill()
            else:
                node.stop(cleanup=False)
            return True
        if action == "start" and node.running:
            return False
        try:
            if action == "restart":
                node.restart()
            else:
                node.start()
        except SourceError:
            node.kill()  # whatever booted; the data stays for another try
            raise
        if self.detached:
            node.detach()
        return True


def _env_value(answer: str) -> str:
    """What ``application:get_env`` printed, as a term without spaces (``""``: unset)."""
    text = "".join(answer.split())
    if text.startswith("{ok,") and text.endswith("}"):
        return text[4:-1]
    return ""


def _said(action: FaultAction, node: LocalBroker, changed: bool, took: float) -> str:
    name = node.nodename
    if action == "partition":
        if not changed:
            return f"{name} is cut off already"
        return f"{name} cut off the cluster's network (it runs on, alone); heal it to rejoin"
    if action == "heal":
        if not changed:
            return f"{name} was not cut off"
        return f"{name} back on the cluster's network"
    if not changed:
        return f"{name} is {'already running' if action == 'start' else 'not running'}"
    if action == "kill":
        return f"{name} killed (SIGKILL to its Erlang VM, as a crash); its data stays"
    if action == "stop":
        return f"{name} stopped cleanly in {took:.1f} s; its data stays"
    again = "restarted" if action == "restart" else "started again"
    return f"{name} {again} on its ports and data in {took:.1f} s"
