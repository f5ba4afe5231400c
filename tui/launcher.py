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


def prepare_run(spec: RunSpec, sessions_root: Path | None = None) -> PreparedRun:
    """Build the controller; start a private RabbitMQ node first when the spec has no uri.

    Blocks while a node starts (seconds): call it from a thread worker.
    """
    from engine.controller import Controller

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
    control = Controller(
        spec,
        uri=uri,
        management_url=management_url,
        prometheus_url=spec.prometheus_url or None,
        sessions_root=sessions_root,
        statistics_interval=statistics_interval,
    )
    return PreparedRun(control, broker)
