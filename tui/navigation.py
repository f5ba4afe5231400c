"""Screens open one another by name, so none imports another (or the app).

A screen asks for a :class:`Route` and hands over what the screen it opens needs
(``open_screen(self, Route.SUMMARY, summary, hosts=rows)``); the app knows which class each
route names (``FlowdeckApp.screen_class``, from ``tui.routes``, each screen's module loaded
on first use so the cockpit starts without every screen's imports), as Textual's
``App.SCREENS`` knows its screens by name. The screens are then independent modules
(import-linter contracts in ``pyproject.toml`` say so): a screen can be changed, or tested
alone, without the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from textual.await_complete import AwaitComplete
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.widget import AwaitMount


class Route(StrEnum):
    """Every screen of the cockpit, by name."""

    LAUNCH = "launch"
    LIVE = "live"
    SUMMARY = "summary"
    SESSIONS = "sessions"
    REPLAY = "replay"
    REPORT = "report"
    HELP = "help"
    CHANGE_PROMPT = "change-prompt"
    CONFIRM_STOP = "confirm-stop"
    NODE_FAULT = "node-fault"
    TOUR_INTRO = "tour-intro"
    DEMO = "demo"
    PER_SETTING = "per-setting"


@runtime_checkable
class Navigator(Protocol):
    """The app's side: which screen class a route names."""

    def screen_class(self, route: Route) -> type[Screen[Any]]: ...


def navigator(node: MessagePump) -> Navigator:
    """The app ``node`` belongs to, as the one that knows the routes."""
    app = node.app
    if not isinstance(app, Navigator):
        raise TypeError(
            f"{type(app).__name__} knows no routes: the cockpit's screens open one another "
            "by name in a FlowdeckApp"
        )
    return app


def make_screen(node: MessagePump, route: Route, /, *args: Any, **needs: Any) -> Screen[Any]:
    """The screen ``route`` names, made from what it needs."""
    return navigator(node).screen_class(route)(*args, **needs)


def open_screen(
    node: MessagePump,
    route: Route,
    /,
    *args: Any,
    callback: Callable[[Any], object] | None = None,
    **needs: Any,
) -> AwaitMount | asyncio.Future[Any]:
    """Push the screen ``route`` names on top; ``callback`` takes what it is dismissed with."""
    return node.app.push_screen(make_screen(node, route, *args, **needs), callback)


def switch_to(node: MessagePump, route: Route, /, *args: Any, **needs: Any) -> AwaitComplete:
    """Replace the screen on top by the one ``route`` names."""
    return node.app.switch_screen(make_screen(node, route, *args, **needs))


def preload(node: MessagePump, route: Route) -> None:
    """Import the module of the screen ``route`` names now (off the loop, ahead of need)."""
    navigator(node).screen_class(route)
