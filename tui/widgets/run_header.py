"""One line naming the run, its phase, its clock and the next schedule step."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from flowdeck.engine import Tick


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class RunHeader(Static):
    """``bench1-sweep  phase 3 inflight=50  2:15 / 6:00  next inflight=100 in 0:45``."""

    DEFAULT_CSS = """
    RunHeader {
        height: 1;
        padding: 0 1;
        background: $primary-background;
    }
    """

    #: Set by a replay: ``(elapsed, length)`` of the recording, the one clock shown then, so
    #: it reaches the recording's length at its last frame (the run's own clock ends past
    #: its duration, by the drain).
    replay_clock: tuple[float, float] | None = None

    def show(self, name: str, tick: Tick | None, note: str = "") -> None:
        line = Text()
        line.append(name, style="bold")
        if note:
            line.append(f"  {note}", style="bold reverse")
        replay = self.replay_clock
        if tick is None:
            line.append(f"  {clock(replay[0])} / {clock(replay[1])}" if replay else "  starting…")
            self.update(line, layout=False)
            return
        line.append(f"  phase {tick.phase_index}")
        if tick.phase:
            line.append(f" {tick.phase}", style="italic")
        elapsed, total = replay if replay else (tick.elapsed, tick.duration)
        line.append(f"  {clock(elapsed)} / {clock(total)}")
        if tick.next_step is not None and tick.next_step_at is not None:
            line.append(
                f"  next {tick.next_step.describe()} in {clock(tick.next_step_at - tick.elapsed)}",
                style="dim",
            )
        if tick.workers:
            line.append(f"  {tick.workers} worker{'s' if tick.workers != 1 else ''}", style="dim")
        # One line high whatever it says: no layout of the whole screen each second.
        self.update(line, layout=False)
