"""Where the ledger's signing key lives. Its own module because two layers need it: the ledger signs with
the key, and the sandbox hides its folder from user code (a script that could read the key could forge)."""

from __future__ import annotations

import os
from pathlib import Path

KEY_DIR_ENV = "WARPGRAD_KEY_DIR"


def key_dir() -> Path:
    """`$WARPGRAD_KEY_DIR`, else the XDG state directory (never the workspace)."""
    if os.environ.get(KEY_DIR_ENV):
        return Path(os.environ[KEY_DIR_ENV])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "warpgrad"
