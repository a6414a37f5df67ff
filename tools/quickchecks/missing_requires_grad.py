"""WG001 missing-requires-grad."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .arrays import project_arrays
from .base import Finding, Rule, register
from .source import Project, SourceModule, dotted, kwarg


@register
class MissingRequiresGrad(Rule):
    """## What it does
    Flags an array allocated without `requires_grad=True` (`wp.zeros`, `wp.empty`, `wp.full`, `wp.ones`,
    `wp.array`, a `*_like`/`clone` of such an array, or a project helper that returns one or a list of
    them) when a launch recorded on a tape writes it and a recorded launch reads it (an intermediate of the
    taped chain), or when the host code reads its `.grad` (a parameter the optimizer consumes).

    ## Why is this bad?
    These allocators default to `requires_grad=False` and such an array has no `.grad`: backward cannot
    carry an adjoint through it, so every gradient upstream of it is silently zero. No warning is printed.
    `zeros_like`/`clone` inherit the flag from their source, so one missing flag spreads.

    ## Signature
    Gradients exactly zero (`zero`) for every parameter upstream of the array.

    ## Known problems
    Arrays matched by name within one scope (a function's locals, a class's `self.` attributes, module
    globals); arrays passed between functions under other names are not followed. An array written in the
    tape that only feeds logging or rendering is correctly non-differentiable: check that it lies between
    the parameters and the loss. Arrays only read by launches (constants, masks, targets) are not flagged.

    ## Example
    ```python
    x = wp.array(x0, dtype=float, requires_grad=True)
    y = wp.zeros(n, dtype=float)  # no .grad: the chain is cut here
    with wp.Tape() as tape:
        wp.launch(square, dim=n, inputs=[x], outputs=[y])
        wp.launch(total, dim=n, inputs=[y], outputs=[loss])
    ```
    Use instead:
    ```python
    y = wp.zeros(n, dtype=float, requires_grad=True)
    ```

    ## References
    - references/quick-checks.md §2
    - Warp docs: Differentiability ("Differentiability", arrays with `requires_grad`)
    """

    code, name = "WG001", "missing-requires-grad"
    message = "array without requires_grad=True on the taped gradient path"
    reference = "references/quick-checks.md §2"
    docs_section = "Differentiability"
    signatures = (Signature.ZERO,)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        index = project_arrays(project)
        for alloc in index.allocations:
            if alloc.module is not module or alloc.requires_grad is not False:
                continue
            if (alloc.scope, alloc.key, "requires_grad") in index.flag_set:
                continue
            if _integer_dtype(alloc.call) or (
                dotted(kwarg(alloc.call, "dtype") or ast.Constant(0)) or ""
            ) in (project.structs):
                continue  # counters and index arrays cannot carry gradient; struct arrays hold arrays
            uses = index.uses_of(alloc) or index.attribute_uses(alloc)
            writers = [u for u in uses if u.access.stores or u.access.accums]
            readers = [u for u in uses if u.access.reads]
            grad_read = (alloc.scope, alloc.key) in index.grad_reads
            what = f"`{alloc.key}`" + (f" (from helper `{alloc.helper}()`)" if alloc.helper else "")
            if writers and (readers or grad_read):
                w = writers[0]
                r = next((u for u in readers if u.call is not w.call), readers[0] if readers else None)
                read_txt = (
                    f" and read by `{r.kernel}` (line {r.call.lineno})"
                    if r is not None
                    else " and its .grad is read"
                )
                yield self.finding(
                    module,
                    alloc.call,
                    f"{what} is written by the taped launch of `{w.kernel}` (line {w.call.lineno}){read_txt}, "
                    "but has no .grad, so backward cannot pass gradient through it and everything upstream "
                    "gets zero. Check that it lies between the parameters and the loss; if so allocate it "
                    "with requires_grad=True.",
                )
            elif grad_read and readers:
                r = readers[0]
                yield self.finding(
                    module,
                    alloc.call,
                    f"{what} is read by the taped launch of `{r.kernel}` (line {r.call.lineno}) and its .grad "
                    "is used afterwards, but it is allocated without requires_grad=True, so it has no .grad "
                    "(None) and receives no gradient. If it is a parameter, allocate it with "
                    "requires_grad=True.",
                )


_INT_DTYPES = {"int", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def _integer_dtype(call: ast.Call) -> bool:
    dtype = kwarg(call, "dtype")
    return dtype is not None and (dotted(dtype) or "").rsplit(".", 1)[-1] in _INT_DTYPES
