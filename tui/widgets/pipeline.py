"""The flow tab: where the run's messages are now, and the credit flow that holds them.

One row per place a sent message can be (``figures.pipeline``): before the queues (sent,
not yet taken in by the broker), in the queues, at the consumers; its messages, the rate
they leave at and the wait that explains. Under it what is unconfirmed on either side, the
publishers and connections in credit flow (per node where one has any) and one line
saying where most of the latency waits: the answer to "latency climbs, queue depth 0,
why?". In a run to streams, one line more: the stream plugin's connections, its consumers'
offset lag (summed and the largest) and its publishers' errored messages."""

from __future__ import annotations

import time

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from flowdeck.figures.pipeline import BEFORE_QUEUES, Pipeline
from flowdeck.tui.model import RunHistory


def _count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _wait(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def render_pipeline(pipeline: Pipeline | None, history: RunHistory) -> RenderableType:
    """The tab's content (a renderable, so tests read it as text)."""
    if pipeline is None:
        return Text("waiting for the first broker poll", style="dim")
    now = history.clock if history.clock is not None else time.time()
    table = Table(box=None, padding=(0, 1), pad_edge=False, expand=True, show_edge=False)
    table.add_column("where the messages are", no_wrap=True, overflow="ellipsis")
    table.add_column("messages", justify="right", no_wrap=True)
    table.add_column("leave at", justify="right", no_wrap=True)
    table.add_column("wait", justify="right", no_wrap=True)
    for place in pipeline.places:
        leaves = "–" if place.leaves_at is None else f"{place.leaves_at:,.0f}/s"
        style = "bold yellow" if place.wait_s is not None and place.wait_s >= 1 else ""
        table.add_row(place.name, _count(place.messages), leaves, _wait(place.wait_s), style=style)
    lines: list[RenderableType] = [table]
    if pipeline.place(BEFORE_QUEUES).messages is None:
        lines.append(
            Text(
                "before the queues: not known (the management API says what the run's "
                "AMQP 0.9.1 channels took in, once it lists them; stream protocol clients "
                "have none, and Prometheus does not say)",
                style="dim",
            )
        )
    lines.append(
        Text(
            f"not yet confirmed: broker {_count(pipeline.unconfirmed)} · "
            f"clients {_count(pipeline.pending_confirms)}"
        )
    )
    flow = Text("credit flow: ")
    if pipeline.publishers_in_flow is None:
        flow.append("the run's publishers not known", style="dim")
    else:
        held = pipeline.publishers_in_flow
        flow.append(
            f"{held} of {_count(pipeline.publishers)} publishers",
            style="bold yellow" if held else "",
        )
    flow.append(
        f" · {_count(pipeline.connections_flow)} connections, "
        f"{_count(pipeline.channels_flow)} channels in flow"
    )
    lines.append(flow)
    sample = history.sample
    for node in () if sample is None else sample.nodes:
        held_connections = node.connections_flow or 0
        held_channels = node.channels_flow or 0
        if held_connections or held_channels:
            lines.append(
                Text(
                    f"  {node.name}: {held_connections} connections, {held_channels} channels "
                    "in flow",
                    style="yellow",
                )
            )
    streams = stream_line(history)
    if streams is not None:
        lines.append(streams)
    lines.append(Text(pipeline.where(), style="bold"))
    lines.append(Text(f"broker figures {max(0.0, now - pipeline.at):.1f} s old", style="dim"))
    return Group(*lines)


def stream_line(history: RunHistory) -> Text | None:
    """The stream plugin's figures from the management API's last sample; None in a run
    without streams (its samples carry none)."""
    sample = history.broker.get("management")
    if sample is None or sample.stream_connections is None:
        return None
    line = Text(f"streams: {sample.stream_connections} stream connections · ")
    consumers = sample.stream_consumers or 0
    if sample.stream_offset_lag is None:
        line.append(f"{consumers} consumers, no offset lag to read", style="dim")
    else:
        line.append(
            f"{consumers} consumers, offset lag {sample.stream_offset_lag:,} "
            f"(largest {_count(sample.stream_offset_lag_max)})",
            style="bold yellow" if sample.stream_offset_lag else "",
        )
    errored = sample.stream_errored or 0
    line.append(f" · {_count(sample.stream_publishers)} publishers, ")
    line.append(f"{errored:,} errored", style="bold red" if errored else "")
    return line


class PipelinePanel(Static):
    """The flow tab's panel (``f``)."""

    DEFAULT_CSS = """
    PipelinePanel {
        height: auto;
        padding: 0 1;
    }
    """

    def show(self, history: RunHistory) -> None:
        self.update(render_pipeline(history.pipeline(), history))
