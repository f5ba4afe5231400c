"""flowdeck's lean AMQP 0-9-1 client for the per-message hot path (see ``connection``)."""

from flowdeck.engine.amqp.connection import (
    AmqpClosed,
    Channel,
    ChannelListener,
    Connection,
    ConnectionParams,
    NullListener,
    connect,
    parse_uri,
)
from flowdeck.engine.amqp.frames import PublishTemplate, publish_template

__all__ = [
    "AmqpClosed",
    "Channel",
    "ChannelListener",
    "Connection",
    "ConnectionParams",
    "NullListener",
    "PublishTemplate",
    "connect",
    "parse_uri",
    "publish_template",
]
