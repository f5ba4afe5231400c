"""A quiet single-node management API for tests on hand-made answers: the overview, one
node, no queues, no alarms, and an empty list for anything else."""

from __future__ import annotations

import httpx

OVERVIEW = {
    "rabbitmq_version": "3.10.8",
    "erlang_version": "25.2",
    "node": "rabbit@x",
    "message_stats": {"publish_details": {"rate": 12.5}},
    "object_totals": {},
}
NODES = [
    {
        "name": "rabbit@x",
        "running": True,
        "mem_used": 100,
        "mem_limit": 1000,
        "mem_alarm": False,
        "disk_free": 5000,
        "disk_free_limit": 50,
        "disk_free_alarm": False,
        "fd_used": 10,
        "fd_total": 1024,
    }
]


def quiet_answer(path: str) -> httpx.Response:
    """What the quiet broker answers at ``path``."""
    if path == "/api/overview":
        return httpx.Response(200, json=OVERVIEW)
    if path == "/api/nodes":
        return httpx.Response(200, json=NODES)
    if path.startswith("/api/queues/"):
        return httpx.Response(200, json={"items": []})
    if path == "/api/health/checks/alarms":
        return httpx.Response(200, json={"status": "ok"})
    return httpx.Response(200, json=[])
