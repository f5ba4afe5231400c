"""Errors the operator can act on.

Every error raised for bad input names the field, the value and what is allowed, so the
CLI and the TUI can show it as one line without a traceback.
"""

from __future__ import annotations


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
