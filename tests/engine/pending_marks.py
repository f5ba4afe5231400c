"""Each publisher's pending confirms right after each of its sends: the window in force, as
the client holds it (a once-a-second tick also counts what was sent under an older window
and is not yet confirmed)."""

from __future__ import annotations

from typing import Any, Protocol

import pytest


class _Sends(Protocol):
    def _send(self, count: int, now: int) -> None: ...


def pending_after_sends(
    monkeypatch: pytest.MonkeyPatch, client: type[_Sends]
) -> list[tuple[float, int, int]]:
    """(loop time, publisher id, pending confirms) after every send of a ``client`` made
    from now on in this test."""
    marks: list[tuple[float, int, int]] = []
    send = client._send

    def _send(self: Any, count: int, now: int) -> None:
        send(self, count, now)
        marks.append((self.loop.time(), self.publisher_id, self.pending_confirms))

    monkeypatch.setattr(client, "_send", _send)
    return marks
