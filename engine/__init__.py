"""flowdeck's load engine: specs, changes, workers, the controller and the recorder.

Other parts use what this module exports. It never imports Textual.
"""

import importlib

from flowdeck.engine.change import Change, Setting, format_number, parse_change
from flowdeck.engine.errors import BrokerUnavailable, FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.presets import DEFAULT_PRESET, PRESETS, preset
from flowdeck.engine.progress import DataSafety, PendingChange, Percentiles, RunSummary, Tick
from flowdeck.engine.settings import (
    BY_SETTING,
    COMMANDS,
    STEERABLE,
    SteerableSetting,
    SteeringCommand,
    Step,
    setting_value,
)
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings, WorkerReport
from flowdeck.engine.spec import FIELDS, RunSpec, ScheduleStep, load_spec_file, spec_from_mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from flowdeck.engine.amqp.connection import connect
    from flowdeck.engine.controller import Controller
    from flowdeck.engine.credentials import URI_ENV, broker_uri, management_password, resolve_uri
    from flowdeck.engine.latency import LatencyKind, SendBasis
    from flowdeck.engine.metrics_endpoint import MetricsEndpoint
    from flowdeck.engine.perftest import spec_from_perftest
    from flowdeck.engine.recording import format as session_format
    from flowdeck.engine.recording.reader import (
        Session,
        SessionInfo,
        SessionNotFound,
        delete_session,
        export_csv,
        find_session,
        list_sessions,
        open_session,
        open_session_by_id,
    )
    from flowdeck.engine.recording.recorder import SESSIONS_DIR_ENV, default_sessions_root
    from flowdeck.engine.sinks import Listener, NullSink, Update
    from flowdeck.engine.tls import (
        INSECURE_WARNING,
        TlsOptions,
        http_context,
        tls_options,
        with_tls_options,
    )
    from flowdeck.engine.topology import UNCHECKED_CONNECTIONS_LIMIT

#: What the engine offers beyond its light core, loaded on first use: the controller pulls in
#: the AMQP and HTTP clients, sessions pull in pyarrow, so `import flowdeck.engine` (the
#: CLI's parsing, the cockpit's launch form) stays quick.
_LAZY: dict[str, str] = {
    "Controller": "flowdeck.engine.controller",
    "INSECURE_WARNING": "flowdeck.engine.tls",
    "LatencyKind": "flowdeck.engine.latency",
    "Listener": "flowdeck.engine.sinks",
    "MetricsEndpoint": "flowdeck.engine.metrics_endpoint",
    "NullSink": "flowdeck.engine.sinks",
    "SESSIONS_DIR_ENV": "flowdeck.engine.recording.recorder",
    "SendBasis": "flowdeck.engine.latency",
    "Session": "flowdeck.engine.recording.reader",
    "SessionInfo": "flowdeck.engine.recording.reader",
    "SessionNotFound": "flowdeck.engine.recording.reader",
    "TlsOptions": "flowdeck.engine.tls",
    "UNCHECKED_CONNECTIONS_LIMIT": "flowdeck.engine.topology",
    "URI_ENV": "flowdeck.engine.credentials",
    "Update": "flowdeck.engine.sinks",
    "broker_uri": "flowdeck.engine.credentials",
    "connect": "flowdeck.engine.amqp.connection",
    "default_sessions_root": "flowdeck.engine.recording.recorder",
    "delete_session": "flowdeck.engine.recording.reader",
    "export_csv": "flowdeck.engine.recording.reader",
    "find_session": "flowdeck.engine.recording.reader",
    "http_context": "flowdeck.engine.tls",
    "list_sessions": "flowdeck.engine.recording.reader",
    "management_password": "flowdeck.engine.credentials",
    "open_session": "flowdeck.engine.recording.reader",
    "open_session_by_id": "flowdeck.engine.recording.reader",
    "resolve_uri": "flowdeck.engine.credentials",
    "spec_from_perftest": "flowdeck.engine.perftest",
    "tls_options": "flowdeck.engine.tls",
    "with_tls_options": "flowdeck.engine.tls",
}


def __getattr__(name: str) -> object:
    if name == "session_format":
        return importlib.import_module("flowdeck.engine.recording.format")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flowdeck.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "BY_SETTING",
    "COMMANDS",
    "DEFAULT_PRESET",
    "FIELDS",
    "INSECURE_WARNING",
    "PRESETS",
    "SESSIONS_DIR_ENV",
    "STEERABLE",
    "UNCHECKED_CONNECTIONS_LIMIT",
    "URI_ENV",
    "BrokerUnavailable",
    "Change",
    "ClientSnapshot",
    "Controller",
    "Counters",
    "DataSafety",
    "EventKind",
    "FlowdeckError",
    "LatencyKind",
    "Listener",
    "MetricsEndpoint",
    "NullSink",
    "PendingChange",
    "Percentiles",
    "RunEvent",
    "RunSpec",
    "RunSummary",
    "ScheduleStep",
    "SendBasis",
    "Session",
    "SessionInfo",
    "SessionNotFound",
    "Setting",
    "Settings",
    "SpecError",
    "SteerableSetting",
    "SteeringCommand",
    "Step",
    "Tick",
    "TlsOptions",
    "Update",
    "WorkerReport",
    "broker_uri",
    "connect",
    "default_sessions_root",
    "delete_session",
    "export_csv",
    "find_session",
    "format_number",
    "http_context",
    "list_sessions",
    "load_spec_file",
    "management_password",
    "open_session",
    "open_session_by_id",
    "parse_change",
    "preset",
    "resolve_uri",
    "session_format",
    "setting_value",
    "spec_from_mapping",
    "spec_from_perftest",
    "tls_options",
    "with_tls_options",
]
