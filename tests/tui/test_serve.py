"""`flowdeck serve`: the cockpit served to a browser by textual-serve, on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flowdeck.collectors.local_broker import free_port

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]
#: Longest the server may take to answer its first request (imports on a loaded machine).
START_LIMIT = 30.0


def wait_for_page(url: str, server: subprocess.Popen[str]) -> httpx.Response:
    deadline = time.monotonic() + START_LIMIT
    while True:
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def served() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    server = subprocess.Popen(
        [*FLOWDECK, "serve", "--demo", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


@pytest.mark.timeout(90)
def test_serve_answers_with_the_textual_serve_page_on_loopback(
    served: tuple[str, subprocess.Popen[str]],
) -> None:
    url, server = served
    page = wait_for_page(url + "/", server)
    assert page.status_code == 200
    assert "<div>flowdeck demo</div>" in page.text  # the title on the page's start panel
    assert 'class="textual-terminal"' in page.text  # the page textual-serve draws into
    port = url.rsplit(":", 1)[1]
    assert f"ws://127.0.0.1:{port}/ws" in page.text
    # keys reach the terminal without a click: the page focuses xterm's input
    assert page.text.count(".xterm-helper-textarea") == 1 and "input.focus(" in page.text
    script = httpx.get(url + "/static/js/textual.js", timeout=5)
    assert script.status_code == 200 and len(script.content) > 10_000
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=15) == 0
    output = server.stdout.read() if server.stdout else ""
    assert "flowdeck.cli demo --shared " in output  # what each browser tab runs: one tour
    assert "Traceback" not in output


def test_serve_refuses_a_bad_port_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from flowdeck.cli import main

    assert main(["serve", "--port", "70000"]) == 2
    assert capsys.readouterr().err == "flowdeck serve: --port must be 1..65535, got 70000\n"
    assert main(["serve", "--scale", "0.5"]) == 2
    assert "--scale goes with --demo" in capsys.readouterr().err


def test_serve_says_when_the_port_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*FLOWDECK, "serve", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"flowdeck serve: cannot listen on 127.0.0.1:{port}:")
    assert "Traceback" not in result.stderr + result.stdout


def test_the_served_command_carries_no_broker_uri() -> None:
    """A URI (with its password) on the served command line would show in ps: the tab's
    app reads FLOWDECK_URI from the environment instead."""
    from flowdeck.cli import build_parser
    from flowdeck.cli.serve import served_command

    parser = build_parser()
    demo = served_command(parser.parse_args(["serve", "--demo", "--scale", "0.5"]))
    assert demo[0] == sys.executable and demo[-3:] == ["demo", "--scale", "0.5"]
    cockpit = served_command(parser.parse_args(["serve"]))
    assert cockpit[-1] == "cockpit"
    assert not any("amqp" in word for word in (*demo, *cockpit))
    shared = served_command(parser.parse_args(["serve", "--demo"]), Path("/tmp/tour"))
    assert shared[-3:] == ["demo", "--shared", "/tmp/tour"]


def test_one_tour_per_share_the_first_presents_the_others_watch(tmp_path: Path) -> None:
    """Each browser tab's process opens the same share: the first takes the presenter's
    lock, the others find it taken and wait for the run it names; when the presenter's
    process lets go (its tab closed), the next one presents."""
    from flowdeck.tui.tour_share import TourShare

    first, second = TourShare(tmp_path / "tour"), TourShare(tmp_path / "tour")
    assert first.present() and first.presenting
    assert not second.present() and not second.presenting
    assert not second.presenter_gone() and second.presented_run() is None
    first.publish(tmp_path / "sessions" / "20240101-tour")
    assert second.presented_run() == tmp_path / "sessions" / "20240101-tour"
    first.release()
    assert second.presenter_gone() and second.presented_run() is None
    assert second.present()
    # a new presenter names no run until its own has started
    assert TourShare(tmp_path / "tour").presented_run() is None


def test_a_second_process_watches_the_first_ones_tour(tmp_path: Path) -> None:
    """The lock is the kernel's: another process, not just another open file."""
    from flowdeck.tui.tour_share import TourShare

    share = TourShare(tmp_path / "tour")
    assert share.present()
    code = (
        "import sys; from pathlib import Path; from flowdeck.tui.tour_share import TourShare; "
        "s = TourShare(Path(sys.argv[1])); sys.exit(0 if not s.present() else 3)"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "tour")], timeout=60)
    assert result.returncode == 0
    share.release()
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "tour")], timeout=60)
    assert result.returncode == 3
