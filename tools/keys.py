"""Where the ledger's signing key lives. Its own module because two layers need it: the ledger signs with
the key, and the sandbox hides its folder from user code (a script that could read the key could forge)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

KEY_DIR_ENV = "WARPGRAD_KEY_DIR"


def key_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$WARPGRAD_KEY_DIR`, else the XDG state directory (never the workspace); of `env`, default this process's."""
    env = os.environ if env is None else env
    if env.get(KEY_DIR_ENV):
        return Path(env[KEY_DIR_ENV])
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "warpgrad"
