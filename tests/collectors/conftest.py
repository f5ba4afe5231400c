"""One private node shared by the collectors tests (nodes take seconds to start), killed
when they are done.

Tests that raise an alarm or change a limit restore it before they end, so the next test
finds a healthy node.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from flowdeck.collectors import LocalBroker
from tests.private_nodes import PrivateNodes


@pytest.fixture(scope="package")
def node(private_broker: PrivateNodes) -> Iterator[LocalBroker]:
    """A private RabbitMQ node with statistics every second."""
    broker = private_broker()
    print(f"\nprivate node {broker.nodename} started in {broker.started_in:.1f} s")
    yield broker
    private_broker.discard(broker)


@pytest.fixture
def queue_name() -> str:
    return f"flowdeck-collectors-{uuid.uuid4().hex[:10]}"


async def wait_for(
    condition: Callable[[], Awaitable[Any]], *, limit: float = 30.0, every: float = 0.2
) -> tuple[Any, float]:
    """Poll ``condition`` until it returns something truthy; (value, seconds it took).

    ``limit`` only bounds the loop so a broken test ends; tests assert on what was seen.
    """
    began = time.monotonic()
    while True:
        value = await condition()
        if value:
            return value, time.monotonic() - began
        if time.monotonic() - began > limit:
            return value, time.monotonic() - began
        await asyncio.sleep(every)
