"""What the broker says: management API and Prometheus collectors, and a private node.

Never imports the engine or Textual. Names load on first use (as the engine's face does):
``flowdeck --help`` and an input error do not load httpx, psutil and the node's code.
"""

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from flowdeck.collectors.broker import Broker
    from flowdeck.collectors.broker_settings import BROKER_SETTINGS, BrokerSetting
    from flowdeck.collectors.broker_uri import (
        MASK,
        URI_SEPARATOR,
        BrokerUri,
        BrokerUriError,
        parse_broker_uri,
        redact,
        split_uris,
    )
    from flowdeck.collectors.errors import SourceError
    from flowdeck.collectors.local_broker import (
        LocalBroker,
        LocalCluster,
        NodeAddress,
        TlsFiles,
        attach_state,
        find_tool,
        load_state,
        save_state,
    )
    from flowdeck.collectors.management import (
        ManagementAnswerError,
        ManagementCollector,
        NodeCapacity,
        SocketFigures,
    )
    from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
    from flowdeck.collectors.node_faults import (
        FAULT_ACTIONS,
        BrokerSettingDone,
        FaultAction,
        FaultDone,
        LocalNodes,
    )
    from flowdeck.collectors.prometheus import PrometheusCollector
    from flowdeck.collectors.prometheus_server import PrometheusServer, prometheus_target_for
    from flowdeck.collectors.provisioner import Provisioner, RegisteredNode, registered_nodes
    from flowdeck.collectors.untrusted import (
        MANIFEST_LIMIT,
        PEM_FILE_LIMIT,
        SMALL_FILE_LIMIT,
        SPEC_FILE_LIMIT,
        UnreadableFile,
        decode_text,
        parse_json,
        printable,
        read_file_bytes,
        read_file_json,
        read_file_text,
    )
    from flowdeck.collectors.watch import BrokerSource, BrokerWatch

_LAZY: dict[str, str] = {
    "BROKER_SETTINGS": "broker_settings",
    "BrokerSetting": "broker_settings",
    "BrokerSettingDone": "node_faults",
    "Broker": "broker",
    "BrokerSample": "model",
    "BrokerSource": "watch",
    "BrokerUri": "broker_uri",
    "BrokerUriError": "broker_uri",
    "BrokerWatch": "watch",
    "FAULT_ACTIONS": "node_faults",
    "FaultAction": "node_faults",
    "FaultDone": "node_faults",
    "LocalBroker": "local_broker",
    "LocalCluster": "local_broker",
    "LocalNodes": "node_faults",
    "MANIFEST_LIMIT": "untrusted",
    "MASK": "broker_uri",
    "ManagementAnswerError": "management",
    "ManagementCollector": "management",
    "NodeAddress": "local_broker",
    "NodeCapacity": "management",
    "NodeSample": "model",
    "PEM_FILE_LIMIT": "untrusted",
    "PrometheusCollector": "prometheus",
    "PrometheusServer": "prometheus_server",
    "Provisioner": "provisioner",
    "QueueSample": "model",
    "RegisteredNode": "provisioner",
    "SMALL_FILE_LIMIT": "untrusted",
    "SPEC_FILE_LIMIT": "untrusted",
    "SocketFigures": "management",
    "SourceError": "errors",
    "TlsFiles": "local_broker",
    "URI_SEPARATOR": "broker_uri",
    "UnreadableFile": "untrusted",
    "attach_state": "local_broker",
    "decode_text": "untrusted",
    "find_tool": "local_broker",
    "load_state": "local_broker",
    "parse_broker_uri": "broker_uri",
    "parse_json": "untrusted",
    "printable": "untrusted",
    "prometheus_target_for": "prometheus_server",
    "read_file_bytes": "untrusted",
    "read_file_json": "untrusted",
    "read_file_text": "untrusted",
    "redact": "broker_uri",
    "registered_nodes": "provisioner",
    "save_state": "local_broker",
    "split_uris": "broker_uri",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flowdeck.collectors' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"flowdeck.collectors.{module}"), name)
    globals()[name] = value  # the next look-up is a plain one
    return value


__all__ = [
    "BROKER_SETTINGS",
    "FAULT_ACTIONS",
    "MANIFEST_LIMIT",
    "MASK",
    "PEM_FILE_LIMIT",
    "SMALL_FILE_LIMIT",
    "SPEC_FILE_LIMIT",
    "URI_SEPARATOR",
    "Broker",
    "BrokerSample",
    "BrokerSetting",
    "BrokerSettingDone",
    "BrokerSource",
    "BrokerUri",
    "BrokerUriError",
    "BrokerWatch",
    "FaultAction",
    "FaultDone",
    "LocalBroker",
    "LocalCluster",
    "LocalNodes",
    "ManagementAnswerError",
    "ManagementCollector",
    "NodeAddress",
    "NodeCapacity",
    "NodeSample",
    "PrometheusCollector",
    "PrometheusServer",
    "Provisioner",
    "QueueSample",
    "RegisteredNode",
    "SocketFigures",
    "SourceError",
    "TlsFiles",
    "UnreadableFile",
    "attach_state",
    "decode_text",
    "find_tool",
    "load_state",
    "parse_broker_uri",
    "parse_json",
    "printable",
    "prometheus_target_for",
    "read_file_bytes",
    "read_file_json",
    "read_file_text",
    "redact",
    "registered_nodes",
    "save_state",
    "split_uris",
]
