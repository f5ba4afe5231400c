"""What the broker says: management API and Prometheus collectors, and a private node.

Never imports the engine or Textual.
"""

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
from flowdeck.collectors.watch import BrokerSource, BrokerWatch

__all__ = [
    "BROKER_SETTINGS",
    "FAULT_ACTIONS",
    "MASK",
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
    "attach_state",
    "find_tool",
    "load_state",
    "parse_broker_uri",
    "prometheus_target_for",
    "redact",
    "registered_nodes",
    "save_state",
    "split_uris",
]
