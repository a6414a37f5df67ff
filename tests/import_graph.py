"""The package's import graph, read from the source with `ast` (nothing is imported).

`python tests/import_graph.py` prints the imports deferred into functions, every layer violation and
every cycle; `tests/test_import_layers.py` asserts there are none. An edge is recorded wherever the
import statement sits (module level, inside a function, under `if TYPE_CHECKING:`): an import deferred
into a function still makes the two modules depend on each other, it only hides the cycle from Python.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "warpgrad"
# Third-party modules only the child process may import (the harness is where Warp runs).
CHILD_ONLY = ("warp",)
# The one harness module both processes import: the config and result models of the process boundary.
PROTOCOL = f"{PACKAGE}.tools.harness.protocol"


@dataclass(frozen=True)
class Edge:
    src: str  # importing module, dotted ("warpgrad.tools.fd")
    dst: str  # imported module, dotted; a package's __init__ when the import names the package
    line: int
    deferred: bool  # inside a function body (not at module level or in a module-level block)
    type_only: bool  # under `if TYPE_CHECKING:` (never executed)


def package_root() -> Path:
    """The directory of the installed (or editable) `warpgrad` package."""
    import warpgrad

    return Path(warpgrad.__file__).resolve().parent


def module_files(root: Path) -> dict[str, Path]:
    """{dotted module name: file} for every module of the package that ships (tests, evals data excluded)."""
    out: dict[str, Path] = {}
    for sub in ("", "agent", "cli", "tools", "tools/harness", "tools/quickchecks", "evals"):
        d = root / sub if sub else root
        if not (d / "__init__.py").is_file():
            continue
        for f in sorted(d.glob("*.py")):
            parts = [PACKAGE, *(sub.split("/") if sub else []), f.stem]
            if f.stem == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _resolve(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imports(tree: ast.Module, mod: str, is_pkg: bool, known: set[str]) -> list[tuple[str, int, bool, bool]]:
    """(imported module, line, deferred, type_only) for every import statement in `tree`."""
    found: list[tuple[str, int, bool, bool]] = []

    def visit(node: ast.AST, deferred: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            d = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            t = type_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, deferred, type_only) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(mod, is_pkg, child.level, child.module) if child.level else child.module or ""
                for a in child.names:
                    # `from . import hooks` names a module; `from .ledger import Ledger` names an attribute.
                    sub = f"{base}.{a.name}"
                    found.append((sub if sub in known else base, child.lineno, deferred, type_only))
            visit(child, d, t)

    visit(tree, False, False)
    return found


def import_graph(root: Path | None = None) -> tuple[dict[str, Path], list[Edge], list[Edge]]:
    """(modules, edges between package modules, imports of child-only third-party modules)."""
    files = module_files(root or package_root())
    known = set(files)
    edges: list[Edge] = []
    child_only: list[Edge] = []
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for dst, line, deferred, type_only in _imports(tree, mod, path.stem == "__init__", known):
            if dst.split(".")[0] in CHILD_ONLY:
                child_only.append(Edge(mod, dst, line, deferred, type_only))
            elif dst in known and dst != mod:
                edges.append(Edge(mod, dst, line, deferred, type_only))
    return files, edges, child_only


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if not e.type_only:
            graph.setdefault(e.src, set()).add(e.dst)
            graph.setdefault(e.dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def _layer(mod: str) -> str:
    if mod == PROTOCOL:
        return "protocol"
    if mod == f"{PACKAGE}.testing":
        return "testing"  # the library a user's own tests import: Warp runs there, in the user's process
    parts = mod.split(".")[1:]
    if parts[:2] == ["tools", "harness"]:
        return "harness"
    return parts[0] if parts else "root"


def layer_violations(edges: list[Edge], child_only: list[Edge]) -> list[str]:
    """Imports that break the layering in docs/architecture.md, one line each."""
    bad: list[str] = []
    for e in edges:
        src, dst = _layer(e.src), _layer(e.dst)
        if src == "tools" and dst == "harness":
            bad.append(f"{e.src}:{e.line} imports {e.dst}: the parent process names harness modules only as "
                       "strings (the harness runs in its own process)")
        if src in ("tools", "harness") and dst in ("agent", "cli", "evals"):
            bad.append(f"{e.src}:{e.line} imports {e.dst}: tools/ sits below agent/, cli/ and evals/")
        if src == "agent" and dst == "cli":
            bad.append(f"{e.src}:{e.line} imports {e.dst}: agent/ sits below cli/")
        if src == "harness" and dst not in ("harness", "protocol", "tools", "root"):
            bad.append(f"{e.src}:{e.line} imports {e.dst}: the harness imports only tools/ helpers")
        if src == "protocol":
            bad.append(f"{e.src}:{e.line} imports {e.dst}: the protocol imports only pydantic (both processes "
                       "import it)")
    for e in child_only:
        if _layer(e.src) == "protocol":
            bad.append(f"{e.src}:{e.line} imports {e.dst}: the protocol imports only pydantic (the parent imports it)")
        elif _layer(e.src) != "harness" and not e.deferred and not e.type_only:
            bad.append(f"{e.src}:{e.line} imports {e.dst} at module level: Warp is imported only in the harness "
                       "(the parent process never loads it)")
        elif _layer(e.src) not in ("harness", "testing") and e.deferred:
            bad.append(f"{e.src}:{e.line} imports {e.dst} inside a function: Warp runs only in the harness")
    return bad


def main() -> int:
    files, edges, child_only = import_graph()
    print(f"{len(files)} modules, {len(edges)} internal imports")
    deferred = [e for e in edges if e.deferred]
    print(f"\nimports deferred into functions ({len(deferred)}):")
    for e in deferred:
        print(f"  {e.src}:{e.line} -> {e.dst}")
    found = cycles(edges)
    print(f"\ncycles ({len(found)}):")
    for c in found:
        print("  " + " <-> ".join(c))
    bad = layer_violations(edges, child_only)
    print(f"\nlayer violations ({len(bad)}):")
    for b in bad:
        print("  " + b)
    return 1 if found or bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
