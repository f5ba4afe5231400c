"""Small modal screens: type a change, name a phase mark, confirm a stop."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from flowdeck.engine import Change, Setting, SpecError, parse_change


class ChangePrompt(ModalScreen[Change | None]):
    """Type a change as the CLI takes it (``inflight=200``, ``publishers=+5``, ``pause``).

    The text is parsed as it is typed; an invalid change shows why under the input and
    Enter does nothing until it is fixed. Up and down walk the ``history`` of changes
    applied before (the list is the caller's, kept across prompts; a change is added
    when it is applied), as a shell does: a sweep by hand is "up, edit, Enter".
    """

    DEFAULT_CSS = """
    ChangePrompt {
        align: center middle;
    }
    ChangePrompt > Vertical {
        width: 64;
        max-width: 100%;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    ChangePrompt #problem {
        color: $error;
        height: auto;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "cancel"),
        Binding("up", "history(-1)", "earlier change", key_display="↑"),
        Binding("down", "history(1)", "later change", key_display="↓"),
    ]
    AUTO_FOCUS = "#change-input"

    def __init__(
        self,
        title: str,
        initial: str = "",
        *,
        mark: bool = False,
        history: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.initial = initial
        self.mark = mark
        self.history = history if history is not None else []
        self._position = len(self.history)  # len: the line being typed, not history
        self._draft = initial

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text)
            yield Input(value=self.initial, id="change-input")
            yield Label("", id="problem")
            hint = "Enter applies, Escape cancels"
            if self.history:
                hint += ", ↑ ↓ earlier changes"
            yield Label(hint, classes="hint")

    def action_history(self, step: int) -> None:
        """Show the change ``step`` places earlier (-1) or later (1) in the history."""
        position = min(max(self._position + step, 0), len(self.history))
        if position == self._position:
            return
        field = self.query_one("#change-input", Input)
        if self._position == len(self.history):
            self._draft = field.value
        self._position = position
        field.value = self.history[position] if position < len(self.history) else self._draft
        field.cursor_position = len(field.value)

    def parsed(self, text: str) -> Change:
        if self.mark:
            return Change(Setting.MARK, label=text.strip())
        return parse_change(text)

    @on(Input.Changed)
    def check(self, event: Input.Changed) -> None:
        problem = self.query_one("#problem", Label)
        if not event.value.strip():
            problem.update("")
            return
        try:
            self.parsed(event.value)
        except SpecError as exc:
            problem.update(exc.message)
        else:
            problem.update("")

    @on(Input.Submitted)
    def submit(self, event: Input.Submitted) -> None:
        try:
            change = self.parsed(event.value)
        except SpecError as exc:
            self.query_one("#problem", Label).update(exc.message)
            return
        text = event.value.strip()
        if not self.history or self.history[-1] != text:
            self.history.append(text)
        self.dismiss(change)


class ConfirmStop(ModalScreen[bool]):
    """Stopping ends the run for good: ask once."""

    DEFAULT_CSS = """
    ConfirmStop {
        align: center middle;
    }
    ConfirmStop > Vertical {
        width: 50;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 0 1;
    }
    ConfirmStop Horizontal {
        height: auto;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "dismiss(True)", "stop"),
        Binding("n,escape", "dismiss(False)", "keep running"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Stop the run now? (y / n)")
            with Horizontal():
                yield Button("Stop (y)", variant="error", id="yes")
                yield Button("Keep running (n)", id="no")

    @on(Button.Pressed)
    def answer(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
