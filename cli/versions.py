"""``flowdeck --version``: flowdeck's version and the versions of what it works with.

Quick by design (well under a second when nothing answers slowly): the installed
RabbitMQ and Erlang are read from their install directories rather than by starting
``rabbitmqctl`` (several seconds of Elixir start-up); the broker named by ``FLOWDECK_URI``
is asked through its management API with a short timeout; Spark's version comes from the
package metadata, without starting a JVM.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

#: Where Debian/Ubuntu, the generic-unix tarball and Homebrew put RabbitMQ's apps.
RABBITMQ_LIB_DIRS = (
    "/usr/lib/rabbitmq/lib",
    "/usr/local/lib/rabbitmq/lib",
    "/opt/rabbitmq/lib",
    "/opt/homebrew/opt/rabbitmq/lib",
    "/usr/local/opt/rabbitmq/lib",
)
BROKER_TIMEOUT = 1.5
NOT_FOUND = "not found"


def flowdeck_version() -> str:
    try:
        return version("flowdeck")
    except PackageNotFoundError:
        return "unknown"


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def installed_rabbitmq(lib_dirs: tuple[str, ...] = RABBITMQ_LIB_DIRS) -> str | None:
    """The RabbitMQ version installed on this machine, from ``rabbitmq_server-X.Y.Z``."""
    found: list[tuple[tuple[int, ...], str]] = []
    for root in lib_dirs:
        try:
            entries = list(Path(root).iterdir())
        except OSError:
            continue
        for entry in entries:
            match = re.fullmatch(r"rabbitmq_server-(\d+(?:\.\d+)*)", entry.name)
            if match:
                text = match.group(1)
                found.append((tuple(int(p) for p in text.split(".")), text))
    if found:
        return max(found)[1]
    if shutil.which("rabbitmqctl") is None:
        return None
    return _run_for_version(["rabbitmqctl", "version"], r"(\d+\.\d+\.\d+)")


def installed_erlang() -> str | None:
    """The Erlang/OTP version of the ``erl`` on PATH, from its OTP_VERSION file."""
    erl = shutil.which("erl")
    if erl is None:
        return None
    root = Path(erl).resolve().parent.parent  # <root>/bin/erl
    for candidate in sorted(root.glob("releases/*/OTP_VERSION"), reverse=True):
        try:
            return candidate.read_text(encoding="utf-8").strip()
        except OSError:
            continue
    return _run_for_version(
        ["erl", "-noshell", "-eval", 'io:fwrite("~s", [erlang:system_info(otp_release)]), halt().'],
        r"(\d+(?:\.\d+)*)",
    )


def _run_for_version(command: list[str], pattern: str) -> str | None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=8, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, result.stdout)
    return match.group(1) if match else None


def broker_versions(
    uri: str, timeout: float = BROKER_TIMEOUT, management_url: str | None = None
) -> tuple[str, str] | str:
    """(RabbitMQ, Erlang) versions of the broker at ``uri`` from its management API (the
    usual one for the uri unless ``management_url`` says), or why they could not be read.
    """
    import httpx

    from flowdeck.collectors import Broker

    try:
        broker = Broker.parse(uri, management_url=management_url)
        url = broker.usual_management_url
        user, password = broker.management_login
    except Exception as exc:  # a malformed FLOWDECK_URI: say so, --version still works
        return f"bad FLOWDECK_URI ({exc})"
    try:
        response = httpx.get(
            url.rstrip("/") + "/api/overview",
            params={"columns": "rabbitmq_version,erlang_version"},
            auth=(user, password),
            timeout=timeout,
        )
    except httpx.HTTPError as exc:
        return f"management API at {url} did not answer ({type(exc).__name__})"
    if response.status_code != 200:
        return f"management API at {url} answered HTTP {response.status_code}"
    try:
        body = response.json()
        return str(body["rabbitmq_version"]), str(body["erlang_version"])
    except (ValueError, KeyError, TypeError):
        return f"management API at {url} gave no versions"


def version_lines(environ: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    lines = [
        f"flowdeck {flowdeck_version()}",
        f"Python {platform.python_version()} ({platform.python_implementation()})",
    ]
    textual = package_version("textual")
    lines.append(
        f"Textual {textual}" if textual else "Textual not installed (the cockpit needs it)"
    )
    rabbitmq = installed_rabbitmq()
    erlang = installed_erlang()
    lines.append(f"RabbitMQ {rabbitmq or NOT_FOUND} (installed on this machine)")
    lines.append(f"Erlang/OTP {erlang or NOT_FOUND} (installed on this machine)")
    uri = env.get("FLOWDECK_URI", "")
    if uri:
        from flowdeck.collectors import redact

        answer = broker_versions(uri)
        where = redact(uri)
        if isinstance(answer, tuple):
            lines.append(f"broker {where}: RabbitMQ {answer[0]}, Erlang/OTP {answer[1]}")
        else:
            lines.append(f"broker {where}: {answer}")
    spark = package_version("pyspark")
    lines.append(
        f"Spark (pyspark) {spark}"
        if spark
        else "Spark not installed (pip install flowdeck[reports])"
    )
    return lines


def print_versions() -> None:
    print("\n".join(version_lines()))
