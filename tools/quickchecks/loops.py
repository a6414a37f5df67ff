"""Host-side loop helpers shared by the tape-lifetime rules (WG003, WG004, WG015)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .source import Project, SourceModule


def backward_calls(module: SourceModule) -> Iterator[ast.Call]:
    """`tape.backward(...)` calls (the receiver must look like a tape)."""
    for node in module.nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "backward"
            and module.is_tape_expr(node.func.value)
        ):
            yield node


def enclosing_loop(module: SourceModule, node: ast.AST) -> ast.For | ast.While | None:
    """The innermost host loop around `node` within its own function."""
    for anc in module.ancestors(node):
        if isinstance(anc, (ast.For, ast.While)):
            return anc
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return None
    return None


def caller_loop(
    project: Project, module: SourceModule, node: ast.AST, depth: int = 3
) -> tuple[SourceModule, ast.For | ast.While] | None:
    """The loop that runs `node` repeatedly: around it, or around a call of its function (up to `depth`)."""
    loop = enclosing_loop(module, node)
    if loop is not None:
        return module, loop
    if depth == 0:
        return None
    fn = module.host_function(node)
    if fn is None:
        return None
    for m, call in project.call_sites.get(id(fn), []):
        found = caller_loop(project, m, call, depth - 1)
        if found is not None:
            return found
    return None


def per_iteration_nodes(
    project: Project, module: SourceModule, loop: ast.AST, depth: int = 3
) -> Iterator[tuple[SourceModule, ast.AST]]:
    """Every node that runs once per iteration of `loop`: its body and the project functions it calls."""
    seen: set[int] = set()
    work = [(module, stmt, depth) for stmt in getattr(loop, "body", [])]
    while work:
        m, stmt, d = work.pop()
        for node in ast.walk(stmt):
            yield m, node
            if isinstance(node, ast.Call) and d > 0:
                for fm, fn in project.resolve_call(m, node):
                    if id(fn) not in seen:
                        seen.add(id(fn))
                        work.extend((fm, s, d - 1) for s in fn.body)
