"""flowdeck's load engine: specs, changes, workers, the controller and the recorder.

Other parts use what this module exports. It never imports Textual.
"""

from flowdeck.engine.change import Change, Setting, parse_change
from flowdeck.engine.errors import BrokerUnavailable, FlowdeckError, SpecError
from flowdeck.engine.events import EventKind, RunEvent
from flowdeck.engine.presets import DEFAULT_PRESET, PRESETS, preset
from flowdeck.engine.progress import DataSafety, PendingChange, Percentiles, RunSummary, Tick
from flowdeck.engine.settings import COMMANDS, STEERABLE, SteerableSetting, SteeringCommand
from flowdeck.engine.snapshot import ClientSnapshot, Counters, Settings, WorkerReport
from flowdeck.engine.spec import FIELDS, RunSpec, ScheduleStep, load_spec_file, spec_from_mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from flowdeck.engine.controller import Controller


def __getattr__(name: str) -> object:
    # The controller pulls in the AMQP and HTTP clients; load it only when asked for, so
    # `import flowdeck.engine.spec` (the CLI's parsing, the TUI's form) stays quick.
    if name == "Controller":
        from flowdeck.engine.controller import Controller

        return Controller
    raise AttributeError(f"module 'flowdeck.engine' has no attribute {name!r}")


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
