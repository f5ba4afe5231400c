"""How a screen showing a run's dashboard fits the terminal: the layout classes a width
sets, the narrow terminal's one column, the right column's tabs. The live, demo and replay
screens share these (none of them imports another)."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import TabbedContent

from flowdeck.tui.model import RunHistory
from flowdeck.tui.widgets.dashboard import Dashboard
from flowdeck.tui.widgets.event_log import EventLog

#: Terminal width from which the dashboard spreads out.
WIDE_COLUMNS = 140
#: Below this width the charts and the broker column take turns (``v``): side by side, the
#: charts' legends and the broker panel's title were cut (``━targ ━publ``, ``sta…``).
NARROW_COLUMNS = 100


def narrow_css(screen: str) -> str:
    """The one-column layout of a narrow terminal for a screen showing a Dashboard (class
    ``-narrow`` set by the screen; ``-side`` shows the broker column instead of the
    charts). Rules start with the screen's type: a screen's CSS is scoped to it."""
    return f"""
    {screen}.-narrow Dashboard #side {{
        display: none;
    }}
    {screen}.-narrow.-side Dashboard #side {{
        display: block;
        width: 1fr;
    }}
    {screen}.-narrow.-side Dashboard #charts {{
        display: none;
    }}
    """


def fit_layout(screen: Screen[None], width: int, history: RunHistory) -> None:
    """Set the dashboard's layout classes for a terminal ``width`` columns wide."""
    screen.query_one(Dashboard).set_class(width >= WIDE_COLUMNS, "-wide")
    screen.set_class(width < NARROW_COLUMNS, "-narrow")
    rewrap_events(screen, history)


def toggle_side(screen: Screen[None], history: RunHistory) -> None:
    """On a narrow terminal: show the charts, or the broker panel and the event log."""
    screen.toggle_class("-side")
    rewrap_events(screen, history)


def rewrap_events(screen: Screen[None], history: RunHistory) -> None:
    """Write the event log again once its new width is laid out: lines keep the width
    they were written at (a log filled while hidden read one word a line), and the log
    ends on the newest entry."""
    log = screen.query_one(EventLog)
    screen.call_after_refresh(lambda: log.replace_all(history.events))


def show_tab(screen: Screen[None], history: RunHistory, tab: str) -> None:
    """Bring a tab of the dashboard's right column to the front; the hosts tab only once it
    has rows to tell apart (else a toast says why)."""
    hosts = history.hosts
    if tab == "hosts" and not hosts.shown:
        screen.notify(
            "no worker has reported yet: the hosts tab shows once they do"
            if not hosts.known()
            else "this run's load comes from one worker on this host: the header and "
            "figures are its figures (the hosts tab shows with several workers or Spark "
            "hosts)"
        )
        return
    screen.query_one(TabbedContent).active = tab
