"""The router: which screen class each :class:`~flowdeck.tui.navigation.Route` names.

Only the app imports this module (screens ask for a route through ``tui.navigation``).
Each screen's module is imported when its route is first asked for, so the cockpit starts
on the launch screen without loading the dashboard, the report reader or the demo.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from flowdeck.tui.navigation import Route


def screen_class(route: Route) -> type[Screen[Any]]:
    """The class of the screen ``route`` names."""
    match route:
        case Route.LAUNCH:
            from flowdeck.tui.screens.launch import LaunchScreen

            return LaunchScreen
        case Route.LIVE:
            from flowdeck.tui.screens.live import LiveScreen

            return LiveScreen
        case Route.SUMMARY:
            from flowdeck.tui.screens.summary import SummaryScreen

            return SummaryScreen
        case Route.SESSIONS:
            from flowdeck.tui.screens.sessions import SessionsScreen

            return SessionsScreen
        case Route.REPLAY:
            from flowdeck.tui.screens.replay import ReplayScreen

            return ReplayScreen
        case Route.REPORT:
            from flowdeck.tui.screens.report import ReportScreen

            return ReportScreen
        case Route.HELP:
            from flowdeck.tui.screens.help import HelpScreen

            return HelpScreen
        case Route.CHANGE_PROMPT:
            from flowdeck.tui.screens.prompt import ChangePrompt

            return ChangePrompt
        case Route.CONFIRM_STOP:
            from flowdeck.tui.screens.prompt import ConfirmStop

            return ConfirmStop
        case Route.NODE_FAULT:
            from flowdeck.tui.screens.node_fault import NodeFaultPrompt

            return NodeFaultPrompt
        case Route.TOUR_INTRO:
            from flowdeck.tui.screens.demo import TourIntroScreen

            return TourIntroScreen
        case Route.DEMO:
            from flowdeck.tui.screens.demo import DemoScreen

            return DemoScreen
        case Route.PER_SETTING:
            from flowdeck.tui.screens.per_setting import PerSettingScreen

            return PerSettingScreen
