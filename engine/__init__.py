"""flowdeck's load engine: specs, changes, workers, the controller and the recorder.

Other parts use what this module exports. It never imports Textual.
"""

from engine.change import Change, Setting, parse_change
from engine.errors import BrokerUnavailable, FlowdeckError, SpecError
from engine.events import EventKind, RunEvent
from engine.presets import DEFAULT_PRESET, PRESETS, preset
from engine.progress import DataSafety, PendingChange, Percentiles, RunSummary, Tick
from engine.settings import COMMANDS, STEERABLE, SteerableSetting, SteeringCommand
from engine.snapshot import ClientSnapshot, Counters, Settings, WorkerReport
from engine.spec import FIELDS, RunSpec, ScheduleStep, load_spec_file, spec_from_mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from engine.controller import Controller


def __getattr__(name: str) -> object:
    # The controller pulls in the AMQP and HTTP clients; load it only when asked for, so
    # `import engine.spec` (the CLI's parsing, the TUI's form) stays quick.
    if name == "Controller":
        from engine.controller import Controller

        return Controller
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


__all__ = [
    "COMMANDS",
    "DEFAULT_PRESET",
    "FIELDS",
    "PRESETS",
    "STEERABLE",
    "BrokerUnavailable",
    "Change",
    "ClientSnapshot",
    "Controller",
    "Counters",
    "DataSafety",
    "EventKind",
    "FlowdeckError",
    "PendingChange",
    "Percentiles",
    "RunEvent",
    "RunSpec",
    "RunSummary",
    "ScheduleStep",
    "Setting",
    "Settings",
    "SpecError",
    "SteerableSetting",
    "SteeringCommand",
    "Tick",
    "WorkerReport",
    "load_spec_file",
    "parse_change",
    "preset",
    "spec_from_mapping",
]
