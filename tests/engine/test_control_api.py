"""The control endpoint of a headless ``flowdeck run``, steered as an operator's script would.

One run of the CLI in a subprocess serves the module (started once, stopped through the API
by the last test): changes in force (the prefetch one visible in the management API), the
token on every request, one-line 4xx for bad requests with the run going on, and the API
fuzzed from its own OpenAPI description without a 5xx or a crashed run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from flowdeck.engine.control import (
    ControlAddress,
    check_exposure,
    parse_control_address,
    running_runs,
)
from flowdeck.engine.control.registry import RunEntry, process_started, write_private
from flowdeck.engine.errors import SpecError
from flowdeck.engine.tls import TlsOptions
from tests.conftest import SHARED_MANAGEMENT_URL, SHARED_URI

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]


@dataclass
class SteeredRun:
    process: subprocess.Popen[str]
    entry: RunEntry
    runs_dir: Path
    queue: str
    log: Path

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.entry.token}"}

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.entry.url, headers=self.auth, timeout=30)

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def start_steerable_run(
    tmp: Path,
    queue_prefix: str,
    *,
    duration: str = "120s",
    extra: tuple[str, ...] = (),
    cleanup: bool = True,
    runs: Path | None = None,
) -> SteeredRun:
    """A headless run of one publisher and one consumer on the shared broker, in-process
    workers (quick to start), its endpoint listed in a runs directory of its own (or in
    ``runs``, beside other runs). ``cleanup=False`` keeps the queues (and their counts)
    for the test to read."""
    runs = runs or tmp / "runs"
    log = tmp / f"run-{queue_prefix}.log"
    env = {**os.environ, "FLOWDECK_RUNS_DIR": str(runs), "FLOWDECK_URI": ""}
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                *FLOWDECK,
                "run",
                f"--uri={SHARED_URI}",
                "--queues=1",
                "--publishers=1",
                "--consumers=1",
                "--rate=100",
                "--inflight=50",
                "--prefetch=10",
                f"--duration={duration}",
                "--workers=0",
                f"--queue-pattern={queue_prefix}-%d",
                *(["--cleanup"] if cleanup else []),
                "--no-record",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    # A bound: the endpoint is listed once the workers have booted, which for Spark-placed
    # workers on a busy machine took longer than 80 s (the run said "still starting").
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        listed = [r for r in running_runs(runs) if r.pid == process.pid]
        if listed:
            return SteeredRun(process, listed[0], runs, f"{queue_prefix}-1", log)
        if process.poll() is not None:
            break
        time.sleep(0.2)
    process.kill()
    raise AssertionError(f"the run listed no endpoint: {log.read_text()}")


def end_run(run: SteeredRun) -> None:
    if run.process.poll() is None:
        try:
            with run.api() as api:
                api.post("/stop")
            run.process.wait(timeout=40)
        except (httpx.HTTPError, subprocess.TimeoutExpired):
            run.process.kill()
            run.process.wait(timeout=10)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SteeredRun]:
    tmp = tmp_path_factory.mktemp("control")
    steered = start_steerable_run(tmp, f"flowdeck-test-control-{os.getpid()}")
    yield steered
    end_run(steered)


def one_line_error(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert "\n" not in body["error"] and body["error"]
    return str(body["error"])


def ticks_advance(api: httpx.Client) -> bool:
    """Whether the run is running and its ticks keep coming (its loop is alive): two new
    ticks after this call, looked for over up to 15 s as a loaded machine may tick late
    (and a run just started has none yet)."""
    seen: set[float] = set()
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline:
        status = api.get("/status").json()
        if status["state"] != "running":
            return False
        if status["tick"]:
            seen.add(status["tick"]["elapsed"])
            if len(seen) >= 2:
                return True
        time.sleep(0.5)
    return False


def consumer_prefetch(management_url: str, queue: str) -> list[int]:
    """The prefetch of each consumer on ``queue``, as the broker's management API says."""
    with httpx.Client(base_url=management_url, auth=("guest", "guest"), timeout=10) as api:
        consumers = api.get("/api/consumers").json()
    return [c["prefetch_count"] for c in consumers if c["queue"]["name"] == queue]


# -- no broker -----------------------------------------------------------------------------


def test_control_addresses_parse_and_only_loopback_is_open_by_default() -> None:
    assert parse_control_address("127.0.0.1:8089") == ControlAddress("127.0.0.1", 8089)
    assert parse_control_address("[::1]:0") == ControlAddress("::1", 0)
    assert parse_control_address("9000") == ControlAddress("127.0.0.1", 9000)
    assert parse_control_address("localhost:1").loopback
    for bad in ("nowhere", "1.2.3.4:99999", "host:port"):
        with pytest.raises(SpecError):
            parse_control_address(bad)
    wide = parse_control_address("0.0.0.0:8089")
    check_exposure(ControlAddress(), allow_remote=False, tls=TlsOptions())
    with pytest.raises(SpecError, match="--control-allow-remote"):
        check_exposure(wide, allow_remote=False, tls=TlsOptions())
    with pytest.raises(SpecError, match="needs TLS"):
        check_exposure(wide, allow_remote=True, tls=TlsOptions())
    check_exposure(wide, allow_remote=True, tls=TlsOptions(cert_file="c.pem", key_file="k.pem"))


def test_a_remote_endpoint_without_tls_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [*FLOWDECK, "run", "--uri", SHARED_URI, "--control", "0.0.0.0:8089", "--duration=5s"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FLOWDECK_RUNS_DIR": str(tmp_path)},
    )
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("flowdeck: --control 0.0.0.0:8089 listens beyond")
    assert not any(tmp_path.iterdir())  # refused before anything started


def test_entries_of_gone_processes_are_ignored_and_removed(tmp_path: Path) -> None:
    me = os.getpid()
    alive = RunEntry(
        "alive-run", "a", time.time(), "http://127.0.0.1:1", "t", me, process_started(me) or 0
    )
    gone = RunEntry("gone-run", "g", time.time(), "http://127.0.0.1:2", "t", me, 1.0)  # pid reused
    for entry in (alive, gone):
        write_private(tmp_path / f"{entry.run_id}.json", entry)
    assert (tmp_path / "alive-run.json").stat().st_mode & 0o777 == 0o600
    assert [r.run_id for r in running_runs(tmp_path)] == ["alive-run"]
    assert not (tmp_path / "gone-run.json").exists()


# -- a running run -------------------------------------------------------------------------


@pytest.mark.broker
@pytest.mark.timeout(120)
def test_inflight_and_prefetch_changes_come_into_force(run: SteeredRun) -> None:
    assert (run.runs_dir / f"{run.entry.run_id}.json").stat().st_mode & 0o777 == 0o600
    with run.api() as api:
        status = api.get("/status").json()
        assert status["state"] == "running"
        assert status["spec"]["uri"] == "amqp://guest:***@127.0.0.1:5672/%2F"
        assert "guest:guest" not in json.dumps(status)
        assert status["settings"]["in_force"]["inflight"] == 50

        inflight = api.post("/changes", json={"change": "inflight=200"})
        assert inflight.status_code == 200, inflight.text
        answer = inflight.json()
        assert answer["in_force"] and answer["change"] == "inflight=200"
        assert 0 <= answer["in_force_after_ms"] < 10_000
        prefetch = api.post("/changes", json={"change": "prefetch=37"})
        assert prefetch.status_code == 200, prefetch.text
        print(
            f"\ninflight=200 in force after {answer['in_force_after_ms']} ms, "
            f"prefetch=37 after {prefetch.json()['in_force_after_ms']} ms"
        )

        settings = api.get("/status").json()["settings"]
        assert settings["in_force"]["inflight"] == 200
        assert settings["in_force"]["prefetch"] == 37
        assert api.get(f"/changes/{answer['id']}").json()["in_force"] is True

    # The broker's own figure: the consumer now has prefetch 37 (stats lag a little).
    deadline = time.monotonic() + 30
    seen: list[int] = []
    while time.monotonic() < deadline:
        seen = consumer_prefetch(SHARED_MANAGEMENT_URL, run.queue)
        if seen == [37]:
            break
        time.sleep(0.5)
    assert seen == [37], f"management API shows prefetch {seen} on {run.queue}"


@pytest.mark.broker
@pytest.mark.timeout(60)
def test_requests_without_or_with_a_wrong_token_are_refused(run: SteeredRun) -> None:
    url = run.entry.url
    wrong = {"Authorization": "Bearer not-the-token"}
    basic = {"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="}
    with httpx.Client(base_url=url, timeout=10) as http:
        for method, path in (
            ("GET", "/status"),
            ("POST", "/changes"),
            ("GET", "/stream"),
            ("POST", "/stop"),
            ("GET", "/openapi.json"),
            ("GET", "/no-such-thing"),
        ):
            for headers in ({}, wrong, basic):
                response = http.request(method, path, headers=headers, json={"change": "pause"})
                assert response.status_code == 401, (method, path, headers, response.text)
                one_line_error(response)
    with run.api() as api:
        assert api.get("/status").json()["settings"]["in_force"]["paused"] is False


@pytest.mark.broker
@pytest.mark.timeout(60)
def test_bad_requests_get_one_line_4xx_and_the_run_goes_on(run: SteeredRun) -> None:
    with run.api() as api:
        cases: list[tuple[int, httpx.Response]] = [
            (400, api.post("/changes", json={"change": "prefetch=70000"})),
            (400, api.post("/changes", json={"change": "speed=3"})),
            (400, api.post("/changes", json={"change": ""})),
            (400, api.post("/changes", json={"change": 200})),
            (400, api.post("/changes", json=["inflight=1"])),
            (400, api.post("/changes", content=b"inflight=200")),
            (400, api.post("/changes", content=b"[" * 50_000)),
            (400, api.post("/changes", json={"change": "mark " + "x" * 600})),
            (400, api.post("/changes", params={"wait": "soon"}, json={"change": "inflight=1"})),
            (400, api.post("/changes", params={"wait": "nan"}, json={"change": "inflight=1"})),
            (400, api.get("/changes/abc")),
            (404, api.get("/changes/999999")),
            (404, api.get("/nowhere")),
            (405, api.delete("/status")),
            (413, api.post("/changes", content=b"x" * 2_000_000)),  # over 1 MiB
        ]
        messages = {}
        for expected, response in cases:
            assert response.status_code == expected, (response.request.url, response.text)
            messages[expected] = one_line_error(response)
        assert cases[0][1].json()["error"] == "prefetch must be 0..65535, got 70000"
        assert ticks_advance(api)


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(120)
def test_the_api_fuzzed_from_its_openapi_description_gives_no_5xx(run: SteeredRun) -> None:
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation import GenerationMode
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    with run.api() as api:
        description = api.get("/openapi.json").json()
    schema = schemathesis.openapi.from_dict(description)
    # /stop would end the run, /stream never ends and /autotune would start an autopilot
    # that steers (and, with then=stop, ends) the run: each is tested on its own.
    operations = [
        result.ok()
        for result in schema.exclude(path_regex="^/(stop|stream|autotune)$").get_all_operations()
    ]
    assert {op.path for op in operations} == {
        "/status",
        "/changes",
        "/changes/{change_id}",
        "/schedule/skip",
        "/schedule/resume",
        "/autotune/stop",
        "/openapi.json",
    }
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]
    calls = 0
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=12,
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: Any) -> None:
                nonlocal calls
                calls += 1
                if case.query is not None and "wait" in case.query:
                    case.query["wait"] = 0  # no request waits on a change: the test is bounded
                response = case.call(base_url=run.entry.url, headers=run.auth, timeout=30)
                assert response.status_code < 500, response.text
                case.validate_response(response, checks=checks)

            call()
    print(f"\n{calls} generated requests, no 5xx")
    with run.api() as api:
        assert ticks_advance(api)
    assert run.process.poll() is None


@pytest.mark.broker
@pytest.mark.timeout(120)
def test_stream_carries_ticks_and_events_and_stop_ends_the_run(run: SteeredRun) -> None:
    """Last in the module: it ends the module's run."""
    kinds: list[str] = []
    with (
        httpx.Client(timeout=httpx.Timeout(30, read=30)) as http,
        http.stream("GET", run.entry.url + "/stream", headers=run.auth) as stream,
    ):
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kinds.append(line.removeprefix("event: "))
            if kinds.count("tick") >= 3 and len(kinds) > 4:
                break
    assert kinds[0] == "status" and "event" in kinds and "tick" in kinds

    with run.api() as api:
        stopped = api.post("/stop")
        assert stopped.status_code == 202, stopped.text
        again = api.post("/stop")
        assert again.status_code in (202, 409)
    assert run.process.wait(timeout=60) == 0, run.output()
    output = run.output()
    assert "stopped through the control endpoint" in output
    assert "change #1 in effect in every worker" in output
    assert not any(run.runs_dir.glob("*.json")), "the endpoint file outlived the run"
