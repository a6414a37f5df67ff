"""WG011 where-overflow."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .kernel_body import body_nodes, differentiable_kernels
from .source import Project, SourceModule

_RISKY = {"exp", "exp2", "pow", "log", "log2", "log10", "sqrt", "tan", "sinh", "cosh", "acos", "asin", "cbrt"}
_CLAMPS = {"min", "max", "clamp"}


@register
class WhereOverflow(Rule):
    """## What it does
    Flags `wp.where(cond, a, b)` (and the older `wp.select`) in a differentiable kernel or `@wp.func`
    when a branch contains an overflow- or domain-prone operation (`wp.exp`, `wp.pow`, `**`, `wp.log`,
    `wp.sqrt`, `wp.tan`, `wp.sinh`/`cosh`, `wp.acos`/`asin`, a division by a non-constant) whose argument
    is not clamped with `wp.min`/`wp.max`/`wp.clamp`.

    ## Why is this bad?
    `wp.where` is a select, not a branch: both operands are evaluated for every element, and so are
    their adjoints. The branch that was not selected gets a zero upstream adjoint, but zero times an
    infinite local derivative (exp overflow, sqrt or log at 0, division by 0) is NaN, which poisons the
    gradient of the inputs. A Python `if` (or `a if c else b`, which Warp lowers to a real branch)
    evaluates only the taken side.

    ## Signature
    NaN or inf gradients (`nan_inf`) while the forward values are finite.

    ## Known problems
    Operations that cannot overflow for the data at hand (bounded inputs) are still flagged; clamp the
    argument or use an `if` to make the intent explicit.

    ## Example
    ```python
    y[i] = wp.where(x[i] < 10.0, wp.exp(x[i]), 0.0)
    ```
    Use instead:
    ```python
    y[i] = wp.where(x[i] < 10.0, wp.exp(wp.min(x[i], 10.0)), 0.0)
    ```

    ## References
    - references/quick-checks.md §9b
    - Warp docs: Differentiability ("Limitations and Workarounds"); Built-ins: `wp.where`
    """

    code, name = "WG011", "where-overflow"
    message = "wp.where evaluates an overflow-prone branch (a select, not a branch)"
    reference = "references/quick-checks.md §9b"
    docs_section = "Built-ins: where"
    signatures = (Signature.NAN_INF,)
    severity = "warning"
    confidence = "medium"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        for k in differentiable_kernels(module, project):
            for node in body_nodes(k):
                if not isinstance(node, ast.Call):
                    continue
                name = module.wp_call(node, {"where", "select"})
                if not name or len(node.args) != 3:
                    continue
                risky = [r for branch in node.args[1:] for r in _risky(module, branch)]
                if not risky:
                    continue
                yield self.finding(
                    module,
                    node,
                    f"a branch of wp.{name.rsplit('.', 1)[-1]}(...) in `{k.name}` evaluates `{risky[0]}` for every "
                    "element, including those where it is not selected; an inf there becomes NaN in backward "
                    "(0 * inf). Clamp its argument (wp.min/wp.max/wp.clamp) or use an if statement.",
                )


def _risky(module: SourceModule, expr: ast.AST, clamped: bool = False) -> Iterator[str]:
    if isinstance(expr, ast.Call):
        name = (module.wp(expr.func) or "").rsplit(".", 1)[-1]
        if name in _CLAMPS:
            return
        if name in _RISKY and not any(_is_clamp(module, a) for a in expr.args):
            yield ast.unparse(expr)
            return
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Div, ast.Pow)):
        other = expr.right
        if not isinstance(other, ast.Constant) and not _is_clamp(module, other):
            yield ast.unparse(expr)
            return
    for child in ast.iter_child_nodes(expr):
        yield from _risky(module, child)


def _is_clamp(module: SourceModule, expr: ast.AST) -> bool:
    return isinstance(expr, ast.Call) and (module.wp(expr.func) or "").rsplit(".", 1)[-1] in _CLAMPS
