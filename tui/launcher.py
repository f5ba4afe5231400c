"""Turn a RunSpec into a running-ready controller, on a private node when no uri is set."""

from __future__ import annotations

import atexit
from dataclasses import dataclass
from pathlib import Path

from collectors import LocalBroker
from engine.spec import RunSpec


@dataclass
class PreparedRun:
    """The controller of a run, and the private node it runs on (None: the spec's broker)."""

    control: object  # engine.controller.Controller; typed loosely to keep imports lazy
    broker: LocalBroker | None


def prepare_run(
    spec: RunSpec, sessions_root: Path | None = None, management_password: str | None = None
) -> PreparedRun:
    """Build the controller; start a private RabbitMQ node first when the spec has no uri.
    The run is recorded under ``sessions_root`` (default: ``$FLOWDECK_SESSIONS_DIR`` or the
    user's data directory).

    The password may come from ``FLOWDECK_PASSWORD``, the management API's from
    ``management_password`` or ``FLOWDECK_MANAGEMENT_PASSWORD`` (see engine.credentials).

    Blocks while a node starts (seconds): call it from a thread worker.
    """
    from engine.controller import Controller
    from engine.credentials import management_password as resolve_management_password
    from engine.credentials import resolve_uri
    from engine.recording.recorder import default_sessions_root

    # Every run is recorded: where the operator said, else where `flowdeck run` records.
    sessions_root = sessions_root or default_sessions_root()
    broker = None
    uri = spec.uri
    management_url = spec.management_url or None
    statistics_interval = None
    if not uri:
        broker = LocalBroker(name="flowdeck-cockpit").start()
        atexit.register(broker.stop)
        uri = broker.uri
        management_url = broker.management_url
        statistics_interval = broker.stats_interval_ms / 1000
    elif not management_url:
        from tui.cli.broker import started_node_for

        node = started_node_for(uri)
        if node is not None:  # `flowdeck broker start`'s node: its own management URL
            management_url = node.management_url
            statistics_interval = node.stats_interval_ms / 1000
    if broker is None:
        uri = resolve_uri(uri)  # the connect form, with FLOWDECK_PASSWORD's password if set
    control = Controller(
        spec,
        uri=uri,
        management_url=management_url,
        management_password=resolve_management_password(management_password),
        prometheus_url=spec.prometheus_url or None,
        sessions_root=sessions_root,
        statistics_interval=statistics_interval,
    )
    return PreparedRun(control, broker)
