"""What the broker says: management API and Prometheus collectors, and a private node.

Never imports the engine or Textual.
"""

from flowdeck.collectors.broker_uri import BrokerUriError, parse_broker_uri, redact
from flowdeck.collectors.errors import SourceError
from flowdeck.collectors.local_broker import (
    LocalBroker,
    TlsFiles,
    find_tool,
    load_state,
    save_state,
)
from flowdeck.collectors.management import (
    ManagementAnswerError,
    ManagementCollector,
    NodeCapacity,
    SocketFigures,
    credentials_from_uri,
    management_url_for,
)
from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
from flowdeck.collectors.prometheus import PrometheusCollector
from flowdeck.collectors.prometheus_server import PrometheusServer, prometheus_target_for
from flowdeck.collectors.provisioner import Provisioner, RegisteredNode, registered_nodes
from flowdeck.collectors.watch import BrokerSource, BrokerWatch

__all__ = [
    "BrokerSample",
    "BrokerSource",
    "BrokerUriError",
    "BrokerWatch",
    "LocalBroker",
    "ManagementAnswerError",
    "ManagementCollector",
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
    "credentials_from_uri",
    "find_tool",
    "load_state",
    "management_url_for",
    "parse_broker_uri",
    "prometheus_target_for",
    "redact",
    "registered_nodes",
    "save_state",
]
