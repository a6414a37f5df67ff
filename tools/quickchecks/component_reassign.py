"""WG008 component-reassign."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .kernel_body import differentiable_kernels
from .source import KernelInfo, Project, SourceModule, names_in

_AXES = {"x": "0", "y": "1", "z": "2", "w": "3"}


@register
class ComponentReassign(Rule):
    """## What it does
    Flags a second plain assignment (`=`) to the same component of a local vector, matrix or quaternion
    (`v[0] = ...` twice, `v.x = ...` after `v[0] = ...`, or one assignment inside a loop) in a
    differentiable kernel or `@wp.func`, on the same control-flow path.

    ## Why is this bad?
    Component assignment is differentiable only under the assign-once rule. A second assignment compiles
    silently; the forward value is right but backward sums the adjoints of both assignments (measured:
    a.grad [5, 7] instead of [3, 3]). After the first assignment only `+=`/`-=` are safe.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`).

    ## Known problems
    Assignments in exclusive `if`/`else` branches are not flagged. A project that sets
    `wp.config.enable_vector_component_overwrites = True` is skipped (copy-based assignment).

    ## Example
    ```python
    v = wp.vec3()
    v[0] = a[i]
    v[0] = v[0] * 2.0
    ```
    Use instead:
    ```python
    v = wp.vec3(a[i] * 2.0, 0.0, 0.0)
    ```

    ## References
    - references/quick-checks.md §6a
    - Warp docs: Differentiability ("Limitations and Workarounds": vector component assignment)
    """

    code, name = "WG008", "component-reassign"
    message = "vector/matrix component assigned more than once"
    reference = "references/quick-checks.md §6a"
    docs_section = "Differentiability: Limitations and Workarounds"
    signatures = (Signature.SUBTLY_WRONG,)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        if any("enable_vector_component_overwrites = True" in m.text for m in project.modules):
            return
        for k in differentiable_kernels(module, project):
            flagged: dict[int, ast.Assign] = {}
            _walk(k, k.node.body, set(), flagged)
            for line in sorted(flagged):
                node = flagged[line]
                yield self.finding(
                    module,
                    node,
                    f"`{ast.unparse(node.targets[0])}` in `{k.name}` was already assigned on this path (or is "
                    "assigned in a loop); backward sums the adjoints of both assignments. Assign each component "
                    "once (build the vector in one constructor) or accumulate with += / -=.",
                )


def _component(k: KernelInfo, target: ast.AST) -> tuple[str, str] | None:
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        name = target.value.id
        comp = ast.unparse(target.slice)
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.attr in _AXES:
        name, comp = target.value.id, _AXES[target.attr]
    else:
        return None
    if name in k.params and k.is_array_param(name):
        return None
    return name, comp


def _walk(
    k: KernelInfo, stmts: list[ast.stmt], assigned: set[tuple[str, str]], flagged: dict[int, ast.Assign]
) -> set[tuple[str, str]]:
    """The components assigned after `stmts`; a second assignment on one path goes into `flagged` (by line)."""
    for stmt in stmts:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                c = _component(k, t)
                if c is not None:
                    if c in assigned:
                        flagged.setdefault(stmt.lineno, stmt)
                    assigned.add(c)
                elif isinstance(t, ast.Name):
                    assigned -= {a for a in assigned if a[0] == t.id}
        elif isinstance(stmt, ast.If):
            a = _walk(k, stmt.body, set(assigned), flagged)
            b = _walk(k, stmt.orelse, set(assigned), flagged)
            assigned |= a | b
        elif isinstance(stmt, (ast.For, ast.While)):
            first = _walk(k, stmt.body, set(assigned), flagged)
            # `v[j] = ...` over j touches a different component each iteration.
            loop_vars = names_in(stmt.target) if isinstance(stmt, ast.For) else set()
            again = {c for c in first if not (set(re.findall(r"[A-Za-z_]\w*", c[1])) & loop_vars)}
            assigned |= _walk(k, stmt.body, again, flagged)
        elif isinstance(stmt, ast.With):
            assigned = _walk(k, stmt.body, assigned, flagged)
    return assigned
