"""WG006 copy-onto-read-array."""

from __future__ import annotations

from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .host_trace import project_trace
from .source import Project, SourceModule


@register
class CopyOntoReadArray(Rule):
    """## What it does
    Flags `wp.copy(dest, src)`, `dest.assign(src)`, `dest.zero_()` and `dest.fill_(...)` while a tape
    records, when `dest` was already read by an operation recorded on the same tape (followed through
    loops, rebinding and calls into project functions).

    ## Why is this bad?
    Backward replays the earlier reader with the array's current contents, which the copy replaced, so
    its adjoint is computed at the wrong point. `zero_`/`fill_` are not even recorded on the tape. The
    overwrite tracker reports copies only when both arrays have `.grad`.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`), often growing with the number of steps.

    ## Known problems
    A copy onto an array whose earlier reader is linear in it (its adjoint does not need its value) is
    harmless. Reads inside code the analysis cannot follow are not seen.

    ## Example
    ```python
    with tape:
        for t in range(steps):
            wp.launch(step, dim=n, inputs=[x], outputs=[x_next])
            wp.copy(x, x_next)  # x was read by `step`
    ```
    Use instead:
    ```python
    with tape:
        for t in range(steps):
            wp.launch(step, dim=n, inputs=[xs[t]], outputs=[xs[t + 1]])
    ```

    ## References
    - references/quick-checks.md §1
    - Warp docs: Differentiability ("Array Overwrites", "Copying is Differentiable")
    """

    code, name = "WG006", "copy-onto-read-array"
    message = "copy onto an array the tape already read"
    reference = "references/quick-checks.md §1"
    docs_section = "Differentiability: Array Overwrites"
    signatures = (Signature.SUBTLY_WRONG,)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        done: set[int] = set()
        for hz in project_trace(project).hazards:
            w = hz.write
            if w.kind == "launch" or w.module is not module or w.node.lineno in done:
                continue
            done.add(w.node.lineno)
            op = {"copy": "wp.copy", "assign": ".assign", "host": "a host write (not recorded on the tape)"}[
                w.kind
            ]
            yield self.finding(
                module,
                w.node,
                f"{op} overwrites `{w.surface}`, which the recorded operation at {hz.read.module.rel}:"
                f"{hz.read.node.lineno} read earlier on the same tape; backward will replay that reader with the "
                "new contents. Copy into a fresh buffer instead, or confirm with "
                "wp.config.verify_autograd_array_access = True.",
            )
