"""WG016 sum-seed-for-mean-objective."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .loops import backward_calls
from .source import Project, SourceModule, array_key, kwarg


@register
class SumSeedForMeanObjective(Rule):
    """## What it does
    Flags `tape.backward(grads={y: ones})` (a seed from `wp.ones`, `wp.ones_like`, `wp.full(..., 1.0)`,
    `np.ones`) and `y.grad.fill_(1.0)` followed by `tape.backward()`, when the program reports the
    objective as the mean of `y` (`np.mean(y.numpy())`, `y.numpy().mean()`, or the sum divided by a count).

    ## Why is this bad?
    Seeding every element's adjoint with 1 backpropagates the sum of the elements. The reported objective
    is the mean, so the gradient the optimizer consumes is exactly N times the gradient of the objective,
    and an FD check of the reported loss disagrees by that factor.

    ## Signature
    Off by an exact factor N (`exact_factor`), N being the number of elements.

    ## Known problems
    When the sum really is the objective and the mean is only printed for display, the gradient is right
    for the sum (scale the learning rate accordingly). Mean reports computed in another file are not seen.

    ## Example
    ```python
    tape.backward(grads={err: wp.ones(n, dtype=float)})
    print("loss", np.mean(err.numpy()))
    ```
    Use instead:
    ```python
    tape.backward(grads={err: wp.full(n, 1.0 / n, dtype=float)})
    print("loss", np.mean(err.numpy()))
    ```

    ## References
    - references/quick-checks.md §7
    - Warp docs: Differentiability ("Tape": `Tape.backward(grads=...)`)
    """

    code, name = "WG016", "sum-seed-for-mean-objective"
    message = "backward seeded with ones while the reported objective is a mean"
    reference = "references/quick-checks.md §7"
    docs_section = "Differentiability: Tape.backward"
    signatures = (Signature.EXACT_FACTOR,)
    severity = "warning"
    confidence = "medium"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        for call in backward_calls(module):
            grads = kwarg(call, "grads")
            if isinstance(grads, ast.Dict):
                for k, v in zip(grads.keys, grads.values):
                    key = array_key(k) if k is not None else None
                    if (
                        key
                        and _is_ones(module, v, module.host_function(call))
                        and _mean_reported(project, key)
                    ):
                        yield self._emit(module, call, key)
            elif not call.args and grads is None:
                fn = module.host_function(call) or module.tree
                for node in ast.walk(fn):
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "fill_"
                        and node.args
                        and isinstance(node.args[0], ast.Constant)
                        and node.args[0].value == 1
                        and (grad := array_key(node.func.value) or "").endswith(".grad")
                    ):
                        key = grad[: -len(".grad")]
                        if _mean_reported(project, key):
                            yield self._emit(module, call, key)

    def _emit(self, module: SourceModule, call: ast.Call, key: str) -> Finding:
        return self.finding(
            module,
            call,
            f"every element of `{key}` is seeded with 1.0, which backpropagates the sum, but the program reports "
            f"the mean of `{key}`; the gradient is N times the reported objective's. Seed with 1/N (or compute "
            "the mean in the loss kernel) and recheck with FD.",
        )


def _is_ones(module: SourceModule, v: ast.AST, fn: ast.AST | None, depth: int = 2) -> bool:
    if isinstance(v, ast.Call):
        name = module.wp(v.func) or ast.unparse(v.func)
        short = name.rsplit(".", 1)[-1]
        if short in ("ones", "ones_like"):
            return True
        if short in ("full", "full_like"):
            val = kwarg(v, "value") or (v.args[1] if len(v.args) > 1 else None)
            return isinstance(val, ast.Constant) and val.value == 1
        if short == "array" and v.args:
            return _is_ones(module, v.args[0], fn, depth)
    if isinstance(v, ast.Name) and depth > 0 and fn is not None:
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == v.id for t in node.targets
            ):
                return _is_ones(module, node.value, fn, depth - 1)
    return False


def _mean_reported(project: Project, key: str) -> bool:
    return project.shared(f"WG016:{key}", lambda p: _search_mean(p, key))


_SUBJECT = r"([\w.]+(?:\([^()]*\))?)"
_MEAN_PATTERNS = [
    re.compile(rf"(?:mean|average)\(\s*(?:[\w.]*?\b)?{_SUBJECT}\.numpy\(\)"),
    re.compile(rf"{_SUBJECT}\.numpy\(\)(?:\[[^\]]*\])?\.mean\("),
    re.compile(rf"sum\(\s*{_SUBJECT}\.numpy\(\)\s*\)\s*/"),
    re.compile(rf"{_SUBJECT}\.numpy\(\)\.sum\(\)\s*/"),
]


def _mean_subjects(project: Project) -> set[str]:
    """Every expression the program reports a mean of (`err`, `self.err`, `self.forward()`), found once."""
    return project.shared("WG016:subjects", _find_mean_subjects)


def _find_mean_subjects(project: Project) -> set[str]:
    subjects: set[str] = set()
    for m in project.modules:
        if "numpy()" not in m.text:
            continue
        for pat in _MEAN_PATTERNS:
            subjects |= {s.strip() for s in pat.findall(m.text)}
    return subjects


def _returners(project: Project) -> dict[str, set[str]]:
    """Array key -> names of the project functions that return it."""
    table: dict[str, set[str]] = {}
    for defs in project.host_functions.values():
        for _, fn in defs:
            for r in ast.walk(fn):
                if isinstance(r, ast.Return) and r.value is not None and (k := array_key(r.value)):
                    table.setdefault(k, set()).add(fn.name)
    return table


def _search_mean(project: Project, key: str) -> bool:
    subjects = _mean_subjects(project)
    if key in subjects:
        return True
    returners = project.shared("WG016:returners", _returners).get(key, set())
    # `self.forward().numpy().mean()` where forward() returns the seeded array.
    called = {re.sub(r"\(.*$", "", s).rsplit(".", 1)[-1] for s in subjects if s.endswith(")")}
    return bool(returners & called)
