"""WG019 struct-array-overwrite."""

from __future__ import annotations

from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .host_trace import project_trace
from .source import Project, SourceModule


@register
class StructArrayOverwrite(Rule):
    """## What it does
    Flags a write (a recorded launch, `wp.copy`, `assign`, `zero_`) to an array held in a `@wp.struct`
    field after an operation recorded on the same tape read it, where the read or the write goes through
    the struct (`s.pos[i]` in a kernel that takes the struct, or `s.pos = pos` binding a loose array).

    ## Why is this bad?
    It is the ordinary write-after-read overwrite (backward replays the reader with the new values), but
    Warp's overwrite tracker cannot see arrays inside structs: a clean tracker run proves nothing here.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`).

    ## Known problems
    Struct fields assigned through helpers the analysis cannot follow are treated as distinct arrays
    (missed overwrites, never invented ones). A kernel that reads and writes the same struct array
    element-wise in place is flagged, which is also the tracker's within-kernel case.

    ## Example
    ```python
    sim = SimState()
    sim.pos = pos
    with tape:
        wp.launch(compute_forces, dim=n, inputs=[sim], outputs=[forces])   # reads sim.pos
        wp.launch(integrate, dim=n, inputs=[forces], outputs=[pos])        # overwrites it
    ```
    Use instead:
    ```python
    with tape:
        wp.launch(compute_forces, dim=n, inputs=[sim], outputs=[forces])
        wp.launch(integrate, dim=n, inputs=[pos, forces], outputs=[pos_next])
    ```

    ## References
    - references/quick-checks.md §1
    - Warp docs: Differentiability ("Array Overwrite Tracking": arrays in structs are not tracked)
    """

    code, name = "WG019", "struct-array-overwrite"
    message = "an array held in a wp.struct is overwritten after the tape read it (invisible to the tracker)"
    reference = "references/quick-checks.md §1"
    docs_section = "Differentiability: Array Overwrite Tracking"
    signatures = (Signature.SUBTLY_WRONG,)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        done: set[int] = set()
        for hz in project_trace(project).hazards:
            w = hz.write
            if not (w.via_struct or hz.read.via_struct) or w.module is not module or w.node.lineno in done:
                continue
            done.add(w.node.lineno)
            yield self.finding(
                module,
                w.node,
                f"this writes `{w.surface}`, which the recorded operation at {hz.read.module.rel}:"
                f"{hz.read.node.lineno} read{' through a struct field' if hz.read.via_struct else ''}; backward "
                "replays that reader with the overwritten values, and the overwrite tracker cannot see arrays "
                "in structs. Write into a separate buffer, or pass the arrays as plain kernel arguments so the "
                "tracker can check them.",
            )
