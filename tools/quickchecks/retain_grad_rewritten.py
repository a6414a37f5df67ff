"""WG018 retain-grad-rewritten."""

from __future__ import annotations

from collections.abc import Iterator

from ..signatures import Signature
from .arrays import project_arrays
from .base import Finding, Rule, register
from .host_trace import project_trace
from .source import Project, SourceModule


@register
class RetainGradRewritten(Rule):
    """## What it does
    Flags an array allocated with `retain_grad=True` (or given `x.retain_grad = True`) that launches
    recorded on a tape store into more than once: two taped launches, or one inside a loop with the same
    array every iteration.

    ## Why is this bad?
    Since Warp 1.13 the adjoint of a plain store consumes (zeroes) the output gradient, so only the final
    write to an element propagates gradient. `retain_grad=True` turns that zeroing off to keep the
    gradient for inspection, and then every write's adjoint sees the same gradient: it is counted once
    per write (measured: 4 instead of 2 for two writes).

    ## Signature
    Off by an exact factor (`exact_factor`): the number of writes.

    ## Known problems
    Writes through other names, or in functions the analysis cannot follow, are not counted. Accumulating
    writes (`+=`, `wp.atomic_add`) are not consumed either way and are not counted.

    ## Example
    ```python
    y = wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True)
    with tape:
        wp.launch(first, dim=n, inputs=[x], outputs=[y])
        wp.launch(second, dim=n, inputs=[x], outputs=[y])
    ```
    Use instead:
    ```python
    y = wp.zeros(n, dtype=float, requires_grad=True)  # inspect gradients on a separate run
    ```

    ## References
    - references/quick-checks.md §7
    - Warp docs: Differentiability ("Array Overwrites"; `retain_grad`), CHANGELOG 1.13
    """

    code, name = "WG018", "retain-grad-rewritten"
    message = "retain_grad=True on an array the tape writes more than once"
    reference = "references/quick-checks.md §7"
    docs_section = "Differentiability: Array Overwrites (retain_grad)"
    signatures = (Signature.EXACT_FACTOR,)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        index = project_arrays(project)
        for alloc in index.allocations:
            if alloc.module is not module:
                continue
            if not (alloc.retain_grad or (alloc.scope, alloc.key, "retain_grad") in index.flag_set):
                continue
            stores = [u for u in index.uses_of(alloc) if u.access.stores]
            count = sum(2 if u.in_loop and "[" not in u.access.key else 1 for u in stores)
            # The tracer also counts stores through rebinding and inlined helpers.
            traced = [
                evs
                for canon, evs in project_trace(project).stores.items()
                if canon[0].startswith(f"<alloc:{module.rel}:{alloc.call.lineno}#") and len(canon) == 1
            ]
            count = max(count, max((len({id(e.node) for e in evs}) for evs in traced), default=0))
            if count < 2:
                continue
            lines = sorted({u.call.lineno for u in stores})
            yield self.finding(
                module,
                alloc.call,
                f"`{alloc.key}` keeps its gradient (retain_grad=True) and is stored into by taped launches "
                f"{'more than once' if len(lines) < 2 else 'at lines ' + ', '.join(map(str, lines))}; each store's "
                "adjoint then reads the same gradient, so it is counted once per write. Drop retain_grad, or "
                "write each step into its own array.",
            )
