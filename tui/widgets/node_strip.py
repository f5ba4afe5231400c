"""The node strip: one line per node of a cluster, from the broker's per-node figures.

Each line says whether the node runs, its memory (share of its limit) and disk alarms,
its sockets in use (one per client connection, plus the node's own), the queue leaders it
holds and the nodes it cannot see (a partition). A node that is down is said so in red,
whichever node's management API answered: the management collector moves to a live
node's API when the one it polled dies, so the strip keeps going through a node loss.

One node is not a cluster: the strip hides itself then (the broker panel says it all).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from flowdeck.collectors import BrokerSample, NodeSample
from flowdeck.tui.model import RunHistory, human_bytes, stale_reason

#: Characters that end a node name's shared part ("flowdeck-run-4-7-n1@localhost").
_BOUNDARIES = "-@._"


def short_names(names: Sequence[str]) -> dict[str, str]:
    """Each node's name without what all of them share: ``n1`` for
    ``flowdeck-run-4-7-n1@localhost``, ``host1`` for ``rabbit@host1``; one node keeps the
    part before ``@``. The shared start and end are cut at a ``-@._`` only."""
    if len(names) < 2:
        return {name: name.split("@")[0] for name in names}
    suffix = _shared_start([name[::-1] for name in names])[::-1]
    suffix = suffix[
        min((suffix.find(m) for m in _BOUNDARIES if m in suffix), default=len(suffix)) :
    ]
    cut = [name[: len(name) - len(suffix)] for name in names]
    prefix = _shared_start(cut)
    keep = max((prefix.rfind(mark) for mark in _BOUNDARIES), default=-1) + 1
    return {name: (short[keep:] or name) for name, short in zip(names, cut, strict=True)}


def _shared_start(texts: Sequence[str]) -> str:
    """The longest start every text has, character by character."""
    first = min(texts, key=len)
    for index, char in enumerate(first):
        if any(text[index] != char for text in texts):
            return first[:index]
    return first


def node_lines(sample: BrokerSample) -> list[tuple[NodeSample, int]]:
    """Every node of the sample with the queue leaders it holds, in name order."""
    leaders: dict[str, int] = {}
    for queue in sample.queues:
        if queue.leader:
            leaders[queue.leader] = leaders.get(queue.leader, 0) + 1
    return [
        (node, leaders.get(node.name, 0)) for node in sorted(sample.nodes, key=lambda n: n.name)
    ]


class NodeStrip(Static):
    """The cluster's nodes, one line each; hidden for a single node (module docstring)."""

    DEFAULT_CSS = """
    NodeStrip {
        height: auto;
        padding: 0 1;
        display: none;
    }
    NodeStrip.-cluster {
        display: block;
    }
    NodeStrip.-stale {
        color: $text-muted;
    }
    """

    def show(self, history: RunHistory) -> None:
        """Redraw from the management API's last sample (it lists every node, the dead
        ones too), else the freshest sample of any source."""
        sample = history.broker.get("management") or history.sample
        nodes = node_lines(sample) if sample is not None else []
        self.set_class(len(nodes) > 1, "-cluster")
        if len(nodes) < 2 or sample is None:
            return
        reason = stale_reason(sample, history.now())
        self.set_class(bool(reason), "-stale")
        self.update(self._table(nodes, reason))

    def _table(self, nodes: list[tuple[NodeSample, int]], reason: str) -> Group:
        names = short_names([node.name for node, _ in nodes])
        table = Table.grid(padding=(0, 2))
        for _ in range(7):
            table.add_column(no_wrap=True)
        down = sum(not node.running for node, _ in nodes)
        for node, leaders in nodes:
            name = Text(names[node.name], style="bold")
            if not node.running:
                table.add_row(name, Text("✖ DOWN", style="bold red"), "", "", "", "", "")
                continue
            table.add_row(
                name,
                Text("● up", style="green"),
                _memory(node),
                Text("DISK ALARM", style="bold red") if node.disk_alarm else Text("disk ok"),
                f"sockets {node.sockets_used if node.sockets_used is not None else '?'}",
                f"leaders {leaders}",
                _partitions(node, names),
            )
        if reason:
            return Group(table, Text(f"stale: {reason}", style="yellow"))
        if down:
            return Group(table, Text(f"{down} of {len(nodes)} nodes down", style="red"))
        return Group(table)


def _memory(node: NodeSample) -> Text:
    if node.mem_alarm:
        return Text("MEMORY ALARM", style="bold red")
    if node.mem_used is None:
        return Text("mem ?")
    if not node.mem_limit:
        return Text(f"mem {human_bytes(node.mem_used)}")
    share = node.mem_used / node.mem_limit
    style = "yellow" if share >= 0.8 else ""
    return Text(f"mem {share:4.0%} of {human_bytes(node.mem_limit)}", style=style)


def _partitions(node: NodeSample, names: dict[str, str]) -> Text:
    if not node.partitions:
        return Text("")
    unseen = ", ".join(names.get(other, other) for other in node.partitions)
    return Text(f"PARTITIONED from {unseen}", style="bold red")
