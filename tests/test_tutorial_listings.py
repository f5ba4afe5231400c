"""The tutorial's listings stay in step with what the commands print.

docs/tutorial-bench2.md shows the output of real runs, trimmed. Its figures are those runs'
own; their shape is the code's: every line of a `flowdeck run` listing must have the shape of
a line a run prints today (numbers, names, paths and addresses aside), and each listing must
show the lines a reader needs to recognise (the control endpoint, the drain, the per-phase
table). A tiny real run (a private node, the same preset at 1 s steps) gives the shapes, so a
changed progress line or table fails here until the tutorial is regenerated. The presets
listing must be what `flowdeck presets` prints, line for line.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flowdeck.figures import Verdict

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial-bench2.md"
FENCE = re.compile(r"^```([\w-]*)\s*\n(.*?)^```", re.DOTALL | re.MULTILINE)

#: What a reader of a run listing looks for, as the shape of its line.
REQUIRED = {
    "control endpoint": "control endpoint URL (run ID: flowdeck steer, flowdeck attach)",
    "drain": "[ N s] publishing stopped (duration reached); consumers drain for up to N s",
    "per-phase table": "phase seconds target publish confirm consume eNe pN pN pN verdict",
}


#: A phase's verdict ends its row in the per-phase table; which one depends on the run.
VERDICT_AT_END = re.compile(r"\s(" + "|".join(re.escape(v.value) for v in Verdict) + r")$")
#: The recommendation under the table: its words depend on the run's figures.
RECOMMENDATION = re.compile(r"^(recommended \w+=|no value meets every condition)")


def shape(line: str) -> str:
    """The line with what differs between runs and machines replaced by placeholders."""
    line = VERDICT_AT_END.sub(" VERDICT", line.rstrip())
    if RECOMMENDATION.match(line):
        return "RECOMMENDATION"
    line = re.sub(r"amqps?://[^\s,]+(,amqps?://[^\s,]+)*", "URI", line)
    line = re.sub(r"https?://\S+", "URL", line)
    line = re.sub(r"\d{8}-\d{6}-[\w-]+", "ID", line)
    line = re.sub(r"(?<![\w.])/[\w./-]+", "PATH", line)
    line = re.sub(r"\b[\w.-]+:\d+\b", "HOST", line)
    line = re.sub(r" \(\+\d+ more nodes?\)", "", line)
    line = re.sub(r"\bbench\d[\w-]*", "NAME", line)
    line = re.sub(r"process(es)?\b", "process", line)
    line = re.sub(r"\d[\d,]*(\.\d+)?", "N", line)
    line = re.sub(r"(?<=\s)-(?=\s|$)", "N", line)
    return " ".join(line.split())


def run_listings() -> list[tuple[str, list[str]]]:
    """(command, output lines) for every `flowdeck run` block and the text block after it."""
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(TUTORIAL.read_text("utf-8"))]
    found = []
    for (language, body), (next_language, output) in itertools.pairwise(blocks):
        command = " ".join(body.replace("\\\n", " ").split())
        if language == "sh" and command.startswith("flowdeck run ") and next_language == "text":
            lines = [line for line in output.splitlines() if line.strip() not in ("", "...")]
            found.append((command, lines))
    return found


def test_the_tutorial_shows_its_runs() -> None:
    commands = [command for command, _ in run_listings()]
    assert len(commands) >= 3, commands
    assert any("bench2-multi-sweep" in c for c in commands)


def test_the_presets_listing_is_what_flowdeck_presets_prints() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", "presets"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(TUTORIAL.read_text("utf-8"))]
    listing = next(
        output
        for (language, body), (_, output) in itertools.pairwise(blocks)
        if language == "sh" and body.strip().endswith("flowdeck presets")
    )
    shown = [line for line in listing.splitlines() if line.strip()]
    assert shown and all(line in printed for line in shown), set(shown) - set(printed)


@pytest.mark.slow
@pytest.mark.private_broker
@pytest.mark.timeout(240)
def test_every_run_listing_has_the_shape_of_what_a_run_prints(tmp_path: Path) -> None:
    tiny = "--preset bench2-sweep --scale 0.05 --rate 100 --step 1s --workers 1 --drain 1 --cleanup"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "flowdeck.cli",
            "run",
            *tiny.split(),
            "--sessions-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=200,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": ""},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    shapes = {shape(line) for line in run.stdout.splitlines()}
    assert set(REQUIRED.values()) <= shapes, "the run no longer prints a line the test expects"
    for command, lines in run_listings():
        unknown = [line for line in lines if shape(line) not in shapes]
        assert not unknown, f"{command}: lines no run prints today: {unknown[:5]}"
        listed = {shape(line) for line in lines}
        missing = [what for what, line in REQUIRED.items() if line not in listed]
        assert not missing, f"{command}: its listing lacks {missing}"
