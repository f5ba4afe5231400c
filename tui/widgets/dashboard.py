"""The dashboard panels together: one container the live run and a replay both fill."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane

from flowdeck.collectors import QueueSample
from flowdeck.engine import PendingChange, RunEvent, Settings
from flowdeck.tui.model import RunHistory, run_state
from flowdeck.tui.widgets.alarm_banner import AlarmBanner
from flowdeck.tui.widgets.event_log import EventLog
from flowdeck.tui.widgets.figure_strip import FigureStrip
from flowdeck.tui.widgets.gauges import BrokerGauges
from flowdeck.tui.widgets.host_table import HostPanel
from flowdeck.tui.widgets.latency_chart import LatencyChart
from flowdeck.tui.widgets.pipeline import PipelinePanel
from flowdeck.tui.widgets.queue_table import QueueTable
from flowdeck.tui.widgets.run_header import RunHeader
from flowdeck.tui.widgets.setting_table import SettingTable
from flowdeck.tui.widgets.settings_bar import SettingsBar
from flowdeck.tui.widgets.throughput_chart import ThroughputChart


class Dashboard(Widget):
    """Header, alarm banner, settings, the figure strip, charts on the left, broker gauges
    and the event log / queue table / per-setting table / flow (where the messages wait) /
    per-host table on the right (the hosts tab only once the run has several workers or
    one on another host). Wide terminals (class
    ``-wide``, set by the screen) give the right column more room so the queue table shows
    more columns and rows.
    """

    DEFAULT_CSS = """
    Dashboard {
        height: 1fr;
        layout: vertical;
    }
    Dashboard #body {
        height: 1fr;
    }
    Dashboard #charts {
        width: 1fr;
    }
    Dashboard #side {
        width: 40;
    }
    Dashboard.-wide #side {
        width: 45%;
    }
    Dashboard #tabs {
        height: 1fr;
    }
    Dashboard #verdicts {
        overflow-y: auto;
    }
    """

    def __init__(self, run_name: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.run_name = run_name
        self.note = ""
        self._queues: tuple[QueueSample, ...] = ()
        self._history: RunHistory | None = None
        self._hosts_tab = False

    def compose(self) -> ComposeResult:
        yield RunHeader(id="run-header")
        yield AlarmBanner(id="alarm")
        yield SettingsBar(id="settings")
        yield FigureStrip(id="figures")
        with Horizontal(id="body"):
            with Vertical(id="charts"):
                yield ThroughputChart(id="throughput")
                yield LatencyChart(id="latency")
            with Vertical(id="side"):
                yield BrokerGauges(id="gauges")
                with TabbedContent(id="tabs", initial="events"):
                    with TabPane("events", id="events"):
                        yield EventLog(id="event-log")
                    with TabPane("queues", id="queues"):
                        yield QueueTable(id="queue-table")
                    with TabPane("per setting", id="verdicts"):
                        yield SettingTable(id="setting-table")
                    with TabPane("flow", id="flow"):
                        yield PipelinePanel(id="pipeline")
                    with TabPane("hosts", id="hosts"):
                        yield HostPanel(id="host-panel")

    def on_mount(self) -> None:
        # The hosts tab shows once the run has several workers or one on another host.
        self.query_one(TabbedContent).hide_tab("hosts")
        self._hosts_tab = False

    def show(
        self,
        history: RunHistory,
        settings: Settings | None,
        pending: tuple[PendingChange, ...],
    ) -> None:
        """Redraw every panel from the history (once a second)."""
        self._history = history
        self.query_one(RunHeader).show(self.run_name, history.last_tick, self.note)
        self.show_settings(settings, pending)
        self.query_one(ThroughputChart).show(history)
        self.query_one(LatencyChart).show(history)
        self.show_broker(history)
        # The table goes over every phase's seconds: only while it is on screen.
        tabs = self.query_one(TabbedContent)
        if tabs.active == "verdicts":
            self.query_one(SettingTable).show(history)
        elif tabs.active == "flow":
            self.query_one(PipelinePanel).show(history)
        self.show_hosts(history)

    def show_hosts(self, history: RunHistory) -> None:
        """The hosts tab, once there is more than one worker (or one elsewhere); its rows
        while it is on screen."""
        tabs = self.query_one(TabbedContent)
        if history.hosts.shown and not self._hosts_tab:
            self._hosts_tab = True
            tabs.show_tab("hosts")
        if tabs.active == "hosts":
            self.query_one(HostPanel).show(history)

    def show_settings(self, settings: Settings | None, pending: tuple[PendingChange, ...]) -> None:
        history = self._history
        state = run_state(history, settings) if history and settings else None
        self.query_one(SettingsBar).show(settings, pending, state)

    def show_broker(self, history: RunHistory) -> None:
        self._history = history
        self.query_one(AlarmBanner).show(history)
        self.query_one(BrokerGauges).show(history)
        self.query_one(FigureStrip).show(history)
        sample = history.sample
        if sample is None:
            return
        self._queues = sample.queues
        # Hundreds of queues cost real time to update; a hidden table waits until shown.
        active = self.query_one(TabbedContent).active
        if active == "queues":
            self.query_one(QueueTable).show(sample.queues, history.queue_p99())
        elif active == "flow":
            self.query_one(PipelinePanel).show(history)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "queues":
            p99 = self._history.queue_p99() if self._history is not None else {}
            self.query_one(QueueTable).show(self._queues, p99)
        elif event.pane.id == "verdicts" and self._history is not None:
            self.query_one(SettingTable).show(self._history)
        elif event.pane.id == "hosts" and self._history is not None:
            self.query_one(HostPanel).show(self._history)
        elif event.pane.id == "flow" and self._history is not None:
            self.query_one(PipelinePanel).show(self._history)

    def add_event(self, history: RunHistory, event: RunEvent) -> None:
        self._history = history
        self.query_one(EventLog).add(event)
        self.query_one(AlarmBanner).show(history)
