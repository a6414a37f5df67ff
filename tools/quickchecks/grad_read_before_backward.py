"""WG015 grad-read-before-backward."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .source import Project, SourceModule, array_key, kwarg

_WRITES = {"zero_", "fill_", "assign"}
_METADATA = {"ptr", "shape", "dtype", "device", "size", "ndim", "strides"}


@register
class GradReadBeforeBackward(Rule):
    """## What it does
    Flags a read of `x.grad` (`.numpy()`, an optimizer step, an update launch, a print) in a function
    that calls `tape.backward(...)` when, in statement order, the read comes before the backward, or
    after `tape.zero()`/`tape.reset()` with no backward in between.

    ## Why is this bad?
    Before backward, `.grad` holds zeros or the previous iteration's gradient; after `tape.zero()` it
    holds zeros. The optimizer then steps with a stale or zero gradient while the loss code looks right.

    ## Signature
    Gradients exactly zero (`zero`) as consumed by the optimizer, or one iteration stale (`subtly_wrong`).

    ## Known problems
    Order is judged within one function body, top to bottom (a loop body once); a read in a helper
    function called before backward is not seen. Writes to `.grad` (seeding, zeroing, `wp.copy` into it)
    and manual adjoint launches (`adjoint=True`) are not reads.

    ## Example
    ```python
    tape.backward(loss)
    tape.zero()
    opt.step([x.grad])
    ```
    Use instead:
    ```python
    tape.backward(loss)
    opt.step([x.grad])
    tape.zero()
    ```

    ## References
    - references/quick-checks.md §4
    - Warp docs: Differentiability ("Tape"; `Tape.zero`, `Tape.backward`)
    """

    code, name = "WG015", "grad-read-before-backward"
    message = ".grad read before backward filled it (or after tape.zero())"
    reference = "references/quick-checks.md §4"
    docs_section = "Differentiability: Tape"
    signatures = (Signature.ZERO, Signature.SUBTLY_WRONG)
    severity = "error"
    confidence = "medium"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        bodies: list[list[ast.stmt]] = [module.tree.body]
        bodies += [
            n.body
            for n in module.nodes
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not module.is_kernel_def(n)
        ]
        for body in bodies:
            events = list(_events(module, project, body))
            kinds = [e[0] for e in events]
            if "backward" not in kinds:
                continue
            state = "before"
            for i, (kind, node) in enumerate(events):
                if kind == "backward":
                    state = "filled"
                elif kind == "zero":
                    state = "zeroed" if state == "filled" else state
                elif kind == "read" and state == "before" and "backward" in kinds[i + 1 :]:
                    yield self.finding(
                        module,
                        node,
                        f"`{ast.unparse(node)}` is read before tape.backward (line "
                        f"{events[kinds.index('backward', i)][1].lineno}) has filled it, so it holds zeros or the "
                        "previous iteration's gradient. Move the read after backward.",
                    )
                elif kind == "read" and state == "zeroed":
                    yield self.finding(
                        module,
                        node,
                        f"`{ast.unparse(node)}` is read after tape.zero()/reset() cleared it and before any new "
                        "backward, so it is all zeros. Zero the tape after the optimizer update instead.",
                    )


def _events(module: SourceModule, project: Project, stmts: list[ast.stmt]) -> Iterator[tuple[str, ast.expr]]:
    """("backward" | "zero" | "read", node) in source order, not entering nested functions."""
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        nodes = sorted(
            (n for n in _walk_no_defs(stmt)),
            key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)),
        )
        for node in nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "backward" and module.is_tape_expr(node.func.value):
                    yield "backward", node
                elif node.func.attr in ("zero", "reset") and module.is_tape_expr(node.func.value):
                    yield "zero", node
            elif (
                isinstance(node, ast.Attribute)
                and node.attr == "grad"
                and isinstance(node.ctx, ast.Load)
                and _is_read(module, project, node)
            ):
                yield "read", node


def _walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            yield from _walk_no_defs(child)


def _is_read(module: SourceModule, project: Project, node: ast.Attribute) -> bool:
    if array_key(node.value) is None:
        return False
    parent = module.parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.attr in _WRITES | _METADATA:
        return False  # x.grad.zero_() is a write; x.grad.ptr / .shape are not its values
    if isinstance(parent, ast.Compare):
        return False  # x.grad is None
    if _captured(module, node):
        return False
    for anc in module.ancestors(node):
        if isinstance(anc, ast.Call):
            name = module.wp_call(anc)
            if name in ("launch", "launch_tiled"):
                if kwarg(anc, "adjoint") is not None:
                    return False
                key = array_key(node)
                accesses = project.launch_accesses(module, anc) or []
                if any(a.key == key and (a.stores or a.accums) and not a.reads for a in accesses):
                    return False  # a kernel that seeds or clears the gradient writes it
            if name == "copy" and anc.args and any(n is node for n in ast.walk(anc.args[0])):
                return False
            if isinstance(anc.func, ast.Attribute) and anc.func.attr == "backward":
                return False
        if isinstance(anc, ast.stmt):
            break
    return True


_VIEWS = {"flatten", "reshape", "view", "transpose", "contiguous"}


def _captured(module: SourceModule, node: ast.AST) -> bool:
    """`g = x.grad`, `grads = [p.grad.flatten() for p in params]`: a reference kept for later, not a read."""
    cur = node
    while True:
        parent = module.parents.get(cur)
        if (
            isinstance(parent, ast.Attribute)
            and parent.attr in _VIEWS
            and isinstance(module.parents.get(parent), ast.Call)
        ):
            cur = module.parents[parent]
        elif isinstance(
            parent,
            (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp, ast.comprehension, ast.Starred, ast.Dict),
        ):
            cur = parent
        else:
            return isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is cur
