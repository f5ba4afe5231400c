"""How flowdeck names its client connections, so the broker's lists say which are a run's.

Every connection a run's workers open carries a client-provided name (the management UI's
``user_provided_name``, the ``connection_name`` client property) of the form::

    flowdeck <run name> <run tag> w<worker> <role> <client id>

``run tag`` is a few hex digits the run draws at its start: two runs of one preset on one
broker (the shared one, say) share the run name, never the tag. The engine names its
connections with :func:`client_connection_name`; the collectors find the run's publishers
and consumers in ``/api/connections`` with :func:`run_client`. One home for the format, so
the two cannot drift.
"""

from __future__ import annotations

import re
import secrets
from typing import Literal

ClientRole = Literal["publisher", "consumer"]

_CLIENT = re.compile(r" w\d+ (publisher|consumer) (\d+)$")


def new_run_tag() -> str:
    """A run's tag: eight hex digits, drawn once per run."""
    return secrets.token_hex(4)


def client_connection_name(
    run: str, run_tag: str, worker: int, role: ClientRole, client_id: int
) -> str:
    """The name a run's client connection carries (see the module docstring)."""
    tag = f" {run_tag}" if run_tag else ""
    return f"flowdeck {run}{tag} w{worker} {role} {client_id}"


def run_client(name: str, run_tag: str) -> tuple[ClientRole, int] | None:
    """``(role, client id)`` when ``name`` is a connection of the run tagged ``run_tag``;
    None for anything else (another run's, another program's, or no tag to go by)."""
    if not run_tag or not name.startswith("flowdeck ") or f" {run_tag} w" not in name:
        return None
    found = _CLIENT.search(name)
    if found is None:
        return None
    role: ClientRole = "publisher" if found.group(1) == "publisher" else "consumer"
    return role, int(found.group(2))
