"""Which workspace files a run imported, with their sha256: the evidence names the code it exercised.

A run forked from a worker or an FD hub inherits a few hundred modules, and resolving a module's path costs
a system call per path component: the resolved paths are kept for the life of the process (`resolved`), and
`prime` fills them before the process forks runs, so each run resolves only what it imported itself.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path

_RESOLVED: dict[str, Path] = {}
_INSTALLED = ("site-packages", ".venv", "venv")


def resolved(file: str) -> Path:
    """`Path(file).resolve()`, remembered for the life of the process (and of the processes forked from it)."""
    path = _RESOLVED.get(file)
    if path is None:
        path = _RESOLVED[file] = Path(file).resolve()
    return path


def prime() -> None:
    """Resolve the file of every module imported so far, once, before forking runs from this process."""
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f:
            resolved(f)


def workspace_files(workspace: Path, script: Path | None, extra: Iterable[str] = ()) -> dict[str, str]:
    """sha256 of every .py file under `workspace` that this process imported, plus `script` and `extra`, by
    workspace-relative path (warpgrad's own folder and installed packages left out)."""
    inside = str(workspace).rstrip(os.sep) + os.sep
    paths = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f:
            p = resolved(f)
            if str(p).startswith(inside):
                paths.add(p)
    if script:
        paths.add(script)
    paths.update(Path(e).resolve() for e in extra)
    out = {}
    for p in sorted(paths):
        if p.suffix != ".py" or ".warpgrad" in p.parts or not p.is_relative_to(workspace):
            continue
        rel = p.relative_to(workspace)
        if any(part in _INSTALLED for part in rel.parts) or not p.is_file():
            continue
        out[rel.as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out
