"""The footer: the key hints that fit, whole, in their rank order.

Textual's footer lays its hints out in one row and cuts the row at the screen's edge, so
at 80 columns the last hint read ``s stop the r``. The screens list their bindings in the
footer's rank order (``keys.bindings``: ``?`` first), so dropping hints from the end
drops the least needed: this footer hides every hint that does not fit whole.
"""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Footer


class FittingFooter(Footer):
    """A footer that shows the hints that fit whole, from the first, and drops the rest."""

    def on_resize(self) -> None:
        # Wider: hidden hints may fit again, so lay them all out, then drop what overflows.
        for key in self._hints():
            key.display = True
        self.call_after_refresh(self.fit)

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self.fit)

    def _hints(self) -> list[Widget]:
        # By CSS type name: Textual exports the footer, not its hint widget (FooterKey).
        return [key for key in self.query("FooterKey") if not key.has_class("-command-palette")]

    @property
    def shown(self) -> list[str]:
        """The keys whose hints are on screen, in order."""
        return [str(getattr(key, "key", "")) for key in self._hints() if key.display]

    def fit(self, attempts: int = 5) -> None:
        """Hide the first hint that does not end inside the footer, and every one after."""
        if not self.is_attached:
            return
        hints = [key for key in self._hints() if key.display]
        if any(not key.region.width for key in hints):
            # Composed but not laid out yet: measure once the layout has placed them.
            if attempts:
                self.call_after_refresh(self.fit, attempts - 1)
            return
        right = self.region.right
        for palette in self.query("FooterKey.-command-palette"):
            if palette.display:
                right = min(right, palette.region.x)
        overflowing = False
        for key in hints:
            overflowing = overflowing or key.region.right > right
            if overflowing:
                key.display = False
