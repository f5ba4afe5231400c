"""A newcomer's first hour with the command line: help and input errors that do not load
the engine's clients, names that say what was probably meant, completion of the values
flowdeck knows, a uri on the management port named as such, and every wait of a run on a
private node said as it starts.

How fast the answers come is measured in benchmarks/cli_start.py; here, what is loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowdeck.cli.completion import completion_script
from flowdeck.engine.recording.recorder import Recorder
from flowdeck.engine.spec import RunSpec
from tests.conftest import SHARED_URI

FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]
#: What a help page or an input error must not load: the clients, the collectors' HTTP,
#: the session reader, the report job, the cockpit.
HEAVY = ("aio_pika", "httpx", "numpy", "pyarrow", "pandas", "psutil", "textual", "pyspark")


def flowdeck(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FLOWDECK_URI": "", **env},
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "words",
    [
        ["--help"],
        ["run", "--help"],
        ["steer", "--help"],
        ["run", "--rate=-5"],
        ["run", "--preset", "bench2sweep"],
        ["run", "--drain=-5"],
        ["steer", "prefech=5"],
        ["sessions", "list", "--sessions-dir", "/etc/hostname"],
        ["runn"],
    ],
)
def test_help_and_input_errors_load_none_of_the_heavy_parts(words: list[str]) -> None:
    probe = (
        "import sys\nfrom flowdeck.cli import main\n"
        f"try:\n    main({words!r})\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", "import json\n" + probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FLOWDECK_URI": ""},
    )
    loaded = json.loads(result.stderr.splitlines()[-1])
    assert loaded == [], f"{words} loaded {loaded}"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["runn"], "flowdeck: unknown command 'runn' (did you mean 'run'?); the commands are "),
        (
            ["run", "--prefech", "5"],
            "flowdeck run: unrecognized arguments: --prefech 5 (did you mean '--prefetch'?); "
            "see flowdeck run --help",
        ),
        (
            ["run", "--preset", "bench2sweep"],
            "flowdeck: unknown preset 'bench2sweep' (did you mean 'bench2-sweep'?); "
            "`flowdeck presets` lists all ",
        ),
        (
            ["run", "--change", "10s:prefech=5"],
            "flowdeck: change '10s:prefech=5': unknown setting 'prefech' (did you mean "
            "'prefetch'?); use one of: ",
        ),
        (
            ["steer", "prefech=5"],
            "flowdeck: unknown setting 'prefech' (did you mean 'prefetch'?); use one of: ",
        ),
        (
            ["run", "--queue-type", "quourm"],
            "flowdeck: queue_type must be one of classic, quorum, stream, got 'quourm' "
            "(did you mean 'quorum'?)",
        ),
    ],
)
def test_a_near_miss_says_what_was_probably_meant(args: list[str], says: str) -> None:
    result = flowdeck(*args)
    assert result.returncode == 2, result.stderr
    assert one_line(result).startswith(says), result.stderr


def test_a_near_miss_session_id_is_named(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path, RunSpec(name="sweep"))
    recorder.start(1_700_000_000.0)
    recorder.close("completed", {}, 1_700_000_001.0)
    typo = recorder.session_id.replace("sweep", "swep")
    result = flowdeck("sessions", "show", typo, "--sessions-dir", str(tmp_path))
    assert result.returncode == 1
    assert f"(did you mean {recorder.session_id!r}?)" in one_line(result)
    listed = flowdeck("sessions", "list", "--ids", "--sessions-dir", str(tmp_path))
    assert listed.stdout.splitlines() == [recorder.session_id]


def test_the_leader_locator_help_names_its_empty_choice() -> None:
    page = " ".join(flowdeck("run", "--help").stdout.split())
    assert "(one of empty (the default), client-local, balanced)" in page
    assert "(, client-local" not in page


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_presets_enumerated_values_and_session_ids(tmp_path: Path) -> None:
    for name in ("20240101-000000-first-run-1a2b", "20240102-000000-second-run-3c4d"):
        (tmp_path / "sessions" / name).mkdir(parents=True)
        (tmp_path / "sessions" / name / "manifest.json").write_text("{}")
    script = tmp_path / "flowdeck.bash"
    script.write_text(completion_script("bash"))
    cases = {
        "flowdeck run --preset bench2-s": "bench2-sweep",
        "flowdeck run --queue-type q": "quorum",
        "flowdeck run --autotune a": "ack_every",
        "flowdeck run --leader-locator b": "balanced",
        "flowdeck sessions show 202401": "20240101-000000-first-run-1a2b "
        "20240102-000000-second-run-3c4d",
        "flowdeck report 20240102": "20240102-000000-second-run-3c4d",
    }
    driver = [f"source {script}"]
    driver.append(
        'complete_line() { read -ra COMP_WORDS <<< "$1"; COMP_CWORD=$((${#COMP_WORDS[@]}-1)); '
        'COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; COMPREPLY=(); _shtab_flowdeck; '
        'echo "${COMPREPLY[*]}"; }'
    )
    driver += [f'complete_line "{line}"' for line in cases]
    result = subprocess.run(
        ["bash", "-c", "\n".join(driver)],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "FLOWDECK_SESSIONS_DIR": str(tmp_path / "sessions"),
        },
    )
    assert result.stdout.splitlines() == list(cases.values()), result.stderr


@pytest.mark.broker
@pytest.mark.timeout(120)
def test_a_uri_on_the_management_port_is_named_at_once() -> None:
    management = SHARED_URI.replace(":5672/", ":15672/")
    began = time.monotonic()
    result = flowdeck("run", "--uri", management, "--duration", "3", "--no-record")
    took = time.monotonic() - began
    assert result.returncode == 1, result.stderr
    assert one_line(result).endswith(
        "answers HTTP, not AMQP: 15672 is RabbitMQ's management API (HTTP) port; give the "
        "AMQP port in the uri, usually 5672 (5671 for amqps)"
    )
    print(f"\nmanagement port refused after {took:.1f} s")
    assert took < 60  # the broker's own HTTP timeout was the bound before (17 s measured)


@pytest.mark.private_broker
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_wait_of_a_run_on_a_private_node_is_said() -> None:
    """The node's boot, the run's start, the drain and the node's stop each have a line
    before the wait, and the summary comes before the node is stopped."""
    result = flowdeck("run", "--duration", "3", "--rate", "20", "--no-record")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()

    def first(prefix: str) -> int:
        return next(i for i, line in enumerate(lines) if prefix in line)

    boot = first("starting a private RabbitMQ node (the node boots, then its management")
    up = first("private node up in")
    starting = first("starting: the broker's limits are checked, 1 queue(s) declared")
    started = first("run 'custom' started against")
    drain = first("publishing stopped (duration reached); consumers drain for up to 5 s")
    summary = first("run custom completed (duration reached)")
    stopping = first("stopping the private RabbitMQ node ...")
    stopped = first("private node stopped in")
    assert boot < up < starting < started < drain < summary < stopping < stopped
    assert stopped == len(lines) - 1
