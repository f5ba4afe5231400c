"""Ports flowdeck picks for the listeners of its private nodes (and its own servers)."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest

from flowdeck.collectors import local_broker
from flowdeck.collectors.local_broker import ephemeral_low, free_port


def test_an_outgoing_connections_local_port_cannot_be_listened_on() -> None:
    """Why picked ports stay below the kernel's range for outgoing connections: a
    connection that took a port as its local port keeps a listener off it, SO_REUSEADDR
    or not (a node's plugin listener failing so died at boot, seen beside a CPU hog)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        try:
            taken = client.getsockname()[1]
            assert taken >= ephemeral_low()
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                with pytest.raises(OSError) as refused:
                    listener.bind(("127.0.0.1", taken))
                assert refused.value.errno == errno.EADDRINUSE
        finally:
            accepted.close()
            client.close()


def test_picked_ports_are_free_and_below_the_range_of_outgoing_connections() -> None:
    low = ephemeral_low()
    ports = [free_port() for _ in range(300)]
    assert all(20000 <= port < low for port in ports), sorted(ports)[-3:]
    assert all(port < 30000 for port in (free_port(below=30000) for _ in range(50)))
    with socket.create_server(("127.0.0.1", ports[0])):  # nothing listened there
        pass
    # a node's distribution port, with the CLI's ports 10,000 above it: all below the range
    node = local_broker.LocalBroker(name="ports")
    try:
        assert node.dist_port + 10_010 < low
        assert all(p < low for p in (node.amqp_port, node.management_port, node.prometheus_port))
    finally:
        node.stop()


def test_an_unusual_port_range_leaves_the_pick_anywhere_below_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("1024\t65000\n")
    monkeypatch.setattr(local_broker, "_PORT_RANGE_FILE", ranges)
    assert ephemeral_low() == 1024
    assert all(20000 <= free_port() < 65536 for _ in range(50))
    monkeypatch.setattr(local_broker, "_PORT_RANGE_FILE", tmp_path / "missing")
    assert ephemeral_low() == 32768
