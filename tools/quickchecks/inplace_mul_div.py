"""WG007 inplace-mul-div."""

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
from .source import Project, SourceModule

_OPS = {ast.Mult: "*=", ast.Div: "/=", ast.FloorDiv: "//=", ast.Mod: "%=", ast.Pow: "**=", ast.MatMult: "@="}


@register
class InplaceMulDiv(Rule):
    """## What it does
    Flags in-place `*=`, `/=`, `%=`, `**=` (anything but `+=`/`-=`) on an array element or a vector/matrix
    component inside a differentiable kernel or `@wp.func`, when the right-hand side depends on data
    (an array read, a local, a function argument).

    ## Why is this bad?
    `+=`/`-=` on array elements become atomics with correct adjoints; other in-place ops are lowered to
    load-op-store and are not differentiable. Backward replays with the already-updated value, so the
    gradient of the right-hand side is wrong (measured: `a[i] *= b[i]` gives b.grad = new a instead of old
    a). Warp only says so at LOG_DEBUG during compilation, and not at all on a kernel-cache hit.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`) for the right-hand-side inputs.

    ## Known problems
    A right-hand side built only from literals and scalar kernel parameters gives correct gradients for
    the array and is not flagged. Scalar locals (`v *= s`) are plain rebinding and are fine.

    ## Example
    ```python
    @wp.kernel
    def scale(a: wp.array(dtype=float), b: wp.array(dtype=float)):
        i = wp.tid()
        a[i] *= b[i]
    ```
    Use instead:
    ```python
    @wp.kernel
    def scale(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = a[i] * b[i]
    ```

    ## References
    - references/quick-checks.md §5
    - Warp docs: Differentiability ("Limitations and Workarounds": "In-Place Math Operations")
    """

    code, name = "WG007", "inplace-mul-div"
    message = "non-differentiable in-place operator on an array element or vector component"
    reference = "references/quick-checks.md §5"
    docs_section = "Differentiability: In-Place Math Operations"
    signatures = (Signature.SUBTLY_WRONG,)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        for k in differentiable_kernels(module, project):
            defs = definitions(k)
            for node in body_nodes(k):
                if not (isinstance(node, ast.AugAssign) and type(node.op) in _OPS):
                    continue
                if not isinstance(node.target, (ast.Subscript, ast.Attribute)):
                    continue
                if not data_dependent(k, node.value, defs):
                    continue
                target = ast.unparse(node.target)
                yield self.finding(
                    module,
                    node,
                    f"`{target} {_OPS[type(node.op)]} ...` in `{k.name}` is lowered to load-op-store without a "
                    "correct adjoint: backward replays with the updated value, so the gradient of "
                    f"`{ast.unparse(node.value)}` is wrong. Write the result to a separate output (or a local) "
                    "instead.",
                )
