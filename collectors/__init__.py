"""What the broker says: management API and Prometheus collectors, and a private node.

Never imports the engine or Textual.
"""

from collectors.errors import SourceError
from collectors.local_broker import LocalBroker, TlsFiles
from collectors.management import (
    ManagementAnswerError,
    ManagementCollector,
    NodeCapacity,
    SocketFigures,
    credentials_from_uri,
    management_url_for,
)
from collectors.model import BrokerSample, NodeSample, QueueSample
from collectors.prometheus import PrometheusCollector
from collectors.prometheus_server import PrometheusServer, prometheus_target_for
from collectors.provisioner import Provisioner, RegisteredNode, registered_nodes
from collectors.watch import BrokerSource, BrokerWatch

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
