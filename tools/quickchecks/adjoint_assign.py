"""WG013 adjoint-assign."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .source import Project, SourceModule


@register
class AdjointAssign(Rule):
    """## What it does
    Flags `wp.adjoint[x] = ...` (plain assignment, or `*=`/`/=`) inside a `@wp.func_grad` body.

    ## Why is this bad?
    A custom adjoint must accumulate: `wp.adjoint[x]` already holds the contributions of every other use
    of `x` in the caller, and assigning replaces them. Gradients through all other paths into `x` are
    lost; the loss is silent and data-dependent.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`), or zero for the other paths (`zero`).

    ## Known problems
    None known: the pattern is always wrong unless `x` has no other use, which the adjoint cannot know.

    ## Example
    ```python
    @wp.func_grad(safe_sqrt)
    def adj_safe_sqrt(x: float, adj_ret: float):
        wp.adjoint[x] = adj_ret * 0.5 / wp.max(wp.sqrt(x), 1.0e-6)
    ```
    Use instead:
    ```python
    @wp.func_grad(safe_sqrt)
    def adj_safe_sqrt(x: float, adj_ret: float):
        wp.adjoint[x] += adj_ret * 0.5 / wp.max(wp.sqrt(x), 1.0e-6)
    ```

    ## References
    - references/custom-gradients.md §2
    - Warp docs: Differentiability ("Custom Gradient Functions")
    """

    code, name = "WG013", "adjoint-assign"
    message = "custom adjoint assigns to wp.adjoint[...] instead of accumulating with +="
    reference = "references/custom-gradients.md §2"
    docs_section = "Differentiability: Custom Gradient Functions"
    signatures = (Signature.SUBTLY_WRONG, Signature.ZERO)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        for k in module.kernels:
            if k.kind != "func_grad":
                continue
            for node in ast.walk(k.node):
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, ast.AugAssign) and not isinstance(node.op, (ast.Add, ast.Sub)):
                    targets = [node.target]
                else:
                    continue
                for t in targets:
                    if isinstance(t, ast.Subscript) and module.wp(t.value) == "adjoint":
                        yield self.finding(
                            module,
                            node,
                            f"`{ast.unparse(t)}` in `{k.name}` overwrites the adjoint accumulated from the other "
                            "uses of the argument; use `+=` so every path keeps its contribution.",
                        )
