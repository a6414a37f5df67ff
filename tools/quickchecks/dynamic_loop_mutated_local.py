"""WG009 dynamic-loop-mutated-local."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ..signatures import Signature
from .base import Finding, Rule, register
from .kernel_body import (
    body_nodes,
    data_dependent,
    definitions,
    differentiable_kernels,
)
from .source import KernelInfo, Project, SourceModule, is_const, names_in

_INT_CASTS = {"int", "int32", "int64", "uint32", "uint64", "int8", "int16", "uint8", "uint16", "tid"}


@register
class DynamicLoopMutatedLocal(Rule):
    """## What it does
    Flags a dynamic loop (reported at the `for`/`while` line) in which a local variable defined before the loop (a `while`, or a `range()` whose bounds are not
    compile-time integers or whose trip count exceeds `max_unroll`, 16 by default, or that contains
    `break`) and reassigned inside it (`p = p * x[i]`), in a differentiable kernel or `@wp.func`, when
    some adjoint needs its value: a non-linear update, or a non-linear use after the loop (`wp.sqrt(s)`,
    `s * w[0]`).

    ## Why is this bad?
    Dynamic loops are not replayed in backward: the mutated local keeps its pre-loop value when the
    adjoints run, so every adjoint that depends on it is wrong. The documented results are a product
    gradient of [32, 8, 2] instead of [4, 4, 4] and `inf` for a norm.

    ## Signature
    Subtly wrong gradients (`subtly_wrong`), or NaN/inf (`nan_inf`) when the stale value is a divisor.

    ## Known problems
    Integer counters (initialised from an int literal or cast) are skipped, and so are locals that are
    only accumulated linearly (`s += x[i]`) and used linearly afterwards: their adjoints never need the
    value (measured: x.grad correct, while `s * w[0]` after the loop gave w.grad 0). Loop bounds that are
    module constants are resolved only when assigned an int literal or `wp.constant(<int>)` in the same
    file. Moving the loop into a `@wp.func` does not help on Warp 1.19 (measured: [36, 18, 3] instead of
    [6, 3, 2] either way), so functions are checked like kernels.

    ## Example
    ```python
    @wp.kernel
    def prod(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
        p = float(1.0)
        for i in range(n):
            p = p * x[i]
        out[0] = p
    ```
    Use instead:
    ```python
    N = wp.constant(8)

    @wp.kernel
    def prod(x: wp.array(dtype=float), out: wp.array(dtype=float)):
        p = float(1.0)
        for i in range(N):  # compile-time bound <= max_unroll: unrolled, every step replayed
            p = p * x[i]
        out[0] = p
    ```

    ## References
    - references/quick-checks.md §6b
    - Warp docs: Differentiability ("Limitations and Workarounds": "Dynamic Loops")
    """

    code, name = "WG009", "dynamic-loop-mutated-local"
    message = "local mutated inside a dynamic loop (not replayed in backward)"
    reference = "references/quick-checks.md §6b"
    docs_section = "Differentiability: Dynamic Loops"
    signatures = (Signature.SUBTLY_WRONG, Signature.NAN_INF)
    severity = "error"
    confidence = "high"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        consts = _module_int_constants(module)
        max_unroll = _max_unroll(project)
        for k in differentiable_kernels(module, project):
            defs = definitions(k)
            for loop in body_nodes(k):
                if not isinstance(loop, (ast.For, ast.While)) or not _dynamic(loop, consts, max_unroll):
                    continue
                before = _defined_before(k, loop)
                mutated: list[str] = []
                first_bad: ast.stmt | None = None
                for node in ast.walk(loop):
                    targets = (
                        node.targets
                        if isinstance(node, ast.Assign)
                        else [node.target]
                        if isinstance(node, ast.AugAssign)
                        else []
                    )
                    for t in targets:
                        if not isinstance(t, ast.Name) or t.id not in before or t.id in mutated:
                            continue
                        if _is_int(module, before[t.id]):
                            continue
                        bad = _nonlinear_use(module, k, defs, loop, t.id)
                        if bad is not None:
                            mutated.append(t.id)
                            first_bad = first_bad or bad
                if not mutated or first_bad is None:
                    continue
                names = ", ".join(f"`{n}`" for n in mutated)
                yield self.finding(
                    module,
                    loop,
                    f"this loop in `{k.name}` is dynamic (not unrolled), and {names} defined before it "
                    f"{'is' if len(mutated) == 1 else 'are'} reassigned inside it while line {first_bad.lineno} "
                    "needs the value in backward; dynamic loops are not replayed, so those adjoints see the "
                    "pre-loop value. Use a compile-time range (<= max_unroll) or store the per-iteration values "
                    "in an array.",
                )


_CONSTRUCTORS = re.compile(r"^(vec|mat|quat|vector|matrix|transform|spatial_vector)")


def _additive(module: SourceModule, k: KernelInfo, defs: dict, expr: ast.AST, name: str) -> bool:
    """Whether `expr` uses `name` only linearly (sums, components, scaling by constants), so that no adjoint
    of `expr` needs the value of `name`."""
    if name not in names_in(expr):
        return True
    if isinstance(expr, ast.Name):
        return True
    if isinstance(expr, ast.Subscript):
        return name not in names_in(expr.slice) and _additive(module, k, defs, expr.value, name)
    if isinstance(expr, ast.Attribute):
        return _additive(module, k, defs, expr.value, name)
    if isinstance(expr, ast.UnaryOp):
        return _additive(module, k, defs, expr.operand, name)
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, (ast.Add, ast.Sub)):
            return _additive(module, k, defs, expr.left, name) and _additive(
                module, k, defs, expr.right, name
            )
        if isinstance(expr.op, (ast.Mult, ast.Div)):
            sides = [(expr.left, expr.right)] + (
                [(expr.right, expr.left)] if isinstance(expr.op, ast.Mult) else []
            )
            return any(
                name not in names_in(other)
                and not data_dependent(k, other, defs)
                and _additive(module, k, defs, mine, name)
                for mine, other in sides
            )
        return False
    if isinstance(expr, ast.Call):
        fname = (module.wp(expr.func) or "").rsplit(".", 1)[-1]
        if _CONSTRUCTORS.match(fname) or fname in ("float", "float32", "float64"):
            return all(_additive(module, k, defs, a, name) for a in expr.args)
        if fname in ("atomic_add", "atomic_sub") and len(expr.args) >= 3:
            # accumulating into an array is linear in the value; the array and index must not use it
            return all(name not in names_in(a) for a in expr.args[:-1]) and _additive(
                module, k, defs, expr.args[-1], name
            )
    return False


def _nonlinear_use(
    module: SourceModule, k: KernelInfo, defs: dict, loop: ast.For | ast.While, name: str
) -> ast.stmt | None:
    """The first statement (in or after the loop) whose adjoint needs the value of the loop-mutated local."""
    for node in ast.walk(loop):
        # `p *= x[i]` reads p implicitly: its adjoint needs p unless the factor is a constant.
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and not isinstance(node.op, (ast.Add, ast.Sub))
            and not _additive(
                module, k, defs, ast.BinOp(ast.Name(name, ast.Load()), node.op, node.value), name
            )
        ):
            return node
    for node in ast.walk(k.node):
        if not (
            isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Load)
            and node.lineno >= loop.lineno
        ):
            continue
        stmt: ast.AST | None = node
        while stmt is not None and not isinstance(stmt, ast.stmt):
            parent = module.parents.get(stmt)
            if isinstance(parent, (ast.Compare, ast.BoolOp)) or (
                isinstance(parent, ast.Subscript) and stmt is parent.slice
            ):
                stmt = None  # a condition or an index: no gradient flows through it
                break
            stmt = parent
        if not isinstance(stmt, ast.stmt) or isinstance(stmt, (ast.If, ast.While, ast.For)):
            continue
        value = getattr(stmt, "value", None)
        if value is None:
            continue
        if not _additive(module, k, defs, value, name):
            return stmt
    return None


def _module_int_constants(module: SourceModule) -> dict[str, int]:
    out = {}
    for node in module.tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Call) and module.wp_call(v, {"constant"}) and v.args:
                v = v.args[0]
            if isinstance(v, ast.Constant) and isinstance(v.value, int) and not isinstance(v.value, bool):
                out[node.targets[0].id] = v.value
    return out


def _max_unroll(project: Project) -> int:
    return project.shared("max_unroll", _find_max_unroll)


def _find_max_unroll(project: Project) -> int:
    for m in project.modules:
        if "max_unroll" not in m.text:
            continue
        for node in m.nodes:
            if isinstance(node, ast.Dict):
                for key, v in zip(node.keys, node.values):
                    if (
                        is_const(key, "max_unroll")
                        and isinstance(v, ast.Constant)
                        and isinstance(v.value, int)
                    ):
                        return v.value
            if (
                isinstance(node, ast.Assign)
                and any(m.wp(t) == "config.max_unroll" for t in node.targets)
                and (isinstance(node.value, ast.Constant) and isinstance(node.value.value, int))
            ):
                return node.value.value
    return 16


def _dynamic(loop: ast.For | ast.While, consts: dict[str, int], max_unroll: int) -> bool:
    if isinstance(loop, ast.While):
        return True
    it = loop.iter
    if (
        not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range")
        or not it.args
    ):
        return False  # iterating something else (a vector, wp.static(...)): not ours to judge
    values: list[int] = []
    for a in it.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, int):
            values.append(a.value)
        elif (
            isinstance(a, ast.UnaryOp)
            and isinstance(a.op, ast.USub)
            and isinstance(a.operand, ast.Constant)
            and isinstance(a.operand.value, int)  # `range(-1.5)` is not a compile-time bound: unknown below
        ):
            values.append(-a.operand.value)
        elif isinstance(a, ast.Name) and a.id in consts:
            values.append(consts[a.id])
        else:
            # len() of a vector/matrix is a compile-time constant, of an array it is not: stay quiet.
            return not (isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id == "len")
    has_break = any(isinstance(n, ast.Break) for n in ast.walk(loop))
    return len(range(*values)) > max_unroll or has_break


def _defined_before(k: KernelInfo, loop: ast.For | ast.While) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in ast.walk(k.node):
        if (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and node.lineno < loop.lineno
            and node.value is not None
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, node.value)
    for p in k.params:
        out.setdefault(p, ast.Constant(None))
    return {n: v for n, v in out.items() if not (n in k.params and k.kind == "kernel")}


def _is_int(module: SourceModule, value: ast.expr) -> bool:
    if isinstance(value, ast.Constant):
        return isinstance(value.value, int)
    if isinstance(value, ast.Call):
        name = module.wp(value.func) or (value.func.id if isinstance(value.func, ast.Name) else "")
        return name.rsplit(".", 1)[-1] in _INT_CASTS
    return False
