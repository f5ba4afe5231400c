"""flowdeck's load engine: specs, changes, workers, the controller and the recorder.

Other parts use what this module exports. It never imports Textual.
"""

import importlib

from flowdeck.engine.change import (
    Change,
    NodeFault,
    Setting,
    format_number,
    parse_change,
    parse_fault,
)
from flowdeck.engine.errors import BrokerUnavailable, FlowdeckError, SpecError, did_you_mean
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.presets import (
    DEFAULT_PRESET,
    FIGURES,
    PRESETS,
    SWEEP_PHASE_SECONDS,
    load_spec_file,
    matrix,
    preset,
)
from flowdeck.engine.progress import DataSafety, PendingChange, RunSummary, Tick
from flowdeck.engine.settings import (
    BY_SETTING,
    COMMANDS,
    STEERABLE,
    SteerableSetting,
    SteeringCommand,
    Step,
)
from flowdeck.engine.snapshot import (
    ActiveTimes,
    ClientSnapshot,
    Counters,
    Settings,
    WorkerReport,
    setting_value,
)
from flowdeck.engine.spec import (
    FIELDS,
    RunSpec,
    ScheduleStep,
    schedule_step,
    spec_from_mapping,
)
from flowdeck.figures.latency import Percentiles

TYPE_CHECKING = False
if TYPE_CHECKING:
    from flowdeck.engine.amqp.connection import connect
    from flowdeck.engine.autotune import Autopilot
    from flowdeck.engine.capacity import CapacityCheck
    from flowdeck.engine.control import (
        MAX_CHANGES,
        RUNS_DIR_ENV,
        ControlAddress,
        ControlClient,
        ControlRefused,
        ControlServer,
        Endpoint,
        RemoteRun,
        RunEntry,
        UnsafeRunsDir,
        check_exposure,
        check_runs_dir,
        endpoint_for,
        find_run,
        parse_control_address,
        running_runs,
        runs_dir,
        server_tls_context,
    )
    from flowdeck.engine.controller import Controller, resolve_workers
    from flowdeck.engine.credentials import (
        URI_ENV,
        broker_of,
        broker_uri,
        management_password,
        read_password_file,
        resolve_uri,
    )
    from flowdeck.engine.delivery import UNDELIVERED_EXIT
    from flowdeck.engine.latency_kinds import LatencyKind, SendBasis
    from flowdeck.engine.metrics_endpoint import MetricsEndpoint
    from flowdeck.engine.node_faults import NodeFaults
    from flowdeck.engine.perftest import perftest_words, spec_from_perftest
    from flowdeck.engine.phase_figures import PhaseTable
    from flowdeck.engine.process import WorkerPool
    from flowdeck.engine.provision import (
        STATE_ENV,
        broker_for,
        prometheus_for,
        resolve_broker,
        spark_placement_of,
        spec_naming,
        started_local_nodes,
        started_node_for,
        started_state,
        state_file,
    )
    from flowdeck.engine.recording import format as session_format
    from flowdeck.engine.recording.location import SESSIONS_DIR_ENV, default_sessions_root
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
    from flowdeck.engine.recording.rows import broker_row
    from flowdeck.engine.run_recording import RunRecording
    from flowdeck.engine.sinks import Listener, NullSink, Sink, Update, deliver
    from flowdeck.engine.spark_workers import HostRow, SparkPlacement
    from flowdeck.engine.spec import UNCHECKED_CONNECTIONS_LIMIT
    from flowdeck.engine.thresholds import (
        METRICS,
        THRESHOLDS_FAILED_EXIT,
        ThresholdResult,
        evaluate_thresholds,
        parse_thresholds,
        write_junit,
    )
    from flowdeck.engine.tls import (
        INSECURE_WARNING,
        TlsOptions,
        http_context,
        ssl_context,
        tls_options,
        with_tls_options,
    )

#: What the engine offers beyond its light core, loaded on first use: the controller pulls in
#: the AMQP and HTTP clients, sessions pull in pyarrow, so `import flowdeck.engine` (the
#: CLI's parsing, the cockpit's launch form) stays quick.
_LAZY: dict[str, str] = {
    "STATE_ENV": "flowdeck.engine.provision",
    "broker_for": "flowdeck.engine.provision",
    "prometheus_for": "flowdeck.engine.provision",
    "resolve_broker": "flowdeck.engine.provision",
    "spark_placement_of": "flowdeck.engine.provision",
    "spec_naming": "flowdeck.engine.provision",
    "started_local_nodes": "flowdeck.engine.provision",
    "started_node_for": "flowdeck.engine.provision",
    "started_state": "flowdeck.engine.provision",
    "state_file": "flowdeck.engine.provision",
    "Autopilot": "flowdeck.engine.autotune",
    "CapacityCheck": "flowdeck.engine.capacity",
    "ControlAddress": "flowdeck.engine.control",
    "ControlClient": "flowdeck.engine.control",
    "ControlRefused": "flowdeck.engine.control",
    "ControlServer": "flowdeck.engine.control",
    "Controller": "flowdeck.engine.controller",
    "Endpoint": "flowdeck.engine.control",
    "HostRow": "flowdeck.engine.spark_workers",
    "INSECURE_WARNING": "flowdeck.engine.tls",
    "LatencyKind": "flowdeck.engine.latency_kinds",
    "Listener": "flowdeck.engine.sinks",
    "MetricsEndpoint": "flowdeck.engine.metrics_endpoint",
    "NodeFaults": "flowdeck.engine.node_faults",
    "RunRecording": "flowdeck.engine.run_recording",
    "METRICS": "flowdeck.engine.thresholds",
    "PhaseTable": "flowdeck.engine.phase_figures",
    "broker_row": "flowdeck.engine.recording.rows",
    "THRESHOLDS_FAILED_EXIT": "flowdeck.engine.thresholds",
    "ThresholdResult": "flowdeck.engine.thresholds",
    "evaluate_thresholds": "flowdeck.engine.thresholds",
    "parse_thresholds": "flowdeck.engine.thresholds",
    "write_junit": "flowdeck.engine.thresholds",
    "NullSink": "flowdeck.engine.sinks",
    "Sink": "flowdeck.engine.sinks",
    "RemoteRun": "flowdeck.engine.control",
    "RUNS_DIR_ENV": "flowdeck.engine.control",
    "RunEntry": "flowdeck.engine.control",
    "SESSIONS_DIR_ENV": "flowdeck.engine.recording.location",
    "SendBasis": "flowdeck.engine.latency_kinds",
    "SparkPlacement": "flowdeck.engine.spark_workers",
    "Session": "flowdeck.engine.recording.reader",
    "SessionInfo": "flowdeck.engine.recording.reader",
    "SessionNotFound": "flowdeck.engine.recording.reader",
    "TlsOptions": "flowdeck.engine.tls",
    "UNCHECKED_CONNECTIONS_LIMIT": "flowdeck.engine.spec",
    "UNDELIVERED_EXIT": "flowdeck.engine.delivery",
    "URI_ENV": "flowdeck.engine.credentials",
    "Update": "flowdeck.engine.sinks",
    "deliver": "flowdeck.engine.sinks",
    "broker_of": "flowdeck.engine.credentials",
    "broker_uri": "flowdeck.engine.credentials",
    "check_exposure": "flowdeck.engine.control",
    "connect": "flowdeck.engine.amqp.connection",
    "default_sessions_root": "flowdeck.engine.recording.location",
    "delete_session": "flowdeck.engine.recording.reader",
    "endpoint_for": "flowdeck.engine.control",
    "export_csv": "flowdeck.engine.recording.reader",
    "find_run": "flowdeck.engine.control",
    "MAX_CHANGES": "flowdeck.engine.control",
    "check_runs_dir": "flowdeck.engine.control",
    "UnsafeRunsDir": "flowdeck.engine.control",
    "find_session": "flowdeck.engine.recording.reader",
    "http_context": "flowdeck.engine.tls",
    "list_sessions": "flowdeck.engine.recording.reader",
    "management_password": "flowdeck.engine.credentials",
    "read_password_file": "flowdeck.engine.credentials",
    "open_session": "flowdeck.engine.recording.reader",
    "open_session_by_id": "flowdeck.engine.recording.reader",
    "parse_control_address": "flowdeck.engine.control",
    "resolve_uri": "flowdeck.engine.credentials",
    "running_runs": "flowdeck.engine.control",
    "runs_dir": "flowdeck.engine.control",
    "server_tls_context": "flowdeck.engine.control",
    "perftest_words": "flowdeck.engine.perftest",
    "spec_from_perftest": "flowdeck.engine.perftest",
    "ssl_context": "flowdeck.engine.tls",
    "tls_options": "flowdeck.engine.tls",
    "with_tls_options": "flowdeck.engine.tls",
    "WorkerPool": "flowdeck.engine.process",
    "resolve_workers": "flowdeck.engine.controller",
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
    "FIGURES",
    "INSECURE_WARNING",
    "MAX_CHANGES",
    "METRICS",
    "PRESETS",
    "RUNS_DIR_ENV",
    "SESSIONS_DIR_ENV",
    "STATE_ENV",
    "STEERABLE",
    "SWEEP_PHASE_SECONDS",
    "THRESHOLDS_FAILED_EXIT",
    "UNCHECKED_CONNECTIONS_LIMIT",
    "UNDELIVERED_EXIT",
    "URI_ENV",
    "ActiveTimes",
    "Autopilot",
    "BrokerUnavailable",
    "CapacityCheck",
    "Change",
    "ClientSnapshot",
    "ControlAddress",
    "ControlClient",
    "ControlRefused",
    "ControlServer",
    "Controller",
    "Counters",
    "DataSafety",
    "Endpoint",
    "EventKind",
    "FlowdeckError",
    "HostRow",
    "LatencyKind",
    "Listener",
    "MetricsEndpoint",
    "NodeFault",
    "NodeFaults",
    "NullSink",
    "PendingChange",
    "Percentiles",
    "PhaseTable",
    "RemoteRun",
    "RunEntry",
    "RunEvent",
    "RunRecording",
    "RunSpec",
    "RunSummary",
    "ScheduleStep",
    "SendBasis",
    "Session",
    "SessionInfo",
    "SessionNotFound",
    "Setting",
    "Settings",
    "Sink",
    "SparkPlacement",
    "SpecError",
    "SteerableSetting",
    "SteeringCommand",
    "Step",
    "ThresholdResult",
    "Tick",
    "TlsOptions",
    "UnsafeRunsDir",
    "Update",
    "WorkerPool",
    "WorkerReport",
    "broker_for",
    "broker_of",
    "broker_row",
    "broker_uri",
    "check_exposure",
    "check_runs_dir",
    "connect",
    "default_sessions_root",
    "delete_session",
    "deliver",
    "did_you_mean",
    "endpoint_for",
    "evaluate_thresholds",
    "export_csv",
    "find_run",
    "find_session",
    "format_number",
    "http_context",
    "list_sessions",
    "load_spec_file",
    "management_password",
    "matrix",
    "open_session",
    "open_session_by_id",
    "parse_change",
    "parse_control_address",
    "parse_fault",
    "parse_thresholds",
    "perftest_words",
    "preset",
    "prometheus_for",
    "read_password_file",
    "resolve_broker",
    "resolve_uri",
    "resolve_workers",
    "running_runs",
    "runs_dir",
    "schedule_step",
    "server_tls_context",
    "session_format",
    "setting_value",
    "spark_placement_of",
    "spec_from_mapping",
    "spec_from_perftest",
    "spec_naming",
    "ssl_context",
    "started_local_nodes",
    "started_node_for",
    "started_state",
    "state_file",
    "tls_options",
    "with_tls_options",
    "write_junit",
]
