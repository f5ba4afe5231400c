"""The cockpit's node key: which node to kill (or start again), then a confirmation.

A node fault goes through the same code as a schedule's ``fault`` step
(``Controller.fault``), so it is recorded the same way (events, a phase named after it)
and the report's faults table shows it. Only a run on a node or cluster flowdeck runs
can take one; the screen that offers the key checks that first
(:class:`~flowdeck.tui.source.FaultControl`).
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from flowdeck.engine import NodeFault


class NodeFaultPrompt(ModalScreen[NodeFault | None]):
    """Asks which node (its number), then confirms: a running node is killed (SIGKILL, as
    a crash), a node that is down is started again on its ports and data. On a cluster
    whose nodes run in network namespaces (``partitionable``) a running node can instead be
    cut off the network (``p``: a partition) and a cut node healed."""

    DEFAULT_CSS = """
    NodeFaultPrompt {
        align: center middle;
    }
    NodeFaultPrompt > Vertical {
        width: 72;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 0 1;
    }
    NodeFaultPrompt Label {
        width: 100%;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(str(n), f"choose({n})", show=False) for n in range(1, 10)),
        Binding("y", "confirm", "yes", show=False),
        Binding("p", "partition", "partition", show=False),
        Binding("k", "kill", "kill", show=False),
        Binding("n,escape", "dismiss(None)", "cancel"),
    ]

    def __init__(
        self,
        nodes: list[tuple[int, str, bool]],
        names: dict[str, str],
        *,
        partitionable: bool = False,
        cut: frozenset[str] = frozenset(),
    ) -> None:
        """``nodes``: (number, full name, running) of each node; ``names``: the short
        name to show for a full one (the node strip's); ``partitionable``: the nodes run in
        network namespaces; ``cut``: the full names of the nodes cut off now."""
        super().__init__()
        self.nodes = nodes
        self.names = names
        self.partitionable = partitionable
        self.cut = cut
        self.chosen: NodeFault | None = None
        #: The running node chosen on a partitionable cluster: k kills it, p cuts it off.
        self._either: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._question(), id="question")

    def _question(self) -> str:
        listed = "\n".join(
            f"  {number}  {self.names.get(name, name)}  {self._state(name, running)}"
            for number, name, running in self.nodes
        )
        if self.partitionable:
            return (
                "Which node? Its number, then: a node that is up is killed (SIGKILL, as a "
                "crash) or cut off the network (a partition); a cut node is healed; a node "
                f"that is down is started again. Escape: none.\n{listed}"
            )
        return (
            "Which node? Its number kills a node that is up (SIGKILL, as a crash) or starts "
            f"one that is down again. Escape: none.\n{listed}"
        )

    def _state(self, name: str, running: bool) -> str:
        if name in self.cut:
            return "CUT OFF"
        return "up" if running else "DOWN"

    def action_choose(self, number: int) -> None:
        found = [node for node in self.nodes if node[0] == number]
        if not found or self.chosen is not None or self._either is not None:
            return
        _, name, running = found[0]
        shown = self.names.get(name, name)
        if name in self.cut:
            self.chosen = NodeFault("heal", str(number))
            question = (
                f"Heal {shown} ({name}): put it back on the cluster's network, to rejoin? (y / n)"
            )
            self.query_one("#question", Label).update(question)
            return
        if running and self.partitionable:
            self._either = str(number)
            question = (
                f"{shown} ({name}): k kills it with SIGKILL (a crash; its clients reconnect to "
                "the others), p cuts it off the network (a partition: it runs on alone, its "
                "clients wait for their heartbeat). (k / p / n)"
            )
            self.query_one("#question", Label).update(question)
            return
        self.chosen = NodeFault("kill" if running else "start", str(number))
        if running:
            question = (
                f"Kill {shown} ({name}) with SIGKILL, as a crash? Its clients reconnect to "
                "the other nodes; its data stays for a start. (y / n)"
            )
        else:
            question = f"Start {shown} ({name}) again on its ports and data? (y / n)"
        self.query_one("#question", Label).update(question)

    def action_kill(self) -> None:
        if self._either is not None:
            self.dismiss(NodeFault("kill", self._either))

    def action_partition(self) -> None:
        if self._either is not None:
            self.dismiss(NodeFault("partition", self._either))

    def action_confirm(self) -> None:
        if self.chosen is not None:
            self.dismiss(self.chosen)
