"""What every cockpit test shares."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Event times print in local time; pin it so snapshots match on every machine."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()


@pytest.fixture
def prepared(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The runs the launch screen prepares: Ctrl+R builds each for real (controller,
    placement) and it lands here, instead of opening its live screen, which would start it."""
    from flowdeck.tui.screens.launch import LaunchScreen

    kept: list[Any] = []
    monkeypatch.setattr(LaunchScreen, "open_live", lambda self, control: kept.append(control))
    return kept
