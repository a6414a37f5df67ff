"""WG010 nonsmooth-at-zero."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Confidence, Finding, Rule, register
from .kernel_body import (
    body_nodes,
    branch_guarded,
    data_dependent,
    definitions,
    differentiable_kernels,
    guarded_expr,
    source_names,
)
from .source import KernelInfo, Project, SourceModule

_ROOTS = {"sqrt", "cbrt"}
_NORMS = {"length", "norm_l2", "sqrt", "length_sq", "dot", "cbrt"}


@register
class NonsmoothAtZero(Rule):
    """## What it does
    In differentiable kernels and `@wp.func`s, flags `wp.sqrt`/`wp.cbrt`/`wp.pow(x, p)`/`x ** p` with
    0 < p < 1 of a data-dependent argument, and divisions whose denominator is a norm-like value
    (`wp.length`, `wp.norm_l2`, `wp.sqrt`, `wp.length_sq`, `wp.dot`, or a local computed from one),
    unless the argument is visibly guarded: `+ eps`, `wp.max(x, eps)`, `wp.clamp(...)`, an enclosing
    `if`/ternary on it, or an earlier early-exit `if` on it.

    ## Why is this bad?
    The derivative of sqrt at 0 is infinite: Warp's `adj_sqrt` computes `0.5 / sqrt(x)`, so a zero
    argument gives inf, and inf times a zero upstream adjoint gives NaN even in branches that were not
    taken. Dividing by a distance that can be zero (coincident particles) produces NaN in both passes.
    Note: on Warp 1.19 `wp.length` and `wp.normalize` guard their own adjoints (zero gradient below a
    small epsilon), so they are only flagged when their result is used as a divisor.

    ## Signature
    NaN or inf gradients (`nan_inf`), often on a sparse, data-dependent subset (`sparse_subset`).

    ## Known problems
    Arguments that are positive by construction (a mass, a squared value plus a constant the analysis
    does not recognise as positive) are flagged. Guards written as helper functions are not recognised.

    ## Example
    ```python
    d = x[i] - x[j]
    r = wp.sqrt(wp.dot(d, d))
    f = d / r
    ```
    Use instead:
    ```python
    d = x[i] - x[j]
    r = wp.sqrt(wp.dot(d, d) + 1.0e-12)
    f = d / wp.max(r, 1.0e-6)
    ```

    ## References
    - references/quick-checks.md §9a
    - Warp docs: Differentiability ("Custom Gradient Functions"); references/custom-gradients.md
    """

    code, name = "WG010", "nonsmooth-at-zero"
    message = "non-differentiable point at zero (sqrt/root or division by a norm) without a guard"
    reference = "references/quick-checks.md §9a"
    docs_section = "Differentiability: Custom Gradient Functions"
    signatures = (Signature.NAN_INF, Signature.SPARSE_SUBSET)
    severity = "warning"
    confidence = "medium"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        for k in differentiable_kernels(module, project):
            defs = definitions(k)
            for node in body_nodes(k):
                hit = self._match(module, k, node, defs)
                if hit is None:
                    continue
                what, arg = hit
                if guarded_expr(module, arg, defs) or branch_guarded(
                    module, node, source_names(arg, defs), k.node
                ):
                    continue
                conf = _confidence(module, k, arg, defs)
                yield self.finding(
                    module,
                    node,
                    confidence=conf,
                    severity="info" if conf == "low" else None,
                    detail=f"{what} in `{k.name}` has an infinite or undefined derivative when `{ast.unparse(arg)}` is "
                    "zero, and nothing guards it; backward then yields inf/NaN (also through branches not "
                    "taken). Check whether the argument can be exactly zero (coincident points, zero "
                    "velocity, a particle paired with itself); add an epsilon (`+ eps`, `wp.max(x, eps)`) or a "
                    "custom gradient.",
                )

    def _match(
        self, module: SourceModule, k: KernelInfo, node: ast.AST, defs: dict[str, list[ast.expr]]
    ) -> tuple[str, ast.expr] | None:
        if isinstance(node, ast.Call) and node.args:
            name = (module.wp(node.func) or "").rsplit(".", 1)[-1]
            if name in _ROOTS and data_dependent(k, node.args[0], defs):
                return f"wp.{name}(...)", node.args[0]
            if (
                name == "pow"
                and len(node.args) == 2
                and _fractional(node.args[1])
                and data_dependent(k, node.args[0], defs)
            ):
                return "wp.pow(x, p) with 0 < p < 1", node.args[0]
        if isinstance(node, ast.BinOp):
            if (
                isinstance(node.op, ast.Pow)
                and _fractional(node.right)
                and data_dependent(k, node.left, defs)
            ):
                return "x ** p with 0 < p < 1", node.left
            if isinstance(node.op, ast.Div) and _norm_like(module, node.right, defs):
                return "division by a norm", node.right
        return None


def _fractional(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, float) and 0.0 < node.value < 1.0


def _norm_like(module: SourceModule, expr: ast.AST, defs: dict[str, list[ast.expr]], depth: int = 3) -> bool:
    if isinstance(expr, ast.Call):
        return (module.wp(expr.func) or "").rsplit(".", 1)[-1] in _NORMS
    if isinstance(expr, ast.Name) and depth > 0 and expr.id in defs:
        return any(_norm_like(module, v, defs, depth - 1) for v in defs[expr.id])
    return False


def _difference_indices(
    expr: ast.AST, defs: dict[str, list[ast.expr]], depth: int = 3
) -> list[tuple[str, str]]:
    """Index names of `a[i] - a[j]` differences inside `expr` (following locals)."""
    out = []
    for node in ast.walk(expr):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Sub)
            and isinstance(node.left, ast.Subscript)
            and isinstance(node.right, ast.Subscript)
            and ast.unparse(node.left.value) == ast.unparse(node.right.value)
            and isinstance(node.left.slice, ast.Name)
            and isinstance(node.right.slice, ast.Name)
        ):
            out.append((node.left.slice.id, node.right.slice.id))
        elif isinstance(node, ast.Name) and depth > 0 and node.id in defs:
            for v in defs[node.id]:
                out += _difference_indices(v, defs, depth - 1)
    return out


def _confidence(
    module: SourceModule, k: KernelInfo, arg: ast.expr, defs: dict[str, list[ast.expr]]
) -> Confidence:
    """High when the zero case is built in (all pairs from wp.tid(), so a point meets itself); low when the
    two indices come from a connectivity array (springs, edges), which normally never pairs a point with
    itself; medium otherwise."""
    pairs = _difference_indices(arg, defs)
    if not pairs:
        return "medium"
    tid_names: set[str] = set()
    for node in ast.walk(k.node):
        if isinstance(node, ast.Assign) and module.wp_call(node.value, {"tid"}):
            for t in node.targets:
                tid_names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    if any(a in tid_names and b in tid_names for a, b in pairs):
        return "high"
    if all(any(isinstance(v, ast.Subscript) for v in defs.get(a, []) + defs.get(b, [])) for a, b in pairs):
        return "low"
    return "medium"
