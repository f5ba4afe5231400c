"""The control endpoint of a run: how anything outside the process watches and steers it.

:class:`ControlServer` serves one run (a sink of its controller) over HTTP JSON with a
token; the registry writes where it listens so ``flowdeck steer``, ``runs`` and ``attach``
find it; :class:`ControlClient` talks to it, and :class:`RemoteRun` is a run elsewhere
as the cockpit drives one (``flowdeck attach``). docs/control-api.md describes the API.

Names load on first use: checking ``--control`` or listing runs does not load the
server's HTTP library.
"""

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from flowdeck.engine.control.address import (
        ControlAddress,
        check_exposure,
        parse_control_address,
        server_tls_context,
    )
    from flowdeck.engine.control.client import (
        ControlClient,
        ControlRefused,
        Endpoint,
        endpoint_for,
    )
    from flowdeck.engine.control.registry import (
        RUNS_DIR_ENV,
        RunEntry,
        UnsafeRunsDir,
        check_runs_dir,
        find_run,
        running_runs,
        runs_dir,
    )
    from flowdeck.engine.control.remote import RemoteRun
    from flowdeck.engine.control.server import ControlServer
    from flowdeck.engine.control.wire import MAX_CHANGES

_LAZY: dict[str, str] = {
    "MAX_CHANGES": "wire",
    "ControlAddress": "address",
    "ControlClient": "client",
    "ControlRefused": "client",
    "ControlServer": "server",
    "Endpoint": "client",
    "RUNS_DIR_ENV": "registry",
    "RemoteRun": "remote",
    "RunEntry": "registry",
    "UnsafeRunsDir": "registry",
    "check_runs_dir": "registry",
    "check_exposure": "address",
    "endpoint_for": "client",
    "find_run": "registry",
    "parse_control_address": "address",
    "running_runs": "registry",
    "runs_dir": "registry",
    "server_tls_context": "address",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flowdeck.engine.control' has no attribute {name!r}")
    return getattr(importlib.import_module(f"flowdeck.engine.control.{module}"), name)


__all__ = [
    "MAX_CHANGES",
    "RUNS_DIR_ENV",
    "ControlAddress",
    "ControlClient",
    "ControlRefused",
    "ControlServer",
    "Endpoint",
    "RemoteRun",
    "RunEntry",
    "UnsafeRunsDir",
    "check_exposure",
    "check_runs_dir",
    "endpoint_for",
    "find_run",
    "parse_control_address",
    "running_runs",
    "runs_dir",
    "server_tls_context",
]
