"""Command palette provider: every steering action by name, with the value in force."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from flowdeck.engine import STEERABLE, format_number, setting_value
from flowdeck.tui.keys import KEY_DISPLAY, KEY_TABLE


class SteeringCommands(Provider):
    """Offers the live dashboard's key table as commands, plus "set X to…" for each
    setting (opens the change prompt with ``setting=`` typed, the current value shown).
    """

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        from flowdeck.tui.run_screen import RunScreen  # the dashboard's imports, when asked

        screen = self.screen
        if not isinstance(screen, RunScreen):
            return []
        settings = screen.control.settings
        commands: list[tuple[str, Callable[[], object], str]] = []
        for setting in STEERABLE:
            if not setting.live:
                continue
            now = format_number(setting_value(settings, setting.setting))
            commands.append(
                (
                    f"Set {setting.label}… (now {now})",
                    partial(screen.action_exact_change, f"{setting.name}="),
                    f"type an exact value for {setting.name}",
                )
            )
        for row in KEY_TABLE:
            if row.action in ("command_palette", "help"):
                continue
            key = KEY_DISPLAY.get(row.key, row.key)
            commands.append(
                (
                    row.description[0].upper() + row.description[1:],
                    partial(screen.run_action, row.action),
                    f"key {key}",
                )
            )
        return commands

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
