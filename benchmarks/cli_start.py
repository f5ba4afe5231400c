"""How fast the command line answers a newcomer (issue 29): help pages and input errors.

For each command, the wall time from starting the interpreter to its exit (the median of
``--runs``, each a fresh process: what a user waits for), and for ``flowdeck run --help``
what ``python -X importtime`` says the imports took, the largest first.

    .venv/bin/python benchmarks/cli_start.py [--runs 5] [--checkout DIR]

``--checkout DIR`` measures another checkout of flowdeck (e.g. a ``git worktree`` of an
older commit) through a folder of links in its installed layout, with this environment's
packages: the before/after figures in benchmarks/README.md come from that.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import load_average

COMMANDS: tuple[tuple[str, list[str]], ...] = (
    ("flowdeck --help", ["--help"]),
    ("flowdeck run --help", ["run", "--help"]),
    ("flowdeck run --rate=-5 (an input error)", ["run", "--rate=-5"]),
    ("flowdeck run --preset bench2sweep (a misspelt preset)", ["run", "--preset", "bench2sweep"]),
    ("flowdeck steer prefech=5 (a misspelt setting)", ["steer", "prefech=5"]),
    ("flowdeck sessions list --sessions-dir FILE",
     ["sessions", "list", "--sessions-dir", "/etc/hostname"]),
)  # fmt: skip
PARTS = ("figures", "engine", "collectors", "cli", "tui", "spark_reports")
_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def layout_of(checkout: Path) -> Path:
    """A folder whose ``flowdeck/<part>`` links to the checkout's parts."""
    into = Path(tempfile.mkdtemp(prefix="flowdeck-start-"))
    (into / "flowdeck").mkdir()
    for part in PARTS:
        (into / "flowdeck" / part).symlink_to(checkout.resolve() / part)
    return into


def timed(words: list[str], env: dict[str, str]) -> float:
    began = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", *words],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    return time.monotonic() - began


def import_times(env: dict[str, str]) -> tuple[float, list[tuple[float, str]]]:
    """All imports' time for ``flowdeck run --help`` in ms, and the largest top-level ones."""
    code = (
        "from flowdeck.cli import main\n"
        'try:\n    main(["run", "--help"])\nexcept SystemExit:\n    pass'
    )
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    top: list[tuple[float, str]] = []
    for line in result.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match and len(match.group(3)) == 1:  # a top-level import: one space of indent
            top.append((int(match.group(2)) / 1000, match.group(4)))
    return sum(ms for ms, _ in top), sorted(top, reverse=True)[:8]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--checkout", type=Path, help="measure this checkout instead")
    options = parser.parse_args()
    env = {**os.environ, "FLOWDECK_URI": "", "COLUMNS": "100"}
    if options.checkout:
        env["PYTHONPATH"] = str(layout_of(options.checkout))
    print(f"{options.checkout or 'this checkout'}; {load_average()}")
    total, largest = import_times(env)
    print(f"imports for `flowdeck run --help`: {total:.0f} ms (python -X importtime, cumulative)")
    for ms, name in largest:
        print(f"    {ms:7.1f} ms  {name}")
    for what, words in COMMANDS:
        times = [timed(words, env) for _ in range(options.runs)]
        print(
            f"{what}: median {statistics.median(times):.2f} s "
            f"({min(times):.2f}-{max(times):.2f} s, {options.runs} runs)"
        )


if __name__ == "__main__":
    main()
