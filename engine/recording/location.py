"""Where sessions are recorded: the one rule, light enough for a command line's first
checks (the recorder itself loads pyarrow and numpy)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

#: Environment variable naming the sessions root; ``--sessions-dir`` overrides it.
SESSIONS_DIR_ENV = "FLOWDECK_SESSIONS_DIR"


def default_sessions_root() -> Path:
    """``$FLOWDECK_SESSIONS_DIR`` if set, else ``sessions`` in the user's data directory."""
    configured = os.environ.get(SESSIONS_DIR_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_data_dir("flowdeck", appauthor=False)) / "sessions"
