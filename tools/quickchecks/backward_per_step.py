"""WG004 backward-per-step."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .loops import backward_calls, enclosing_loop
from .source import Project, SourceModule, array_key, base_key, names_in


@register
class BackwardPerStep(Rule):
    """## What it does
    Flags `tape.backward(...)` inside a loop whose iterations each record a tape and then carry simulation
    state into the next iteration: a tuple swap of buffers (`s0, s1 = s1, s0`), a rebinding to a buffer
    the tape wrote (`state = next_state`), a `wp.copy`/`assign` of a taped output into a taped input, or
    taped code that works on step `t + 1` of the loop variable (per-step tapes over step-indexed buffers).

    ## Why is this bad?
    Each backward only sees the steps recorded on its own tape. The state that enters step k is treated
    as a constant, so the gradient ignores how the parameters shaped every earlier step: the optimizer
    follows the gradient of a truncated objective, not the full-horizon loss it reports. Per-window FD
    checks agree with autodiff, which makes this easy to "verify".

    ## Signature
    Per-window FD agrees but full-horizon FD disagrees (`truncation`); the optimizer stalls or worsens
    the reported loss.

    ## Known problems
    Deliberate truncated backpropagation through time (an explicit design choice) is flagged too. State
    carried through objects the analysis cannot follow (a simulator's internal buffers) is only seen when
    the taped code indexes `t + 1`; a loop over independent samples (`data[i]`) is not flagged.

    ## Example
    ```python
    for step in range(num_steps):
        tape = wp.Tape()
        with tape:
            wp.launch(integrate, dim=n, inputs=[state, params], outputs=[next_state])
            wp.launch(loss_kernel, dim=n, inputs=[next_state], outputs=[loss])
        tape.backward(loss)
        opt.step([params.grad])
        tape.zero()
        state, next_state = next_state, state
    ```
    Use instead:
    ```python
    states = [alloc_state() for _ in range(num_steps + 1)]
    tape = wp.Tape()
    with tape:
        for step in range(num_steps):
            wp.launch(integrate, dim=n, inputs=[states[step], params], outputs=[states[step + 1]])
        wp.launch(loss_kernel, dim=n, inputs=[states[num_steps]], outputs=[loss])
    tape.backward(loss)
    ```

    ## References
    - references/quick-checks.md §8
    - Warp docs: FAQ "Differentiation and Interoperability"; Differentiability ("Debugging Gradients")
    """

    code, name = "WG004", "backward-per-step"
    message = "backward inside a per-step loop with state carried between tapes (gradient truncation)"
    reference = "references/quick-checks.md §8"
    docs_section = "FAQ: Differentiation and Interoperability"
    signatures = (Signature.TRUNCATION,)
    severity = "warning"
    confidence = "medium"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        for call in backward_calls(module):
            loop = enclosing_loop(module, call)
            if loop is None:
                continue
            tape_bodies = [w for w in _direct(loop) if isinstance(w, ast.With) and w in module.tape_withs]
            if not tape_bodies:
                continue
            used, written = _tape_keys(project, module, tape_bodies)
            params = _params(loop)
            carry = _carry(module, loop, used, written, params) or _step_index(loop, tape_bodies)
            if carry is None:
                continue
            yield self.finding(
                module,
                call,
                f"each iteration of the loop at line {loop.lineno} records its own tape, calls backward, and "
                f"carries state to the next iteration ({carry}). The gradient treats the incoming state as a "
                "constant, so it is the gradient of a truncated objective. Compare FD of the full-horizon loss "
                "with the gradient the optimizer consumes; the fix is one tape over all steps with distinct "
                "state buffers.",
            )


def _direct(loop: ast.AST) -> Iterator[ast.AST]:
    """Nodes in the loop body that are not inside a nested loop or function."""
    stack = list(getattr(loop, "body", []))
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack.append(child)


def _tape_keys(project: Project, module: SourceModule, withs: list[ast.With]) -> tuple[set[str], set[str]]:
    used: set[str] = set()
    written: set[str] = set()
    for w in withs:
        for node in ast.walk(w):
            if not isinstance(node, ast.Call):
                continue
            for a in list(node.args) + [kw.value for kw in node.keywords]:
                for sub in ast.walk(a):
                    k = array_key(sub)
                    if k is not None:
                        used.add(base_key(k))
            if module.wp_call(node, {"launch"}):
                for acc in project.launch_accesses(module, node) or []:
                    used.add(base_key(acc.key))
                    if acc.stores or acc.accums:
                        written.add(base_key(acc.key))
    return used, written


def _params(loop: ast.AST) -> set[str]:
    """Arrays whose .grad the loop consumes: parameters, whose in-place update is not carried state."""
    out = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Attribute) and node.attr == "grad":
            k = array_key(node.value)
            if k is not None:
                out.add(base_key(k))
    return out


def _carry(
    module: SourceModule, loop: ast.AST, used: set[str], written: set[str], params: set[str]
) -> str | None:
    for node in _direct(loop):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t, v = node.targets[0], node.value
            if isinstance(t, (ast.Tuple, ast.List)) and isinstance(v, (ast.Tuple, ast.List)):
                tks = [array_key(e) for e in t.elts]
                vks = [array_key(e) for e in v.elts]
                tkeys = [x for x in tks if x is not None]
                vkeys = [x for x in vks if x is not None]
                if (
                    len(tkeys) == len(tks)
                    and len(vkeys) == len(vks)
                    and sorted(tkeys) == sorted(vkeys)
                    and tkeys != vkeys
                    and set(tkeys) & used
                ):
                    return f"swap at line {node.lineno}"
                continue
            tk, vk = array_key(t), array_key(v)
            if (
                tk
                and vk
                and base_key(tk) in used
                and base_key(vk) in written
                and base_key(tk) not in params
                and not vk.endswith(".grad")
            ):
                return f"`{tk} = {vk}` at line {node.lineno}"
        elif isinstance(node, ast.Call):
            dest = src = None
            if module.wp_call(node, {"copy"}) and len(node.args) >= 2:
                dest, src = node.args[0], node.args[1]
            elif isinstance(node.func, ast.Attribute) and node.func.attr == "assign" and node.args:
                dest, src = node.func.value, node.args[0]
            dk, sk = (
                (array_key(dest) if dest is not None else None),
                (array_key(src) if src is not None else None),
            )
            if (
                dk
                and sk
                and base_key(dk) in used
                and base_key(sk) in written
                and base_key(dk) not in params
                and not dk.endswith(".grad")
            ):
                return f"copy of `{sk}` into `{dk}` at line {node.lineno}"
    return None


def _step_index(loop: ast.AST, withs: list[ast.With]) -> str | None:
    """`for t in range(steps): with tape: step(t); observe(t + 1)`: each tape records one step of a
    trajectory whose state lives on in buffers indexed by `t + 1` (a data loop indexes `data[i]` instead)."""
    if not isinstance(loop, ast.For):
        return None
    loop_vars = names_in(loop.target)
    for w in withs:
        for node in ast.walk(w):
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, (ast.Add, ast.Sub))
                and isinstance(node.left, ast.Name)
                and node.left.id in loop_vars
                and isinstance(node.right, ast.Constant)
                and node.right.value == 1
            ):
                return (
                    f"the taped code works on step `{ast.unparse(node)}` at line {node.lineno}, so state built in "
                    "earlier iterations enters this tape"
                )
    return None
