"""WG002 backward-disabled."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .kernel_body import writes_floats as _writes_floats
from .source import Project, SourceModule, is_const, kwarg


@register
class BackwardDisabled(Rule):
    """## What it does
    Flags `@wp.kernel(enable_backward=False)` on a kernel that is launched while a tape records,
    `wp.set_module_options({"enable_backward": False})` in a module whose kernels are launched while a
    tape records, and `wp.config.enable_backward = False` in a project that computes gradients.

    ## Why is this bad?
    Backward skips the adjoint of a backward-disabled kernel (it only logs a UserWarning), so the
    gradient chain is cut there: everything upstream gets zero or a partial gradient. The kernel option
    wins over the module option; `wp.autograd.gradcheck_tape` skips such kernels silently.

    ## Signature
    Gradients exactly zero (`zero`) upstream of the kernel, or `subtly_wrong` when other paths still
    carry part of the gradient.

    ## Known problems
    Kernels that are launched on the tape but do not feed the loss (diagnostics, rendering) are correctly
    backward-disabled. Launches are matched to kernels by name; a kernel reached through a variable
    (`k = kernels[i]`) is not seen.

    ## Example
    ```python
    @wp.kernel(enable_backward=False)
    def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), y: wp.array(dtype=float)): ...
    with tape:
        wp.launch(integrate, dim=n, inputs=[x, v], outputs=[y])
    ```
    Use instead:
    ```python
    @wp.kernel
    def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), y: wp.array(dtype=float)): ...
    ```

    ## References
    - references/quick-checks.md §3
    - Warp docs: Differentiability ("Limitations and Workarounds"); Runtime: Module Options (`enable_backward`)
    """

    code, name = "WG002", "backward-disabled"
    message = "backward is disabled for code that runs on a tape"
    reference = "references/quick-checks.md §3"
    docs_section = "Differentiability: Limitations and Workarounds; Module Options"
    signatures = (Signature.ZERO, Signature.SUBTLY_WRONG)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        taped = project.shared("WG002:taped", _first_taped_launch)
        for k in module.kernels:
            if k.kind == "kernel" and k.enable_backward is False and id(k) in taped and _writes_floats(k):
                m, call = taped[id(k)]
                dec = next(d for d in k.node.decorator_list if isinstance(d, ast.Call))
                yield self.finding(
                    module,
                    kwarg(dec, "enable_backward") or dec,
                    f"kernel `{k.name}` is launched while a tape records ({m.rel}:{call.lineno}), so backward "
                    "skips its adjoint and cuts the gradient chain. If it feeds the loss, remove "
                    "enable_backward=False; check stderr for 'configured with the option enable_backward=False'.",
                )
        opt = module.module_backward_disabled_at
        if opt is not None:
            hits = [
                (k, taped[id(k)])
                for k in module.kernels
                if k.kind == "kernel" and k.enable_backward is None and id(k) in taped
            ]
            if hits:
                k, (m, call) = hits[0]
                yield self.finding(
                    module,
                    opt,
                    f"this module disables backward, and its kernel `{k.name}` is launched while a tape records "
                    f"({m.rel}:{call.lineno}); backward skips it and cuts the gradient chain. Remove the option "
                    "or decorate the kernels that feed the loss with enable_backward=True.",
                )
        if project.module_differentiable(module):
            for node in module.nodes:
                if (
                    isinstance(node, ast.Assign)
                    and is_const(node.value, False)
                    and any(module.wp(t) == "config.enable_backward" for t in node.targets)
                ):
                    yield self.finding(
                        module,
                        node,
                        "wp.config.enable_backward = False makes every kernel defined afterwards "
                        "backward-disabled, in a program that computes gradients. Remove it, or scope it "
                        "to modules that never run on a tape.",
                    )


def _first_taped_launch(project: Project) -> dict[int, tuple[SourceModule, ast.Call]]:
    """id(kernel) -> the first launch of it that runs while a tape records."""
    first: dict[int, tuple[SourceModule, ast.Call]] = {}
    for m, call in project.taped_launches:
        k = project.launch_kernel(m, call)
        if k is not None:
            first.setdefault(id(k), (m, call))
    return first
