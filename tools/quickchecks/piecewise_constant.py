"""WG012 piecewise-constant."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .kernel_body import (
    body_nodes,
    data_dependent,
    definitions,
    differentiable_kernels,
)
from .source import KernelInfo, Project, SourceModule

_STEP_FUNCS = {"round", "floor", "ceil", "sign", "trunc", "rint", "step", "nonzero"}
_CASTS = {"int", "int32", "int64", "int8", "int16", "uint8", "uint16", "uint32", "uint64"}


@register
class PiecewiseConstant(Rule):
    """## What it does
    Flags `wp.round`/`wp.floor`/`wp.ceil`/`wp.sign`/`wp.trunc`/`wp.rint`/`wp.step`/`wp.nonzero` and
    integer casts (`int(x)`, `wp.int32(x)`) of data in a differentiable kernel or `@wp.func` when their
    result flows into floating-point arithmetic or an array store, and the same statement does not also
    use the original value (which would still carry gradient).

    ## Why is this bad?
    These functions are piecewise constant: their derivative is zero almost everywhere, so every
    gradient through them is exactly zero. That is mathematically correct, which is why it is easy to
    mistake for a bug elsewhere; the fix is a surrogate gradient (a straight-through estimator via
    `@wp.func_grad`) or a smooth relaxation, not a hunt for a broken tape.

    ## Signature
    Gradients exactly zero (`zero`) through the quantised value.

    ## Known problems
    Uses as array indices, loop bounds, conditions, and the fractional-part pattern `x - wp.floor(x)`
    are not flagged. Intentional non-differentiable choices (friction direction `wp.sign(v)` multiplied
    by a differentiable magnitude) are skipped only when the magnitude uses the same input.

    ## Example
    ```python
    q = wp.round(x[i] * 255.0) / 255.0
    y[i] = q * w[i]
    ```
    Use instead:
    ```python
    @wp.func
    def quantize(x: float):
        return wp.round(x * 255.0) / 255.0

    @wp.func_grad(quantize)
    def adj_quantize(x: float, adj_ret: float):
        wp.adjoint[x] += adj_ret  # straight-through estimator
    ```

    ## References
    - references/quick-checks.md §9c
    - Warp docs: Differentiability ("Custom Gradient Functions")
    """

    code, name = "WG012", "piecewise-constant"
    message = "piecewise-constant operation on the gradient path (zero derivative)"
    reference = "references/quick-checks.md §9c"
    docs_section = "Differentiability: Custom Gradient Functions"
    signatures = (Signature.ZERO,)
    severity = "info"
    confidence = "medium"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        for k in differentiable_kernels(module, project):
            defs = definitions(k)
            for node in body_nodes(k):
                if not isinstance(node, ast.Call):
                    continue
                name = _step_name(module, node)
                if name is None or not node.args or not data_dependent(k, node.args[0], defs):
                    continue
                parent = module.parents.get(node)
                if _step_name(module, parent) is not None:
                    continue  # reported (or excused) at the outer call
                if name in _CASTS and not _is_float_cast(module, parent):
                    continue  # an integer used as an index or count, not as a value
                sources = {n for n in _value_names(node.args[0]) if n in defs or n in k.params}
                if not _float_use(module, k, defs, node, sources, depth=2):
                    continue
                yield self.finding(
                    module,
                    node,
                    f"`{ast.unparse(node)}` in `{k.name}` is piecewise constant, so no gradient flows through "
                    f"it to `{ast.unparse(node.args[0])}`. If the FD signature is 'zero' for inputs upstream of "
                    "it, that zero is correct; use a straight-through estimator (@wp.func_grad) or a smooth "
                    "surrogate if a gradient is needed.",
                )


def _step_name(module: SourceModule, node: ast.AST | None) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    wp_name = module.wp(node.func)
    if wp_name is not None:
        short = wp_name.rsplit(".", 1)[-1]
        return short if short in _STEP_FUNCS | _CASTS else None
    if isinstance(node.func, ast.Name) and node.func.id in ("int", "round"):
        return node.func.id
    return None


def _is_float_cast(module: SourceModule, node: ast.AST | None) -> bool:
    if not isinstance(node, ast.Call) or len(node.args) != 1:
        return False
    name = module.wp(node.func) or (node.func.id if isinstance(node.func, ast.Name) else "")
    return name.rsplit(".", 1)[-1] in ("float", "float32", "float64", "float16")


def _lift(module: SourceModule, k: KernelInfo, defs: dict, node: ast.AST) -> ast.AST:
    """Climb through float casts, negation and arithmetic with constants: the value is still quantised."""
    while True:
        parent = module.parents.get(node)
        if parent is None:
            return node
        if _is_float_cast(module, parent) or isinstance(parent, ast.UnaryOp):
            node = parent
        elif isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Mult, ast.Div, ast.Add, ast.Sub)):
            other = parent.right if parent.left is node else parent.left
            if data_dependent(k, other, defs):
                return node
            node = parent
        else:
            return node


def _float_use(
    module: SourceModule, k: KernelInfo, defs: dict, node: ast.AST, sources: set[str], depth: int
) -> bool:
    """Whether the quantised value of `node` reaches a value (store, return, arithmetic) with no other
    use of its sources in the same statement to carry gradient."""
    value = _lift(module, k, defs, node)
    parent = module.parents.get(value)
    if isinstance(parent, ast.Subscript) and value is not parent.value:
        return False  # used as an index
    if isinstance(parent, (ast.Compare, ast.If, ast.While, ast.BoolOp, ast.IfExp)):
        return False
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "range":
        return False
    if _step_name(module, parent) in _CASTS:
        return False  # converted to an integer: an index or a count
    stmt: ast.AST | None = value
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = module.parents.get(stmt)
    if stmt is None:
        return False
    rhs = getattr(stmt, "value", None)
    if rhs is None or isinstance(stmt, (ast.If, ast.While, ast.For)):
        return False
    if not _only_inside(rhs, node, sources):
        return False  # x - floor(x), sign(v) * |v|: gradient still flows through the other use
    target = (
        stmt.targets[0]
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
        else getattr(stmt, "target", None)
    )
    if isinstance(target, ast.Name) and rhs is value:
        if depth == 0:
            return False
        uses = [
            n
            for n in ast.walk(k.node)
            if isinstance(n, ast.Name)
            and n.id == target.id
            and isinstance(n.ctx, ast.Load)
            and n.lineno > stmt.lineno
        ]
        return any(_float_use(module, k, defs, u, sources | {target.id}, depth - 1) for u in uses)
    return True


def _only_inside(expr: ast.AST, node: ast.AST, sources: set[str]) -> bool:
    """True when every mention of `sources` in `expr` is inside `node`."""
    inside = {id(n) for n in ast.walk(node)}
    return all(id(n) in inside for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id in sources)


def _value_names(expr: ast.AST) -> set[str]:
    """Names whose value `expr` depends on, not counting array indices (`x[i]` depends on x, not i)."""
    in_slices = {
        id(n) for sub in ast.walk(expr) if isinstance(sub, ast.Subscript) for n in ast.walk(sub.slice)
    }
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and id(n) not in in_slices}
