"""The wheel installs into a fresh virtual environment and gives a working ``flowdeck``:
every package and data file is in it, the cockpit's dependencies come along, PySpark does
not (it is the ``reports`` extra)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from flowdeck.engine.presets import PRESETS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("figures", "engine", "collectors", "cli", "tui", "spark_reports")


def _run(command: list[str], timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )  # type: ignore[call-overload]
    assert result.returncode == 0, (
        f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n"
        f"{result.stderr[-3000:]}"
    )
    return result  # type: ignore[no-any-return]


def _source_copy(target: Path) -> Path:
    """The project's packaging inputs in a directory of their own, so the build leaves no
    build/ or egg-info behind in the shared working tree (and picks up no stale ones)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, target / package, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, target / name)
    return target


def _expected_files() -> tuple[set[str], set[str]]:
    """(package directories, data files) the wheel must hold, from the source tree."""
    packages, data = set(), set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            if "__pycache__" in path.parts:
                continue
            relative = path.relative_to(ROOT).as_posix()
            # each part installs as flowdeck.<part>: engine/spec.py is flowdeck/engine/spec.py
            if path.name == "__init__.py":
                packages.add(f"flowdeck/{path.parent.relative_to(ROOT).as_posix()}")
            elif path.is_file() and path.suffix not in (".py", ".pyc"):
                data.add(f"flowdeck/{relative}")
    return packages, data


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_wheel_installs_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    source = _source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        timeout=300,
    )
    wheels = list(dist.glob("flowdeck-*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    names = set(zipfile.ZipFile(wheel).namelist())
    packages, data = _expected_files()
    missing_packages = sorted(p for p in packages if f"{p}/__init__.py" not in names)
    assert not missing_packages, f"packages not in the wheel: {missing_packages}"
    missing_data = sorted(d for d in data if d not in names)
    assert not missing_data, f"data files not in the wheel: {missing_data}"
    assert "flowdeck/tui/app.tcss" in names  # the cockpit's stylesheet
    # one package, flowdeck: nothing that could collide with another project's "engine"
    tops = {n.split("/")[0] for n in names if not n.startswith("flowdeck-")}
    assert tops == {"flowdeck"}, tops

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], timeout=120)  # no system site packages
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.pop("FLOWDECK_URI", None)
    # --no-compile: byte-compiling every dependency is half the install's time, and the
    # commands below compile what they import anyway.
    install = [str(bin_dir / "pip"), "install", "-q", "--no-compile", "--disable-pip-version-check"]
    _run([*install, str(wheel)], timeout=600, env=env)

    flowdeck = str(bin_dir / "flowdeck")
    version = _run([flowdeck, "--version"], timeout=60, env=env, cwd=tmp_path).stdout
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    lines = version.splitlines()
    assert lines[0] == f"flowdeck {expected}"
    assert any(line.startswith("RabbitMQ ") for line in lines)
    assert any(line.startswith("Erlang/OTP ") for line in lines)
    assert "Spark not installed (pip install flowdeck[reports])" in lines

    presets = _run([flowdeck, "presets"], timeout=60, env=env, cwd=tmp_path).stdout
    listed = {line.split()[0] for line in presets.splitlines() if line.strip()}
    assert set(PRESETS) <= listed

    python = str(bin_dir / "python")
    site = _run(
        [python, "-c", "import flowdeck.engine, sysconfig; print(sysconfig.get_path('purelib'))"],
        timeout=60,
        env=env,
        cwd=tmp_path,
    ).stdout.strip()
    installed = {p.name for p in Path(site).iterdir()}
    assert "flowdeck" in installed
    assert not installed & set(PACKAGES), f"top-level parts in site-packages: {installed}"
    # the cockpit comes with the plain install; PySpark, pandas and matplotlib do not
    probe = (
        "import importlib.util as u, flowdeck.tui.app; "
        "print(all(u.find_spec(m) is None for m in ('pyspark', 'pandas', 'matplotlib')))"
    )
    assert _run([python, "-c", probe], timeout=60, env=env, cwd=tmp_path).stdout.strip() == "True"
    completion = _run([flowdeck, "completion", "bash"], timeout=60, env=env, cwd=tmp_path).stdout
    assert "import-perftest" in completion
    spec = _run(
        [flowdeck, "import-perftest", "-x 2 -y 2 -qq -r 100 -c 50 -z 30"],
        timeout=60,
        env=env,
        cwd=tmp_path,
    ).stdout
    assert 'queue_type = "quorum"' in spec


@pytest.mark.broker
def test_version_names_the_broker_of_flowdeck_uri(shared_uri: str) -> None:
    from flowdeck.cli.versions import version_lines

    lines = version_lines({"FLOWDECK_URI": shared_uri})
    broker = [line for line in lines if line.startswith("broker ")]
    assert len(broker) == 1
    assert "RabbitMQ 3." in broker[0] and "Erlang/OTP " in broker[0]
    assert "guest:***@" in broker[0]  # never the password


def test_version_says_when_the_broker_does_not_answer() -> None:
    from flowdeck.cli.versions import broker_versions

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    answer = broker_versions(
        "amqp://guest:guest@127.0.0.1/%2F", timeout=1, management_url=f"http://127.0.0.1:{closed}"
    )
    assert isinstance(answer, str) and "did not answer" in answer


def test_version_finds_rabbitmq_in_an_install_directory(tmp_path: Path) -> None:
    from flowdeck.cli.versions import installed_rabbitmq

    for name in ("rabbitmq_server-3.9.29", "rabbitmq_server-3.10.8", "rabbit_common-3.10.8"):
        (tmp_path / name).mkdir()
    assert installed_rabbitmq((str(tmp_path),)) == "3.10.8"


@pytest.mark.parametrize("shell", ["bash", "zsh", "tcsh"])
def test_completion_script_knows_every_command_and_the_new_flags(shell: str) -> None:
    from flowdeck.cli import COMMAND_MODULES
    from flowdeck.cli.completion import completion_script

    script = completion_script(shell)
    for module in COMMAND_MODULES:
        assert module.replace("_", "-") in script
    if shell != "tcsh":  # tcsh completes commands and files, not each subcommand's flags
        assert "--perftest" in script and "--metrics-port" in script
