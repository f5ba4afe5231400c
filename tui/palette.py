"""Colours of the chart series and the cockpit's colour-blind-safe theme.

Series use the Okabe-Ito palette (distinguishable with every common colour-vision
deficiency) and different markers, so no line is told apart by colour alone.
"""

from __future__ import annotations

from textual.theme import Theme

RGB = tuple[int, int, int]

OKABE_ITO: dict[str, RGB] = {
    "orange": (230, 159, 0),
    "sky": (86, 180, 233),
    "green": (0, 158, 115),
    "yellow": (240, 228, 66),
    "blue": (0, 114, 178),
    "vermillion": (213, 94, 0),
    "purple": (204, 121, 167),
    "grey": (153, 153, 153),
}

COLORBLIND_THEME = Theme(
    name="flowdeck-colorblind",
    primary="#0072B2",
    secondary="#56B4E9",
    accent="#CC79A7",
    warning="#E69F00",
    error="#D55E00",
    success="#009E73",
    foreground="#F0F0F0",
    background="#101418",
    surface="#181E24",
    panel="#22303A",
    dark=True,
)

#: Theme names offered by the cockpit, the colour-blind-safe one first.
THEMES = (COLORBLIND_THEME,)
