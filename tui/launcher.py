"""Turn a RunSpec into a running-ready controller, on a private node when no uri is set."""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from flowdeck.collectors import LocalBroker, Provisioner
from flowdeck.engine import RunSpec


@dataclass
class PreparedRun:
    """The controller of a run, and the private node it runs on (None: the spec's broker).
    The node belongs to the provisioner that started it, not to the run."""

    control: object  # engine.controller.Controller; typed loosely to keep imports lazy
    broker: LocalBroker | None


_fallback: Provisioner | None = None
_fallback_lock = threading.Lock()


def _process_provisioner() -> Provisioner:
    """The provisioner of callers that bring none (scripts, tests): one per process."""
    global _fallback
    with _fallback_lock:
        if _fallback is None:
            _fallback = Provisioner(name="flowdeck-cockpit")
            atexit.register(_fallback.close)
        return _fallback


def prepare_run(
    spec: RunSpec,
    sessions_root: Path | None = None,
    management_password: str | None = None,
    *,
    provisioner: Provisioner | None = None,
    cleanup: bool = False,
    spark_master: str | None = None,
    spark_listen: str = "",
    spark_cert_file: str = "",
    spark_key_file: str = "",
) -> PreparedRun:
    """Build the controller; with no uri in the spec the run goes to ``provisioner``'s
    private node, started first when it runs none (the cockpit's app owns the provisioner,
    so every launch of one session shares one node, stopped on quit; without one, this
    process's provisioner, stopped at exit). The run is recorded
    under ``sessions_root`` (default: ``$FLOWDECK_SESSIONS_DIR`` or the user's data
    directory).

    The password may come from ``FLOWDECK_PASSWORD``, the management API's from
    ``management_password`` or ``FLOWDECK_MANAGEMENT_PASSWORD`` (see engine.credentials).

    ``cleanup`` deletes the run's queues when it ends (the demo's tour: a backlog left on
    a shared broker would greet the next tour).

    ``spark_master`` (``local[N]``, ``spark://HOST:PORT``) starts the run's workers as
    Spark tasks, as ``flowdeck run --spark-master`` does (docs/spark-workers.md); None:
    local worker processes; ``spark_listen`` (HOST:PORT), ``spark_cert_file`` and
    ``spark_key_file`` as ``--spark-listen`` and its TLS flags. Checked before any node
    starts (SpecError, as ``flowdeck run`` says it).

    Blocks while a node starts (seconds): call it from a thread worker.
    """
    from flowdeck.engine import (
        Controller,
        RunRecording,
        default_sessions_root,
        resolve_broker,
        resolve_uri,
        spark_placement_of,
    )
    from flowdeck.engine import management_password as resolve_management_password

    placement = spark_placement_of(
        spark_master or "",
        spec.workers,
        listen=spark_listen,
        cert_file=spark_cert_file,
        key_file=spark_key_file,
    )
    # Every run is recorded: where the operator said, else where `flowdeck run` records.
    sessions_root = sessions_root or default_sessions_root()
    provisioner = provisioner or _process_provisioner()
    broker = resolve_broker(spec, provisioner, environ={})
    # the connect form, with FLOWDECK_PASSWORD's password if set; a private node's is guest's
    if not broker.private:
        broker = broker.with_nodes(resolve_uri(broker.uri_list))
    broker = replace(broker, management_password=resolve_management_password(management_password))
    control = Controller(
        spec,
        broker=broker,
        recording=RunRecording(sessions_root),
        cleanup=cleanup,
        workers=placement.workers if placement is not None else None,
        placement=placement,
    )
    from flowdeck.engine import ControlServer

    control.add_sink(ControlServer(control))  # flowdeck steer, runs and attach find the run
    return PreparedRun(control, provisioner.running_node if broker.private else None)
