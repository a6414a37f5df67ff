"""Path safety: every path a tool, a command or warpgrad's own state names is confined to the workspace.

Paths from `.warpgrad/` (the backup index, a cloned repository's state) are treated exactly like a
model's tool arguments: a crafted index cannot name a file outside the workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

from .ledger import STATE_DIR
from .registry import ToolError


def resolve_path(workspace: Path, path: str | Path, *, allow_state: bool = False) -> Path:
    """Resolve a user- or model-given path against the workspace root, refusing anything outside it.

    Args:
        workspace: The workspace root.
        path: Workspace-relative path, or an absolute path that lies inside the workspace.
        allow_state: Allow paths inside `.warpgrad/` (only warpgrad's own code passes True).

    Returns:
        The absolute, symlink-free path inside the workspace.

    Raises:
        ToolError: The path is empty, leaves the workspace (absolute elsewhere, `..`, or a symbolic link
            that leads out), or points into `.warpgrad/`.
    """
    root = Path(workspace).resolve()
    raw = str(path).strip()
    if not raw:
        raise ToolError("empty path: give a path relative to the workspace root")
    p = Path(raw).expanduser()
    candidate = p if p.is_absolute() else root / p
    # Lexical check first, so `..` is refused even when the target does not exist.
    lexical = Path(os.path.normpath(candidate))
    if not lexical.is_relative_to(root):
        raise ToolError(f"{raw!r} is outside the workspace {root}: tools only read and write inside it; "
                        "give a path relative to the workspace root")
    real = candidate.resolve()  # follows every symlink on the way, existing or not
    if not real.is_relative_to(root):
        raise ToolError(f"{raw!r} is a symbolic link (or passes through one) that leads outside the workspace "
                        f"to {real}; tools do not follow links out of the workspace")
    if not allow_state and real.relative_to(root).parts[:1] == (STATE_DIR,):
        raise ToolError(f"{raw!r} is inside {STATE_DIR}/, warpgrad's own state (ledger, backups); tools do "
                        "not touch it directly")
    return real


def rel_or_raw(workspace: Path, file: str | None) -> str | None:
    """Workspace-relative path of `file` when it lies inside the workspace, else `file` unchanged."""
    if not file:
        return file
    try:
        return rel_path(workspace, Path(file))
    except (ValueError, OSError):
        return file


def rel_path(workspace: Path, path: Path) -> str:
    """Workspace-relative POSIX path of an absolute path inside the workspace."""
    return path.resolve().relative_to(Path(workspace).resolve()).as_posix()
