"""Which source lines lie on a failing kernel's path: its own body and the functions it calls, transitively.

A per-launch gradcheck failure says *which* kernel's adjoint is wrong, not *why*. A quick-check rule hit
inside that kernel (or in a `wp.func` it calls) says why, at the line to change: the ranking joins the two,
so the failure becomes evidence for the rule hit instead of a generic hypothesis beside it. Functions are
found by name with `ast`, in the files the evidence names (the launch site's and the rule hit's), which is
where a kernel and its helpers are defined in practice; a name not found there is simply not followed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class _Function:
    lo: int
    hi: int
    calls: set[str] = field(default_factory=set)


def _index(path: Path) -> dict[str, list[_Function]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, OSError, UnicodeDecodeError, ValueError):
        return {}
    out: dict[str, list[_Function]] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            calls = {c.func.id if isinstance(c.func, ast.Name) else c.func.attr for c in ast.walk(n)
                     if isinstance(c, ast.Call) and isinstance(c.func, (ast.Name, ast.Attribute))}
            out.setdefault(n.name, []).append(_Function(n.lineno, n.end_lineno or n.lineno, calls))
    return out


class FailingPaths:
    """Function spans by name per workspace file, parsed once."""

    def __init__(self, workspace: Path) -> None:
        self.ws = workspace
        self._cache: dict[str, dict[str, list[_Function]]] = {}

    def _functions(self, file: str) -> dict[str, list[_Function]]:
        if file not in self._cache:
            p = Path(file) if Path(file).is_absolute() else self.ws / file
            self._cache[file] = _index(p)
        return self._cache[file]

    def on_path(self, kernel: str, files: list[str], file: str, line: int) -> bool:
        """`file:line` is inside `kernel` (found in `files`) or a function it calls, transitively."""
        seen: set[str] = set()
        frontier = [kernel.split(".")[-1]]
        while frontier:
            name = frontier.pop()
            if name in seen:
                continue
            seen.add(name)
            for f in dict.fromkeys([*files, file]):
                for fn in self._functions(f).get(name, []):
                    if f == file and fn.lo <= line <= fn.hi:
                        return True
                    frontier.extend(fn.calls - seen)
        return False
