"""The installed package layout (``flowdeck/engine``, ``flowdeck/tui``, ...) as a folder of
links to the repository's top-level parts, for tools that find packages by folder rather
than through the editable install's import hook (mypy, import-linter).

``python -m tests.package_layout`` makes one in a new temporary folder and prints its path.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The repository's top-level folders that install as ``flowdeck.<name>``.
PARTS = ("figures", "engine", "collectors", "cli", "tui", "spark_reports")


def make_layout(into: Path) -> Path:
    """``into/flowdeck/<part>`` linked to each part; returns ``into``."""
    package = into / "flowdeck"
    package.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        (package / part).symlink_to(ROOT / part, target_is_directory=True)
    return into


if __name__ == "__main__":
    print(make_layout(Path(tempfile.mkdtemp(prefix="flowdeck-layout-"))))
    sys.exit(0)
