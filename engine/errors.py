"""Errors the operator can act on.

Every error raised for bad input names the field, the value and what is allowed, so the
CLI and the TUI can show it as one line without a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable


def did_you_mean(word: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean 'x'?)`` naming the ``known`` word closest to ``word`` (difflib's
    ratio at least ``cutoff``), or ``""`` when none is close: for every "unknown name"
    message (presets, flags, settings, session ids, commands)."""
    import difflib

    close = difflib.get_close_matches(word, list(known), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]!r}?)" if close and close[0] != word else ""


class FlowdeckError(Exception):
    """Base of every error flowdeck reports to an operator as a plain message."""


class SpecError(FlowdeckError):
    """A run spec, a change or a CLI flag that cannot be accepted.

    ``field`` names the offending setting (``prefetch``, ``schedule[2].at``) so a form can
    show the message next to the right input.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class BrokerUnavailable(FlowdeckError):
    """The broker cannot be reached or refuses us; the message says what to check."""
