"""WG003 missing-tape-zero."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .loops import backward_calls, caller_loop, per_iteration_nodes
from .source import ALLOCATORS, Project, SourceModule, array_key, is_const, kwarg

_ZEROING = {"zero_", "fill_", "assign"}


@register
class MissingTapeZero(Rule):
    """## What it does
    Flags a training loop whose `tape.backward(...)` runs once per iteration when nothing in that
    iteration clears the gradients: no `tape.zero()` / `tape.reset()`, no `x.grad.zero_()` (or
    `fill_`/`assign`/`wp.copy` into a `.grad`, or an update kernel that stores into the `.grad` it is given),
    and no re-allocation of the parameters. The finding points at the `with tape:` block that keeps
    recording onto a reused tape (or at the backward call when a fresh tape is made each iteration).

    ## Why is this bad?
    Adjoint kernels accumulate (`+=`) into `.grad`. Without zeroing, iteration k's gradient is the sum of
    the gradients of iterations 1..k and the optimizer step grows every iteration. A fresh `wp.Tape()` per
    iteration does not help for arrays allocated outside the loop: their `.grad` buffers belong to the
    arrays, not to the tape (measured on Warp 1.19: x.grad 2, 4, 6 over three fresh tapes).

    ## Signature
    Gradients grow across optimizer iterations (`grows_across_iterations`); the first iteration is right.

    ## Known problems
    Zeroing done by a helper the analysis cannot resolve (a method reached through a variable, a library
    call) is not seen. A deliberate multi-batch accumulation loop (zeroing every k iterations) is flagged.

    ## Example
    ```python
    tape = wp.Tape()
    for it in range(iters):
        with tape:
            forward()
        tape.backward(loss)
        opt.step([x.grad])
    ```
    Use instead:
    ```python
    for it in range(iters):
        with tape:
            forward()
        tape.backward(loss)
        opt.step([x.grad])
        tape.zero()
    ```

    ## References
    - references/quick-checks.md §4
    - Warp docs: Differentiability ("Tape"; `Tape.zero`, `Tape.reset`); FAQ "Differentiation and Interoperability"
    """

    code, name = "WG003", "missing-tape-zero"
    message = "gradients are never cleared between training iterations"
    reference = "references/quick-checks.md §4"
    docs_section = "Differentiability: Tape.zero / Tape.reset"
    signatures = (Signature.GROWS_ACROSS_ITERATIONS,)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        for call in backward_calls(module):
            found = caller_loop(project, module, call)
            if found is None:
                continue
            lmod, loop = found
            fresh_tape = cleared = realloc = False
            for m, node in per_iteration_nodes(project, lmod, loop):
                if not isinstance(node, ast.Call):
                    if isinstance(node, ast.Assign) and any(
                        (array_key(t) or "").endswith(".grad") for t in node.targets
                    ):
                        cleared = True
                    continue
                func = node.func
                if m.wp_call(node, {"Tape"}):
                    fresh_tape = True
                elif (
                    (isinstance(func, ast.Attribute)
                    and func.attr in ("zero", "reset", "zero_grad"))
                    or (isinstance(func, ast.Attribute)
                    and func.attr in _ZEROING
                    and (array_key(func.value) or "").endswith(".grad"))
                    or (m.wp_call(node, {"copy"})
                    and node.args
                    and (array_key(node.args[0]) or "").endswith(".grad"))
                    or (m.wp_call(node, {"launch"})
                    and _launch_stores_grad(project, m, node))
                ):
                    cleared = True
                elif m.wp_call(node, ALLOCATORS) and is_const(
                    kwarg(node, "requires_grad") or ast.Constant(0), True
                ):
                    realloc = True
            if cleared or (fresh_tape and realloc):
                continue
            where = f"the loop at {lmod.rel}:{loop.lineno}"
            if fresh_tape:
                detail = (
                    f"a new wp.Tape() is created each iteration of {where}, but .grad buffers belong to the "
                    "arrays, not the tape, so parameters allocated outside the loop keep accumulating. "
                    "Zero them each iteration (tape.zero() after the update, or x.grad.zero_())."
                )
                yield self.finding(module, call, detail, confidence="medium")
            else:
                # Point at the scope that keeps recording onto the reused tape: that is where it accumulates.
                scope = _recording_with(module, call)
                created = ", ".join(str(n.lineno) for n in _tape_creations(module, call))
                detail = (
                    f"backward (line {call.lineno}) runs every iteration of {where} on a reused tape"
                    f"{f' (created at line {created})' if created else ''} and nothing zeroes the gradients, so "
                    "each step sees the sum of all previous gradients. Call tape.zero() (or tape.reset()) after "
                    "the optimizer update."
                )
                yield self.finding(module, scope or call, detail)


def _recording_with(module: SourceModule, call: ast.Call) -> ast.With | None:
    """The `with tape:` block in the same function that records onto the tape `call` runs backward on."""
    key = array_key(call.func.value) if isinstance(call.func, ast.Attribute) else None
    fn = module.host_function(call)
    for w in module.tape_withs:
        if (
            module.host_function(w) is fn
            and w.lineno < call.lineno
            and any(array_key(item.context_expr) == key for item in w.items)
        ):
            return w
    return None


def _tape_creations(module: SourceModule, call: ast.Call) -> list[ast.Assign]:
    key = array_key(call.func.value) if isinstance(call.func, ast.Attribute) else None
    if key is None:
        return []
    same = (
        (lambda n: module.enclosing_class(n) is module.enclosing_class(call))
        if key.startswith("self.")
        else (lambda n: module.host_function(n) is module.host_function(call))
    )
    return [
        n
        for n in module.nodes
        if isinstance(n, ast.Assign)
        and module.wp_call(n.value, {"Tape"})
        and any(array_key(t) == key for t in n.targets)
        and same(n)
    ]


def _launch_stores_grad(project: Project, module: SourceModule, call: ast.Call) -> bool:
    accesses = project.launch_accesses(module, call) or []
    return any(a.key.endswith(".grad") and a.stores for a in accesses)
