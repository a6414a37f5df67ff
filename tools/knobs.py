"""Module-level constants that size the work, found by how they are used rather than by their name.

`T = 60`, `K = 12`, `M = 4096`: a name says nothing, but the use does. An int constant assigned once at
module level sizes the work when it bounds a loop (`range(T)`, `range(1, T + 1)`) or sizes arrays or
launches (`wp.zeros(M)`, `shape=(M, 3)`, `dim=M`). The use gives its category:

- a `for` loop over it whose body calls `backward` (directly) is an optimization loop: `iterations`;
- any other loop over it (a time loop, a substep loop) is a horizon: `steps`;
- an array shape or launch dim: `particles`.

Only constants assigned exactly once at module level count: a name rebound elsewhere is not a knob (its
value at the use is not the literal). `shrink` and `bisect` read these through `shrink.find_knobs`.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

_SHAPED_CALLS = {"zeros", "empty", "ones", "full", "array", "zeros_like", "empty_like"}
_RANK = {"iterations": 0, "steps": 1, "particles": 2}
"""When a constant has several uses, the one that says most about the work wins (a loop over it first)."""


class UsageKnob(NamedTuple):
    name: str
    category: str
    node: ast.Constant
    value: int


def _module_constants(tree: ast.Module) -> dict[str, tuple[ast.Constant, int]]:
    """Names bound exactly once in the module, at its top level, to an int literal >= 2."""
    bound: dict[str, int] = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For) else [])
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    bound[n.id] = bound.get(n.id, 0) + 1
    out: dict[str, tuple[ast.Constant, int]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Constant) and isinstance(v.value, int) and not isinstance(v.value, bool) \
                    and v.value >= 2 and bound.get(node.targets[0].id) == 1:
                out[node.targets[0].id] = (v, v.value)
    return out


def _names_in(node: ast.AST) -> set[str]:
    """Names read in an expression (`T`, `T + 1`, `(M, 3)`)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _calls_backward(loop: ast.For) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
               for stmt in loop.body for n in ast.walk(stmt))


def _uses(tree: ast.Module) -> list[tuple[str, str]]:
    """(name, category) for every sizing use of a name in the module."""
    uses: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) \
                and node.iter.func.id == "range":
            cat = "iterations" if _calls_backward(node) else "steps"
            uses += [(n, cat) for a in node.iter.args for n in _names_in(a)]
        elif isinstance(node, ast.Call):
            fname = node.func.attr if isinstance(node.func, ast.Attribute) else (
                node.func.id if isinstance(node.func, ast.Name) else "")
            for kw in node.keywords:
                if kw.arg in ("dim", "shape"):
                    uses += [(n, "particles") for n in _names_in(kw.value)]
            if fname in _SHAPED_CALLS and node.args and fname != "array":
                uses += [(n, "particles") for n in _names_in(node.args[0])]
    return uses


def usage_knobs(source: str) -> list[UsageKnob]:
    """The module-level int constants of `source` that bound a loop or size an array or launch."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    constants = _module_constants(tree)
    best: dict[str, str] = {}
    for name, cat in _uses(tree):
        if name in constants and (name not in best or _RANK[cat] < _RANK[best[name]]):
            best[name] = cat
    return [UsageKnob(name, cat, *constants[name]) for name, cat in best.items()]
