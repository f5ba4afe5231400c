"""Private RabbitMQ nodes for the tests that break a broker (fixture ``private_broker``)."""

from __future__ import annotations

import shutil
from typing import Any

from flowdeck.collectors.local_broker import LocalBroker


class PrivateNodes:
    """Private RabbitMQ nodes (collectors.LocalBroker) for tests that break a broker.

    ``nodes(file_limit=200)`` starts one, ready, with LocalBroker's arguments. Nodes take
    seconds to start and the machine is small: share one per module (or package) and
    ``discard`` it when the module is done, so idle nodes do not pile up. Test nodes are
    thrown away, so they are killed rather than shut down gracefully (seconds each).
    """

    def __init__(self) -> None:
        self.started: list[LocalBroker] = []

    def __call__(self, **options: Any) -> LocalBroker:
        node = LocalBroker(name="flowdeck-test", **options)
        self.started.append(node)
        return node.start()

    def discard(self, node: LocalBroker) -> None:
        node.kill()
        shutil.rmtree(node.base_dir, ignore_errors=True)
        if node in self.started:
            self.started.remove(node)

    def discard_all(self) -> None:
        for node in list(self.started):
            self.discard(node)
