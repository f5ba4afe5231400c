"""The stream plugin's figures in a live sample, from hand-made management answers.

The answers are shaped as RabbitMQ 3.10.8's ``/api/stream/{connections,consumers,
publishers}/{vhost}`` give them with ``columns=`` (read off a private node). A broker
without ``rabbitmq_stream_management`` answers 404 there: the sample is then fresh, its
stream figures absent, and they are not asked for again.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from flowdeck.collectors import ManagementAnswerError, ManagementCollector
from flowdeck.collectors.management import StreamFigures
from tests.collectors.fake_management import quiet_answer

CONNECTIONS = [
    {"name": "127.0.0.1:42124 -> 127.0.0.1:5552"},
    {"name": "127.0.0.1:42142 -> 127.0.0.1:5552"},
    {"name": "127.0.0.1:42150 -> 127.0.0.1:5552"},
]
CONSUMERS = [
    {"offset_lag": 14196, "queue": {"name": "s-1", "vhost": "/"}},
    {"offset_lag": 804, "queue": {"name": "s-1", "vhost": "/"}},
    {"offset_lag": 99999, "queue": {"name": "someone-else", "vhost": "/"}},
]
PUBLISHERS = [
    {"confirmed": 20000, "errored": 0, "published": 20000, "queue": {"name": "s-1", "vhost": "/"}},
    {"confirmed": 19990, "errored": 3, "published": 20007, "queue": {"name": "s-1", "vhost": "/"}},
    {"confirmed": 5, "errored": 7, "published": 5, "queue": {"name": "someone-else", "vhost": "/"}},
]


class StreamServer:
    """A management API with the stream plugin's pages (``streams``: "on", "off" = 404,
    "500"); it keeps the paths asked for."""

    def __init__(self, streams: str = "on", consumers: list[Any] | None = None) -> None:
        self.streams = streams
        self.consumers = CONSUMERS if consumers is None else consumers
        self.paths: list[str] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.paths.append(path)
        if path.startswith("/api/stream/"):
            if self.streams == "off":
                return httpx.Response(404, json={"error": "Object Not Found"})
            if self.streams == "500":
                return httpx.Response(500, json={"error": "internal"})
            answers = {
                "/api/stream/connections/%2F": CONNECTIONS,
                "/api/stream/consumers/%2F": self.consumers,
                "/api/stream/publishers/%2F": PUBLISHERS,
            }
            assert request.url.params.get("columns"), path  # never the whole objects
            return httpx.Response(200, json=answers[request.url.raw_path.decode().split("?")[0]])
        return quiet_answer(path)

    def stream_requests(self) -> int:
        return sum(path.startswith("/api/stream/") for path in self.paths)


def _collector(server: StreamServer, *, streams: bool = True) -> ManagementCollector:
    return ManagementCollector(
        "http://broker.test:15672",
        username="guest",
        password="guest",
        client=httpx.AsyncClient(transport=httpx.MockTransport(server)),
        statistics_interval=1.0,
        queue_names=["s-1"],
        streams=streams,
    )


async def test_a_stream_run_sample_carries_the_stream_figures_of_its_streams() -> None:
    sample = await _collector(StreamServer()).sample()
    assert not sample.stale
    assert sample.stream_connections == 3  # the vhost's stream connections
    # the run's stream only: another stream's consumer and publisher are left out
    assert sample.stream_consumers == 2
    assert sample.stream_offset_lag == 14196 + 804
    assert sample.stream_offset_lag_max == 14196
    assert sample.stream_publishers == 2
    assert sample.stream_errored == 3


async def test_without_the_stream_plugin_the_figures_are_absent_not_an_error() -> None:
    server = StreamServer(streams="off")
    collector = _collector(server)
    first = await collector.sample()
    asked = server.stream_requests()
    second = await collector.sample()
    for sample in (first, second):
        assert not sample.stale and sample.stale_reason == ""
        assert sample.stream_connections is None and sample.stream_offset_lag is None
        assert sample.stream_consumers is None and sample.stream_errored is None
    # a 404 says the plugin is off: not asked again for the rest of the run
    assert 1 <= asked <= 3 and server.stream_requests() == asked


async def test_a_stream_page_in_trouble_leaves_the_figures_out_of_that_sample_only() -> None:
    server = StreamServer(streams="500")
    collector = _collector(server)
    troubled = await collector.sample()
    assert not troubled.stale and troubled.stream_connections is None
    server.streams = "on"
    recovered = await collector.sample()
    assert recovered.stream_connections == 3 and recovered.stream_offset_lag == 15000


async def test_no_stream_consumer_has_no_offset_lag() -> None:
    sample = await _collector(StreamServer(consumers=[])).sample()
    assert sample.stream_consumers == 0
    assert sample.stream_offset_lag is None and sample.stream_offset_lag_max is None
    assert sample.stream_connections == 3


async def test_a_run_without_streams_never_asks_the_stream_plugin() -> None:
    server = StreamServer()
    sample = await _collector(server, streams=False).sample()
    assert server.stream_requests() == 0
    assert sample.stream_connections is None and sample.stream_offset_lag is None


async def test_the_end_of_publishing_figures_read_the_same_answers() -> None:
    found = await _collector(StreamServer()).stream_figures(["s-1"])
    assert found == {
        "stream_connections": 3,
        "consumers": 2,
        "offset_lag": 15000,
        "publishers": 2,
        "published": 40007,
        "confirmed": 39990,
        "errored": 3,
    }


def test_stream_figures_refuse_an_answer_that_is_not_a_list() -> None:
    with pytest.raises(ManagementAnswerError, match="/api/stream/consumers is not a list"):
        StreamFigures.of(CONNECTIONS, {"error": "x"}, PUBLISHERS, vhost="/", queues=None)


def test_stream_figures_skip_a_consumer_without_a_lag_and_other_vhosts() -> None:
    consumers = [
        {"queue": {"name": "s-1", "vhost": "/"}},
        {"offset_lag": 7, "queue": {"name": "s-1", "vhost": "other"}},
        {"offset_lag": 5, "queue": {"name": "s-2", "vhost": "/"}},
    ]
    found = StreamFigures.of([], consumers, [], vhost="/", queues=None)
    assert (found.consumers, found.offset_lag, found.offset_lag_max) == (2, 5, 5)
    assert (found.connections, found.publishers, found.errored) == (0, 0, 0)
