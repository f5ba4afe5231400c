"""The cockpit's node key: which node to kill (or start again), then a confirmation.

A node fault goes through the same code as a schedule's ``fault`` step
(``Controller.fault``), so it is recorded the same way (events, a phase named after it)
and the report's faults table shows it. Only a run on a node or cluster flowdeck runs
can take one; the screen that offers the key checks that first (:class:`FaultControl`).
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from flowdeck.collectors import LocalNodes
from flowdeck.engine import NodeFault


@runtime_checkable
class FaultControl(Protocol):
    """A run whose broker's nodes the cockpit may break: the local Controller (a run
    watched from another process through the control API is not one)."""

    @property
    def local_nodes(self) -> LocalNodes | None: ...

    def fault(self, fault: NodeFault, source: str = "operator") -> int: ...


class NodeFaultPrompt(ModalScreen[NodeFault | None]):
    """Asks which node (its number), then confirms: a running node is killed (SIGKILL, as
    a crash), a node that is down is started again on its ports and data."""

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
        Binding("n,escape", "dismiss(None)", "cancel"),
    ]

    def __init__(self, nodes: list[tuple[int, str, bool]], names: dict[str, str]) -> None:
        """``nodes``: (number, full name, running) of each node; ``names``: the short
        name to show for a full one (the node strip's)."""
        super().__init__()
        self.nodes = nodes
        self.names = names
        self.chosen: NodeFault | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._question(), id="question")

    def _question(self) -> str:
        listed = "\n".join(
            f"  {number}  {self.names.get(name, name)}  {'up' if running else 'DOWN'}"
            for number, name, running in self.nodes
        )
        return (
            "Which node? Its number kills a node that is up (SIGKILL, as a crash) or starts "
            f"one that is down again. Escape: none.\n{listed}"
        )

    def action_choose(self, number: int) -> None:
        found = [node for node in self.nodes if node[0] == number]
        if not found or self.chosen is not None:
            return
        _, name, running = found[0]
        shown = self.names.get(name, name)
        self.chosen = NodeFault("kill" if running else "start", str(number))
        if running:
            question = (
                f"Kill {shown} ({name}) with SIGKILL, as a crash? Its clients reconnect to "
                "the other nodes; its data stays for a start. (y / n)"
            )
        else:
            question = f"Start {shown} ({name}) again on its ports and data? (y / n)"
        self.query_one("#question", Label).update(question)

    def action_confirm(self) -> None:
        if self.chosen is not None:
            self.dismiss(self.chosen)
