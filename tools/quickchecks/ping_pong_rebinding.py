"""WG005 ping-pong-rebinding."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .host_trace import project_trace
from .source import Project, SourceModule, array_key, is_const, kwarg


@register
class PingPongRebinding(Rule):
    """## What it does
    Flags Python rebinding of buffers inside a loop that runs while a tape records: a swap
    (`state_0, state_1 = state_1, state_0`) or `cur = nxt`, when it makes a later recorded launch write a
    buffer that an earlier recorded launch read (found by following the names through the loop twice).
    A swap of buffers that are passed to calls inside the taped loop is flagged even when the writes
    happen in code the analysis cannot see (a simulator's `integrator.simulate(...)`).

    ## Why is this bad?
    The tape stores references to arrays, not copies. With two buffers swapped every step, step k+2
    overwrites the state step k read, and backward replays step k with the wrong values. The forward
    looks perfectly healthy.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`), usually worse with more steps.

    ## Known problems
    A swap inside a taped loop whose buffers are only read (never written by taped code) is harmless but
    still flagged when the writes are hidden in unresolved calls. Swaps whose buffers only reach launches
    with `record_tape=False` (a custom-backward solve) are not flagged.

    ## Example
    ```python
    with tape:
        for i in range(steps):
            wp.launch(step, dim=n, inputs=[state_0], outputs=[state_1])
            state_0, state_1 = state_1, state_0
    ```
    Use instead:
    ```python
    states = [model.state(requires_grad=True) for _ in range(steps + 1)]
    with tape:
        for i in range(steps):
            wp.launch(step, dim=n, inputs=[states[i]], outputs=[states[i + 1]])
    ```

    ## References
    - references/quick-checks.md §1
    - Warp docs: Differentiability ("Array Overwrites", "Array Overwrite Tracking")
    """

    code, name = "WG005", "ping-pong-rebinding"
    message = "buffer rebinding inside a taped loop reuses buffers the tape still needs"
    reference = "references/quick-checks.md §1"
    docs_section = "Differentiability: Array Overwrites"
    signatures = (Signature.SUBTLY_WRONG,)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        trace = project_trace(project)
        done: set[int] = set()
        for hz in trace.hazards:
            rebind = hz.write.rebind or hz.read.rebind
            if rebind is None or rebind[0] is not module or rebind[1].lineno in done:
                continue
            done.add(rebind[1].lineno)
            w = hz.write
            yield self.finding(
                module,
                rebind[1],
                f"after this rebinding, the launch at {w.module.rel}:{w.node.lineno} writes `{w.surface}`, the "
                f"same buffer an earlier recorded operation (line {hz.read.node.lineno}) read, so backward "
                "replays that step with overwritten values. Use one buffer per step (num_steps + 1 states) or "
                "run with wp.config.verify_autograd_array_access = True to confirm.",
            )
        for m, stmt in trace.swaps:
            if m is module and stmt.lineno not in done and _swapped_buffers_recorded(module, stmt):
                done.add(stmt.lineno)
                yield self.finding(
                    module,
                    stmt,
                    "buffers are swapped inside a loop that runs while a tape records; after two iterations "
                    "each buffer is rewritten while the tape still needs its earlier contents. Use one buffer "
                    "per step, or confirm with the overwrite tracker.",
                    confidence="medium",
                )


def _swapped_buffers_recorded(module: SourceModule, stmt: ast.Assign) -> bool:
    """Whether a swapped name is handed, in the same loop, to something that may record on the tape (a
    launch without `record_tape=False`, or any other call such as a simulator step)."""
    loop = module.enclosing(stmt, (ast.For, ast.While))
    target = stmt.targets[0]
    elts = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
    names = {k for t in elts if (k := array_key(t)) is not None}
    if loop is None:
        return False
    for node in ast.walk(loop):
        if not isinstance(node, ast.Call) or is_const(kwarg(node, "record_tape") or ast.Constant(1), False):
            continue
        for a in list(node.args) + [kw.value for kw in node.keywords]:
            if any(array_key(sub) in names for sub in ast.walk(a)):
                return True
    return False
