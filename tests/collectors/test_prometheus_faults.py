"""What a real Prometheus server cannot be made to say: garbage, errors, a hang.

A small HTTP server on a thread answers each base path its own way; the collector must
turn every one into a stale sample that says what was wrong, and never raise.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from flowdeck.collectors import PrometheusCollector, PrometheusServer, SourceError

ANSWERS: dict[str, tuple[int, str, bytes]] = {
    "html": (200, "text/html", b"<html><body>Grafana login</body></html>"),
    "nodata": (200, "application/json", b'{"status": "success"}'),
    "notvector": (200, "application/json", b'{"status": "success", "data": {"result": "x"}}'),
    "notnumber": (
        200,
        "application/json",
        json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [{"metric": {"job": "rabbitmq"}, "value": [1.0, "many"]}],
                },
            }
        ).encode(),
    ),
    "error500": (500, "text/plain", b"internal error"),
    "badquery": (
        400,
        "application/json",
        b'{"status":"error","errorType":"bad_data","error":"parse error at char 7"}',
    ),
}


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        kind = self.path.strip("/").split("/")[0]
        if kind == "hang":
            time.sleep(3)
        status, content_type, body = ANSWERS.get(kind, (404, "text/plain", b"not found"))
        with contextlib.suppress(ConnectionError):  # the collector gave up on a hang
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def odd_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("html", "/api/v1/query is not a Prometheus query result"),
        ("nodata", "/api/v1/query is not a Prometheus query result"),
        ("notvector", "/api/v1/query is not an instant vector"),
        ("notnumber", "a series value is not a number"),
        ("error500", "Prometheus: 500 from"),
        ("badquery", "Prometheus: 400 from"),
        ("elsewhere", "(is the URL a Prometheus server?"),
    ],
)
async def test_an_odd_answer_is_a_stale_sample_that_says_why(
    odd_server: str, kind: str, reason: str
) -> None:
    async with PrometheusCollector(f"{odd_server}/{kind}") as collector:
        sample = await collector.sample()
        with pytest.raises(SourceError) as refused:
            await collector.check()
    assert sample.stale and sample.source == "prometheus"
    assert reason in sample.stale_reason
    assert reason in refused.value.message
    if kind == "badquery":
        assert "parse error at char 7" in sample.stale_reason


async def test_a_hang_past_the_timeout_is_a_stale_sample(odd_server: str) -> None:
    async with PrometheusCollector(f"{odd_server}/hang", timeout=0.5) as collector:
        began = time.monotonic()
        sample = await collector.sample()
        took = time.monotonic() - began
    assert sample.stale and "no answer within 0.5 s" in sample.stale_reason
    assert took < 3  # did not wait for the server's answer


async def test_nothing_listening_is_a_stale_sample() -> None:
    async with PrometheusCollector("http://127.0.0.1:1") as collector:
        sample = await collector.sample()
        with pytest.raises(SourceError, match="cannot connect"):
            await collector.check()
    assert sample.stale
    assert sample.stale_reason == (
        "Prometheus: cannot connect to http://127.0.0.1:1 (connection refused)"
    )


async def test_range_query_refuses_an_empty_window_and_says_why_it_failed(
    odd_server: str,
) -> None:
    async with PrometheusCollector(f"{odd_server}/error500") as collector:
        with pytest.raises(SourceError, match="end after start"):
            await collector.range_query(10.0, 10.0)
        with pytest.raises(SourceError, match="500 from"):
            await collector.range_query(10.0, 20.0)


def test_a_missing_prometheus_binary_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    server = PrometheusServer(["127.0.0.1:15692"], base_dir=tmp_path / "p")
    with pytest.raises(SourceError, match="apt-get install prometheus"):
        server.start()
    assert not server.running


def test_a_target_must_be_host_and_port() -> None:
    with pytest.raises(SourceError, match=r"host:port, such as 127\.0\.0\.1:15692; got"):
        PrometheusServer(["http://127.0.0.1:15692/metrics"])
