"""WG014 atomic-counter-without-replay."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .kernel_body import differentiable_kernels
from .source import Project, SourceModule

_COUNTERS = {"atomic_add", "atomic_sub", "atomic_inc"}


@register
class AtomicCounterWithoutReplay(Rule):
    """## What it does
    Flags an atomic whose return value is used (`slot = wp.atomic_add(counter, 0, 1)`, the slot-allocation
    pattern) in a differentiable kernel, or in a `@wp.func` that has no `@wp.func_replay`.

    ## Why is this bad?
    Backward replays the forward code before running adjoints. Replaying the atomic increments the counter
    again, so every thread gets a different slot than in the forward and the adjoints read and write the
    wrong elements (the documented example gives input.grad [4, 0, ...]). Warp 1.15+ raises for counters it
    cannot replay; a `@wp.func_replay` that reuses the forward's slot is the fix.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`) concentrated on a sparse subset of elements (`sparse_subset`).

    ## Known problems
    Atomics whose returned old value is used for something other than indexing (rare) are flagged too.

    ## Example
    ```python
    @wp.kernel
    def compact(x: wp.array(dtype=float), counter: wp.array(dtype=int), out: wp.array(dtype=float)):
        i = wp.tid()
        slot = wp.atomic_add(counter, 0, 1)
        out[slot] = x[i]
    ```
    Use instead:
    ```python
    @wp.func
    def reserve(counter: wp.array(dtype=int), tid: int, slots: wp.array(dtype=int)):
        slot = wp.atomic_add(counter, 0, 1)
        slots[tid] = slot
        return slot

    @wp.func_replay(reserve)
    def replay_reserve(counter: wp.array(dtype=int), tid: int, slots: wp.array(dtype=int)):
        return slots[tid]
    ```

    ## References
    - references/custom-gradients.md §3
    - Warp docs: Differentiability ("Custom Gradient Functions": `wp.func_replay`)
    """

    code, name = "WG014", "atomic-counter-without-replay"
    message = "atomic counter whose result is used, without a replay function"
    reference = "references/custom-gradients.md §3"
    docs_section = "Differentiability: Custom Gradient Functions (func_replay)"
    signatures = (Signature.SUBTLY_WRONG, Signature.SPARSE_SUBSET)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        replayed = {k.target for infos in project.kernels.values() for k in infos if k.kind == "func_replay"}
        for k in differentiable_kernels(module, project):
            if k.kind == "func" and k.name in replayed:
                continue
            for node in ast.walk(k.node):
                if not (isinstance(node, ast.Call) and module.wp_call(node, _COUNTERS)):
                    continue
                if isinstance(module.parents.get(node), ast.Expr):
                    continue  # plain accumulation: the old value is not used
                where = "kernel" if k.kind == "kernel" else "function without a @wp.func_replay"
                yield self.finding(
                    module,
                    node,
                    f"the value returned by `{ast.unparse(node.func)}` is used in {where} `{k.name}`; backward "
                    "replays the atomic and gets different slots than the forward did. Move it into a @wp.func "
                    "with a @wp.func_replay that returns the recorded slot.",
                )
