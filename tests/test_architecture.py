"""The parts keep their dependency rules (DESIGN.md): the core runs without the TUI."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.package_layout import make_layout

ROOT = Path(__file__).resolve().parents[1]
CORE = ("figures", "engine", "collectors", "spark_reports")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_import_linter_contracts_hold(tmp_path: Path) -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    environ = {**os.environ, "PYTHONPATH": str(make_layout(tmp_path))}
    result = subprocess.run(
        [str(lint)], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_spark_reports_reads_sessions_only_through_the_format_module() -> None:
    for path in (ROOT / "spark_reports").rglob("*.py"):
        for name in _imports(path):
            part = name.split(".")[1] if name.startswith("flowdeck.") else ""
            if part in ("engine", "collectors", "cli", "tui"):
                assert name == "flowdeck.engine.recording.format", f"{path.name} imports {name}"


@pytest.mark.slow
def test_core_and_headless_cli_work_without_textual() -> None:
    """Block Textual at import time, import every core module and run a headless command."""
    code = """
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "textual" or name.startswith("textual."):
            raise ImportError("textual is not installed")
        return None
sys.meta_path.insert(0, Block())
for top in ("flowdeck.figures", "flowdeck.engine", "flowdeck.collectors", "flowdeck.cli",
            "flowdeck.spark_reports"):
    package = importlib.import_module(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if not info.name.endswith(".__main__"):  # `python -m flowdeck.cli` opens the cockpit
            importlib.import_module(info.name)
from flowdeck.cli import main
sys.exit(main(["presets"]))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "bench1" in result.stdout


def test_the_face_contract_names_every_inner_module() -> None:
    """The TUI may import the engine and the collectors only through their package faces
    (``flowdeck.engine``, ``flowdeck.collectors``); the import-linter contract that says so
    lists their inner modules, and a new module must join that list."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"].startswith("The TUI uses the engine and the collectors only")
    ]
    on_disk = set()
    for part in ("engine", "collectors"):
        for path in (ROOT / part).rglob("*.py"):
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            dotted = dotted.removesuffix(".__init__")
            if dotted != part:
                on_disk.add(f"flowdeck.{dotted}")
    assert set(contract["forbidden_modules"]) == on_disk
