"""Helpers for rules that read kernel / `@wp.func` bodies (the kernel language is Python AST too)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .source import KernelInfo, Project, SourceModule, names_in

EPS_NAME = re.compile(r"eps|epsilon|tol|tiny|small|min|floor|delta|reg|damp", re.IGNORECASE)


def differentiable_kernels(
    module: SourceModule, project: Project, kinds: tuple[str, ...] = ("kernel", "func")
) -> Iterator[KernelInfo]:
    """Kernels and funcs whose adjoint can run: gradients flow through the file, backward is enabled, and
    the kernel is not launched only outside tapes (kernels whose launches are not seen are kept)."""
    if not project.module_differentiable(module):
        return
    # A function with a @wp.func_grad never runs its generated adjoint.
    custom = {g.target for infos in project.kernels.values() for g in infos if g.kind == "func_grad"}
    for k in module.kernels:
        if k.kind == "func" and k.name in custom:
            continue
        if k.kind in kinds and (
            k.kind != "kernel" or (k.backward_enabled() and project.kernel_on_tape(k) and writes_floats(k))
        ):
            yield k


def body_nodes(k: KernelInfo) -> Iterator[ast.AST]:
    """Nodes of the body, without nested function definitions."""
    stack: list[ast.AST] = list(k.node.body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(
            c for c in ast.iter_child_nodes(node) if not isinstance(c, (ast.FunctionDef, ast.Lambda))
        )


def definitions(k: KernelInfo) -> dict[str, list[ast.expr]]:
    """Local name -> the expressions assigned to it in the body."""
    out: dict[str, list[ast.expr]] = {}
    for node in body_nodes(k):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node.value)
                elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for e, v in zip(t.elts, node.value.elts):
                        if isinstance(e, ast.Name):
                            out.setdefault(e.id, []).append(v)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)
    return out


def is_positive_const(node: ast.AST) -> bool:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return node.value > 0
    if isinstance(node, ast.Call) and node.args and isinstance(node.func, (ast.Name, ast.Attribute)):
        # float(1e-6), wp.float32(1e-6)
        return len(node.args) == 1 and is_positive_const(node.args[0])
    return False


def is_eps_like(node: ast.AST) -> bool:
    if is_positive_const(node):
        return True
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return bool(name and EPS_NAME.search(name))


def guarded_expr(
    module: SourceModule, expr: ast.AST, defs: dict[str, list[ast.expr]], depth: int = 2
) -> bool:
    """`x + eps`, `wp.max(x, eps)`, `wp.clamp(x, lo, hi)`, or a local assigned from such."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return any(is_eps_like(t) for t in _add_terms(expr)) or any(
            guarded_expr(module, t, defs, depth) for t in _add_terms(expr) if not isinstance(t, ast.BinOp)
        )
    if isinstance(expr, ast.Call):
        name = (module.wp(expr.func) or (expr.func.id if isinstance(expr.func, ast.Name) else "")).rsplit(
            ".", 1
        )[-1]
        if name in ("max", "clamp") and any(is_eps_like(a) for a in expr.args[1:] + expr.args[:1]):
            return True
        if name in ("sqrt", "cbrt", "pow", "exp") and expr.args:
            return name == "exp" or guarded_expr(module, expr.args[0], defs, depth)
    if isinstance(expr, ast.Name) and depth > 0 and expr.id in defs:
        return all(guarded_expr(module, v, defs, depth - 1) for v in defs[expr.id])
    return False


def _add_terms(expr: ast.AST) -> list[ast.AST]:
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _add_terms(expr.left) + _add_terms(expr.right)
    return [expr]


def source_names(expr: ast.AST, defs: dict[str, list[ast.expr]], depth: int = 3) -> set[str]:
    """Names in `expr` plus the names the locals in it were computed from."""
    out = names_in(expr)
    frontier = set(out)
    for _ in range(depth):
        nxt = set()
        for n in frontier:
            for v in defs.get(n, []):
                nxt |= names_in(v) - out
        out |= nxt
        frontier = nxt
    return out


def branch_guarded(module: SourceModule, node: ast.AST, names: set[str], stop: ast.AST) -> bool:
    """An enclosing `if`/ternary test, or an earlier early-exit `if`, mentions one of `names`."""
    if not names:
        return False
    child = node
    for anc in module.ancestors(node):
        if (
            isinstance(anc, (ast.If, ast.IfExp, ast.While))
            and child is not anc.test
            and names_in(anc.test) & names
        ):
            return True
        body = getattr(anc, "body", None)
        if isinstance(body, list) and child in body:
            for prev in body[: body.index(child)]:
                if (
                    isinstance(prev, ast.If)
                    and names_in(prev.test) & names
                    and any(isinstance(s, (ast.Return, ast.Continue, ast.Break)) for s in prev.body)
                ):
                    return True
        if anc is stop:
            break
        child = anc
    return False


def data_dependent(k: KernelInfo, expr: ast.AST, defs: dict[str, list[ast.expr]]) -> bool:
    """Whether `expr` can vary with simulation data (array reads, locals, func arguments) rather than being
    built only from literals, scalar kernel parameters and module constants."""
    if any(isinstance(n, ast.Subscript) for n in ast.walk(expr)):
        return True
    scalar_params = {p for p in k.params if k.kind == "kernel" and not k.is_array_param(p)}
    for name in names_in(expr):
        if name in scalar_params:
            continue
        if name in defs:
            if any(data_dependent(k, v, {n: d for n, d in defs.items() if n != name}) for v in defs[name]):
                return True
            continue
        if name in k.params:  # array params of kernels, any param of a func
            return True
    return False


_INTEGER = re.compile(
    r"dtype\s*=\s*(?:wp\.|warp\.)?(?:u?int(?:8|16|32|64)?|bool)\b|array\[(?:wp\.)?(?:u?int\w*|bool)\]"
)


def writes_floats(kernel: KernelInfo) -> bool:
    """Whether the kernel writes anything a gradient could flow through (index/count kernels do not)."""
    if not kernel.writes:
        return True  # writes we cannot see (through helpers): assume they matter
    for p in kernel.writes:
        ann = kernel.annotation(p.split(".", 1)[0])
        if ann is None or not _INTEGER.search(ast.unparse(ann)):
            return True
    return False
