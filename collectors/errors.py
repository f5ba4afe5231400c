"""Errors from the broker's side that an operator can act on.

The collectors never import the engine, so this is their own error type; the CLI and the
controller show its message as one line (it never contains a password).
"""

from __future__ import annotations


class SourceError(Exception):
    """A broker, management API or Prometheus server that cannot be used as given.

    Raised by checks made before a run (wrong URL, wrong credentials, a missing
    ``rabbitmq-server``) and by the private-node helper; never by a live poll, which
    returns a stale sample instead.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def short_error(exc: BaseException) -> str:
    """The first line of an exception's message (at most 160 characters), or its type."""
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:160]
