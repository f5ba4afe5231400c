"""What the broker says: management API and Prometheus collectors, and a private node.

Never imports the engine or Textual.
"""

from flowdeck.collectors.errors import SourceError
from flowdeck.collectors.local_broker import LocalBroker, TlsFiles
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
    "management_url_for",
    "prometheus_target_for",
    "registered_nodes",
]
