"""WG017 ptr-alias."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .arrays import project_arrays, scope_of
from .base import Finding, Rule, register
from .source import Project, SourceModule, array_key, base_key, kwarg


@register
class PtrAlias(Rule):
    """## What it does
    Flags `wp.array(ptr=x.ptr, ...)` (a second array over the memory of `x`) when `x` or the alias is
    passed to a launch that runs while a tape records.

    ## Why is this bad?
    The tape and the overwrite tracker identify arrays by object, not by memory. A write through the
    alias silently clobbers values the tape recorded for `x` (and the reverse), and the alias has its own
    `.grad`, so adjoints written to one never reach the other: the gradient chain is split in two.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`), or zero for the parameters behind the alias (`zero`).

    ## Known problems
    Aliases that are only read, or used only outside the tape, are harmless; the rule cannot always tell.
    Pointers that do not come from a `.ptr` attribute (foreign memory) are not flagged.

    ## Example
    ```python
    view = wp.array(ptr=state.ptr, shape=(n,), dtype=float, requires_grad=True)
    with tape:
        wp.launch(relax, dim=n, inputs=[state], outputs=[view])
    ```
    Use instead:
    ```python
    relaxed = wp.zeros_like(state)
    with tape:
        wp.launch(relax, dim=n, inputs=[state], outputs=[relaxed])
    ```

    ## References
    - references/quick-checks.md §1
    - Warp docs: Differentiability ("Array Overwrites"); Arrays (`ptr=` constructor argument)
    """

    code, name = "WG017", "ptr-alias"
    message = "a ptr= alias of an array used on a tape"
    reference = "references/quick-checks.md §1"
    docs_section = "Differentiability: Array Overwrites"
    signatures = (Signature.SUBTLY_WRONG, Signature.ZERO)
    severity = "warning"
    confidence = "medium"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        uses = project_arrays(project).uses
        for node in module.calls:
            if not module.wp_call(node, {"array"}):
                continue
            ptr = kwarg(node, "ptr")
            if ptr is None:
                continue
            sources = [
                s
                for n in ast.walk(ptr)
                if isinstance(n, ast.Attribute) and n.attr == "ptr" and (s := array_key(n.value))
            ]
            if not sources:
                continue
            parent = module.parents.get(node)
            alias = next((a for t in getattr(parent, "targets", []) if (a := array_key(t))), None)
            names = sources + ([alias] if alias else [])
            if not any((scope_of(module, node, n), base_key(n)) in uses for n in names):
                continue
            yield self.finding(
                module,
                node,
                f"this array shares memory with `{sources[0]}`, and one of them is passed to a taped launch; the "
                "tape treats them as unrelated arrays with separate .grad buffers, so writes through one clobber "
                "values recorded for the other and adjoints do not cross between them. Use a separate buffer "
                "(or wp.clone) instead of a pointer alias.",
            )
