"""Which workspace files a run imported, with their sha256: the evidence names the code it exercised.

The hash is of the bytes Python compiled, taken as it read them (`install`: the script `runpy` runs and
every module imported from outside the Python installation are read once, hashed and compiled from those
same bytes), not of the file at the end of the run: a script that rewrites itself, or a module another
process edits meanwhile, is recorded as the code that ran, and `changed_during_run` names it.

A run forked from a worker or an FD hub inherits a few hundred modules, and resolving a module's path costs
a system call per path component: the resolved paths are kept for the life of the process (`resolved`), and
`prime` fills them before the process forks runs, so each run resolves only what it imported itself.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import io
import os
import runpy
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_RESOLVED: dict[str, Path] = {}
_INSTALLED = ("site-packages", ".venv", "venv")
_IMPORTED: dict[Path, str] = {}  # resolved path -> sha256 of the bytes compiled
_PYTHON_DIRS = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
_OURS = os.path.realpath(Path(__file__).parents[2]) + os.sep  # warpgrad's own files


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
    workspace-relative path (warpgrad's own folder and installed packages left out): of the bytes compiled
    for what was compiled here, of the file as it is now for the rest."""
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
        if any(part in _INSTALLED for part in rel.parts) or not (p.is_file() or p in _IMPORTED):
            continue
        # The bytes that ran, when this process compiled them (`install`); else the file as it is now.
        out[rel.as_posix()] = _IMPORTED.get(p) or hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _user_source(path: str) -> bool:
    """A `.py` file that is not part of the Python installation, its packages, or warpgrad."""
    if not path.endswith(".py"):
        return False
    real = os.path.realpath(path)
    return not real.startswith((*_PYTHON_DIRS, _OURS)) and not any(
        part in ("site-packages", "dist-packages") for part in Path(real).parts)


def _compiled(path: str, data: bytes, name: Any) -> Any:
    _IMPORTED[resolved(path)] = hashlib.sha256(data).hexdigest()
    return compile(data, name, "exec", dont_inherit=True)


_loader_get_code = importlib.machinery.SourceFileLoader.get_code
_runpy_get_code = getattr(runpy, "_get_code_from_file", None)


def _get_code(self: importlib.machinery.SourceFileLoader, fullname: str) -> Any:
    path = self.get_filename(fullname)
    if not _user_source(path):
        return _loader_get_code(self, fullname)
    # From the source, not a cached .pyc: the bytes hashed are the bytes compiled.
    return _compiled(path, self.get_data(path), path)


def _run_path_code(*args: Any) -> Any:
    # runpy's reader: (run_name, fname) -> (code, fname) up to 3.11, (fname) -> code from 3.12.
    fname = args[-1]
    path = os.path.abspath(os.fsdecode(fname))
    with io.open_code(path) as f:
        data = f.read()
    if data[:4] == importlib.util.MAGIC_NUMBER or _runpy_get_code is None:
        return _runpy_get_code(*args) if _runpy_get_code is not None else None
    code = _compiled(path, data, fname)
    return (code, fname) if len(args) == 2 else code


def install() -> None:
    """Hash what is compiled as it is read, from now on in this process and the ones forked from it."""
    importlib.machinery.SourceFileLoader.get_code = _get_code  # type: ignore[method-assign,assignment]
    if _runpy_get_code is not None:
        runpy._get_code_from_file = _run_path_code  # type: ignore[attr-defined]


def changed_during_run(workspace: Path) -> list[str]:
    """Workspace files whose bytes on disk differ now from the bytes compiled (or that are gone), by
    workspace-relative path."""
    out = []
    for p, digest in sorted(_IMPORTED.items()):
        if not p.is_relative_to(workspace):
            continue
        try:
            now = hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:
            now = None
        if now != digest:
            out.append(p.relative_to(workspace).as_posix())
    return out


# The harness imports this module before it runs user code: from then on, what is compiled is hashed.
install()
