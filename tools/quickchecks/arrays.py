"""Where arrays are allocated and how taped launches use them, matched by name within a scope.

A name is matched the way a reader would: a local inside its function, `self.x` inside its class, a
module global inside its module; `states[i]` matches a list allocated as `states = [wp.zeros(...) ...]`
or filled with `states.append(...)`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from .source import (
    ALLOCATORS,
    LIKE_ALLOCATORS,
    Access,
    HostFunction,
    Project,
    SourceModule,
    array_key,
    base_key,
    dotted,
    is_const,
    kwarg,
)

Scope = tuple[str, ...]


@dataclass
class Allocation:
    module: SourceModule
    call: ast.Call
    """The allocation call (or the call of a project helper that allocates)."""
    key: str
    """Base key of the array (`y`, `self.y`, `states[]`)."""
    scope: Scope
    requires_grad: bool | None
    """True/False when known, None when it depends on a runtime value."""
    retain_grad: bool = False
    helper: str | None = None


@dataclass
class Use:
    module: SourceModule
    call: ast.Call
    access: Access
    kernel: str
    in_loop: bool


@dataclass
class ArrayIndex:
    allocations: list[Allocation] = field(default_factory=list)
    uses: dict[tuple[Scope, str], list[Use]] = field(default_factory=dict)
    flag_set: set[tuple[Scope, str, str]] = field(default_factory=set)
    """(scope, key, attribute) for `key.requires_grad = True` / `key.retain_grad = True` statements."""
    grad_reads: set[tuple[Scope, str]] = field(default_factory=set)
    """Arrays whose gradient the host code uses: `.grad` read (parameters the optimizer consumes) or
    handed to `tape.backward` (the loss)."""
    by_attribute: dict[str, list[Use]] = field(default_factory=dict)
    """Uses of `obj.attr` keys by their last attribute (`b.damper[s]` -> `damper[]`)."""

    def uses_of(self, alloc: Allocation) -> list[Use]:
        """Taped uses of the array allocated at `alloc`. Inside one function a name may be re-allocated
        (`pos = wp.array(...)` for an FD probe, then again with requires_grad=True): a use belongs to the
        nearest allocation above it."""
        uses = self.uses.get((alloc.scope, alloc.key), [])
        if alloc.scope[0] != "function":
            return uses
        starts = sorted(
            a.call.lineno for a in self.allocations if a.scope == alloc.scope and a.key == alloc.key
        )
        nxt = next((line for line in starts if line > alloc.call.lineno), None)
        return [u for u in uses if u.call.lineno > alloc.call.lineno and (nxt is None or u.call.lineno < nxt)]

    def attribute_uses(self, alloc: Allocation) -> list[Use]:
        """Uses of `self.attr` allocated in one class and reached as `other.attr` elsewhere, when no other
        allocation in the project assigns an attribute of that name (so the match is unambiguous)."""
        if not alloc.key.startswith("self.") or alloc.key.count(".") != 1:
            return []
        tail = alloc.key.split(".", 1)[1]
        if (
            sum(1 for a in self.allocations if a.key.startswith("self.") and a.key.split(".", 1)[1] == tail)
            != 1
        ):
            return []
        return [u for u in self.by_attribute.get(tail, []) if not base_key(u.access.key).startswith("self.")]


@lru_cache(maxsize=4096)
def _local_names(fn: ast.AST) -> frozenset[str]:
    names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)} if hasattr(fn, "args") else set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return frozenset(names)


def scope_of(module: SourceModule, node: ast.AST, key: str) -> Scope:
    """The scope a name used at `node` belongs to."""
    if key.startswith("self."):
        cls = module.enclosing_class(node)
        return ("class", module.rel, cls.name if cls else "")
    root = key.split(".", 1)[0].split("[", 1)[0]
    fn = module.host_function(node)
    while fn is not None:
        if root in _local_names(fn):
            return ("function", module.rel, str(id(fn)))
        fn = module.host_function(fn)
    return ("module", module.rel)


def _flag(call: ast.Call, name: str) -> bool | None:
    v = kwarg(call, name)
    if v is None:
        return False
    if isinstance(v, ast.Constant) and isinstance(v.value, bool):
        return v.value
    return None


def allocation_requires_grad(
    module: SourceModule, call: ast.Call, known: dict[tuple[Scope, str], bool | None], scope_node: ast.AST
) -> bool | Literal["skip"] | None:
    """requires_grad of an allocation call; "skip" when it is not an allocation we reason about."""
    name = module.wp_call(call)
    if name is None:
        return "skip"
    short = name.rsplit(".", 1)[-1]
    if short in ALLOCATORS:
        if short == "array" and kwarg(call, "ptr") is not None:
            return "skip"  # an alias view: WG017's business
        return _flag(call, "requires_grad")
    if short in LIKE_ALLOCATORS:
        explicit = kwarg(call, "requires_grad")
        if explicit is not None:
            return _flag(call, "requires_grad")
        # *_like and clone inherit the flag from their source.
        src = call.args[0] if call.args else kwarg(call, "src") or kwarg(call, "arr")
        key = array_key(src) if src is not None else None
        if key is None:
            return None
        return known.get((scope_of(module, scope_node, key), base_key(key)))
    return "skip"


Helpers = dict[str, tuple[ast.Call, HostFunction, SourceModule, str]]
"""Name -> (the allocation it returns, the function, its module, "[]" when it returns a list of them)."""


def _returned_allocation(fn: HostFunction, value: ast.expr) -> tuple[ast.expr, str]:
    """What a helper returns, seen through one local (`bufs = [...]; return bufs`) and one list of allocations
    (`[wp.zeros(n) for _ in range(steps)]`: per-step buffers), with the "[]" suffix of a list."""
    if isinstance(value, ast.Name):
        sets = [n for n in ast.walk(fn) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
        if len(sets) == 1:
            value = sets[0].value
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return value.elt, "[]"
    if isinstance(value, (ast.List, ast.Tuple)) and value.elts:
        return value.elts[0], "[]"
    return value, ""


def _helpers(project: Project) -> Helpers:
    """Project functions that just return a fresh allocation (`def alloc(n): return wp.zeros(n)`), or a list of
    them."""
    out: Helpers = {}
    for name, defs in project.host_functions.items():
        if len(defs) != 1:
            continue
        module, fn = defs[0]
        rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
        if len(rets) != 1 or rets[0].value is None:
            continue
        value, suffix = _returned_allocation(fn, rets[0].value)
        if isinstance(value, ast.Call) and module.wp_call(value, ALLOCATORS | LIKE_ALLOCATORS):
            out[name] = (value, fn, module, suffix)
    return out


def _helper_requires_grad(
    call: ast.Call, alloc: ast.Call, fn: HostFunction, module: SourceModule
) -> bool | None:
    v = kwarg(alloc, "requires_grad")
    if v is None:
        return False if module.wp_call(alloc, ALLOCATORS) else None
    if isinstance(v, ast.Constant) and isinstance(v.value, bool):
        return v.value
    if isinstance(v, ast.Name):
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        passed = kwarg(call, v.id)
        if passed is None and v.id in params:
            i = params.index(v.id) - (1 if params and params[0] == "self" else 0)
            if 0 <= i < len(call.args):
                passed = call.args[i]
        if passed is None:
            defaults = fn.args.defaults
            offset = len(params) - len(defaults)
            if v.id in params and params.index(v.id) >= offset:
                passed = defaults[params.index(v.id) - offset]
        if isinstance(passed, ast.Constant) and isinstance(passed.value, bool):
            return passed.value
    return None


def build_index(project: Project) -> ArrayIndex:
    index = ArrayIndex()
    helpers = _helpers(project)
    for module in project.modules:
        known: dict[tuple[Scope, str], bool | None] = {}
        for node in module.nodes:
            if isinstance(node, ast.Assign):
                targets = [(t, key) for t in node.targets if (key := array_key(t)) is not None]
                value, suffix = node.value, ""
                if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
                    value, suffix = value.elt, "[]"
                elif isinstance(value, (ast.List, ast.Tuple)) and value.elts:
                    value, suffix = value.elts[0], "[]"
                for _, key in targets:
                    if key.endswith(".grad"):  # `y.grad = wp.array(seed)`: y gets a gradient buffer
                        owner = key[: -len(".grad")]
                        index.flag_set.add((scope_of(module, node, owner), base_key(owner), "requires_grad"))
                    if key.endswith((".requires_grad", ".retain_grad")) and is_const(node.value, True):
                        owner = key.rsplit(".", 1)[0]
                        index.flag_set.add(
                            (scope_of(module, node, owner), base_key(owner), key.rsplit(".", 1)[1])
                        )
                if isinstance(value, ast.Call):
                    for t, key in targets:
                        _add_allocation(index, module, value, base_key(key) + suffix, t, known, helpers)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "insert")
                and node.args
                and isinstance(node.args[-1], ast.Call)
            ):
                seq = array_key(node.func.value)
                if seq is not None:
                    _add_allocation(index, module, node.args[-1], base_key(seq) + "[]", node, known, helpers)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "backward"
                and module.is_tape_expr(node.func.value)
            ):
                # The loss handed to backward must carry gradient just like a parameter.
                for seed in node.args[:1]:
                    key = array_key(seed)
                    if key is not None:
                        index.grad_reads.add((scope_of(module, node, key), base_key(key)))
                # `grads={y: seed}` makes the seed y's gradient even when y has none: y needs no flag.
                grads = kwarg(node, "grads")
                for k in grads.keys if isinstance(grads, ast.Dict) else []:
                    key = array_key(k) if k is not None else None
                    if key is not None:
                        index.flag_set.add((scope_of(module, node, key), base_key(key), "requires_grad"))
            elif isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(node.ctx, ast.Load):
                key = array_key(node.value)
                if key is not None:
                    index.grad_reads.add((scope_of(module, node, key), base_key(key)))
    for module, call in project.taped_launches:
        accesses = project.launch_accesses(module, call)
        if not accesses:
            continue
        kernel = (
            dotted(call.args[0]) if call.args else dotted(kwarg(call, "kernel") or ast.Constant(0))
        ) or "?"
        in_loop = _in_loop(module, call)
        for acc in accesses:
            if acc.via_struct:
                continue
            key = base_key(acc.key)
            use = Use(module, call, acc, kernel.rsplit(".", 1)[-1], in_loop)
            index.uses.setdefault((scope_of(module, call, acc.key), key), []).append(use)
            if "." in key:
                index.by_attribute.setdefault(key.rsplit(".", 1)[1], []).append(use)
    return index


def _in_loop(module: SourceModule, node: ast.AST) -> bool:
    for anc in module.ancestors(node):
        if isinstance(anc, (ast.For, ast.While)):
            return True
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
    return False


def _add_allocation(
    index: ArrayIndex,
    module: SourceModule,
    call: ast.Call,
    key: str,
    at: ast.AST,
    known: dict[tuple[Scope, str], bool | None],
    helpers: Helpers,
) -> None:
    scope = scope_of(module, at, key)
    found = allocation_requires_grad(module, call, known, at)
    helper = None
    if found == "skip":
        name = (
            call.func.id
            if isinstance(call.func, ast.Name)
            else (call.func.attr if isinstance(call.func, ast.Attribute) else None)
        )
        if name not in helpers:
            return
        alloc, fn, hmod, listed = helpers[name]
        rg, helper = _helper_requires_grad(call, alloc, fn, hmod), name
        if listed and not key.endswith("[]"):
            key += listed  # `bufs = make_buffers(n)` holds a list: its uses are `bufs[s]`
        retain = _flag(alloc, "retain_grad") is True
    else:
        rg = found
        retain = _flag(call, "retain_grad") is True
    known[(scope, key)] = rg
    index.allocations.append(Allocation(module, call, key, scope, rg, retain, helper))


def project_arrays(project: Project) -> ArrayIndex:
    """The project's array index, built once per project: several rules read it."""
    return project.shared("arrays.index", build_index)
