"""Parsed user source for the quick-check rules: warp name resolution, kernels, launches and tape scopes.

Everything here is static: files are parsed with `ast`, never imported. Names are resolved the way a
reader would resolve them (`import warp as wp`, `from warp import zeros`, `self.` attributes inside a
class); anything the analysis cannot see (dynamic dispatch, arrays built by third-party helpers such as
`model.state()`) is treated as unknown, so rules stay quiet rather than guess.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TypeVar, cast

T = TypeVar("T")
N = TypeVar("N", bound=ast.AST)
HostFunction = ast.FunctionDef | ast.AsyncFunctionDef

KERNEL_DECORATORS = {"kernel", "func", "func_grad", "func_replay", "func_native"}
ALLOCATORS = {"zeros", "empty", "full", "ones", "array", "from_numpy"}
LIKE_ALLOCATORS = {"zeros_like", "empty_like", "ones_like", "full_like", "clone"}
ATOMICS = {
    "atomic_add",
    "atomic_sub",
    "atomic_min",
    "atomic_max",
    "atomic_cas",
    "atomic_exch",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
}
HOST_WRITES = {"zero_", "fill_"}
_GRAD_USE = re.compile(r"Tape\(|\.backward\(|gradcheck|requires_grad\s*=\s*True|func_grad|adjoint\s*=\s*True")
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def array_key(node: ast.AST) -> str | None:
    """A textual identity for an array expression: `x`, `self.x`, `state.q`, `states[i + 1]`, `x.grad`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = array_key(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):
        base = array_key(node.value)
        return f"{base}[{ast.unparse(node.slice)}]" if base else None
    return None


def base_key(key: str) -> str:
    """Drop subscript indices: `states[i + 1].q` -> `states[].q` (lists of arrays are matched as a whole)."""
    out, depth = [], 0
    for ch in key:
        if ch == "[":
            if depth == 0:
                out.append("[]")
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def path_of(node: ast.AST) -> str | None:
    """Array path inside a kernel: subscripts stripped, so `s.arr[i][j]` -> `s.arr`, `x[i].y` -> `x`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = path_of(node.value)
        if base is None:
            return None
        # `x[i].y` is a component of element i of x: the array is x.
        return base if isinstance(node.value, ast.Subscript) else f"{base}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return path_of(node.value)
    return None


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def kwarg(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def arg(call: ast.Call, index: int, name: str) -> ast.expr | None:
    """Positional argument `index` or keyword `name` of a call."""
    value = kwarg(call, name)
    if value is not None:
        return value
    if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    return None


def is_const(node: ast.AST | None, value: object) -> bool:
    """Whether `node` is the literal `value` (of its exact type: `1` is not `True`); None (a `**mapping` key,
    a missing default) is no literal."""
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


@dataclass
class KernelInfo:
    """A `@wp.kernel` / `@wp.func` / `@wp.func_grad` / `@wp.func_replay` definition and what it touches."""

    node: ast.FunctionDef
    module: SourceModule
    kind: str
    target: str | None = None
    """For func_grad/func_replay: the name of the forward function."""
    enable_backward: bool | None = None
    """From the decorator (`@wp.kernel(enable_backward=False)`); None when not set there."""
    reads: set[str] = field(default_factory=set)
    stores: set[str] = field(default_factory=set)
    accums: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def params(self) -> list[str]:
        return [a.arg for a in self.node.args.posonlyargs + self.node.args.args]

    @property
    def writes(self) -> set[str]:
        return self.stores | self.accums

    def annotation(self, param: str) -> ast.expr | None:
        for a in self.node.args.posonlyargs + self.node.args.args:
            if a.arg == param:
                return a.annotation
        return None

    def is_array_param(self, param: str) -> bool:
        ann = self.annotation(param)
        if ann is None:
            return False
        text = ast.unparse(ann)
        return "array" in text or "indexedarray" in text.lower()

    def backward_enabled(self) -> bool:
        if self.enable_backward is not None:
            return self.enable_backward
        return self.module.module_backward_enabled


class SourceModule:
    """One parsed file of the user's project."""

    def __init__(self, path: Path, rel: str, text: str, tree: ast.Module):
        self.path, self.rel, self.text, self.tree = path, rel, text, tree
        self.lines = text.splitlines()
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.roots: dict[str, str] = {}
        """Local name -> the warp path it is bound to ("" for warp itself, "optim.Adam", "zeros", ...)."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "warp" or a.name.startswith("warp."):
                        if a.asname:
                            self.roots[a.asname] = a.name.removeprefix("warp").lstrip(".")
                        else:
                            self.roots["warp"] = ""
            elif (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.level == 0
                and (node.module == "warp" or node.module.startswith("warp."))
            ):
                prefix = node.module.removeprefix("warp").lstrip(".")
                for a in node.names:
                    self.roots[a.asname or a.name] = f"{prefix}.{a.name}" if prefix else a.name

    @cached_property
    def nodes(self) -> list[ast.AST]:
        """Every node of the module (walked once; rules filter this instead of re-walking)."""
        return list(ast.walk(self.tree))

    @cached_property
    def calls(self) -> list[ast.Call]:
        """Every call of the module, in `nodes` order."""
        return [n for n in self.nodes if isinstance(n, ast.Call)]

    @cached_property
    def noqa(self) -> dict[int, set[str] | None]:
        """Line -> codes suppressed there by `# noqa: WGnnn` (None = every code)."""
        out: dict[int, set[str] | None] = {}
        for i, line in enumerate(self.lines, 1):
            m = _NOQA.search(line)
            if m:
                codes = m.group("codes")
                out[i] = {c.upper() for c in re.split(r"[\s,]+", codes) if c} if codes else None
        return out

    def wp(self, node: ast.AST | None) -> str | None:
        """The warp path a Name/Attribute refers to (`wp.zeros` -> "zeros", `wp.optim.Adam` -> "optim.Adam")."""
        if node is None:
            return None
        text = dotted(node)
        if text is None:
            return None
        root, _, rest = text.partition(".")
        if root not in self.roots:
            return None
        prefix = self.roots[root]
        return ".".join(p for p in (prefix, rest) if p) or None

    def wp_call(self, node: ast.AST, names: set[str] | None = None) -> str | None:
        """If `node` is a call of a warp function (optionally one of `names`), its warp path."""
        if not isinstance(node, ast.Call):
            return None
        name = self.wp(node.func)
        if name is None:
            return None
        if names is not None and name not in names and name.rsplit(".", 1)[-1] not in names:
            return None
        return name

    def enclosing(self, node: ast.AST, kinds: tuple[type[N], ...]) -> N | None:
        cur = self.parents.get(node)
        while cur is not None:
            if isinstance(cur, kinds):
                return cur
            cur = self.parents.get(cur)
        return None

    def host_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        fn = self.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        return fn if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) else None

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        return self.enclosing(node, (ast.ClassDef,))

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        cur = self.parents.get(node)
        while cur is not None:
            yield cur
            cur = self.parents.get(cur)

    def decorator_kind(self, fn: ast.FunctionDef) -> tuple[str, ast.expr] | None:
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = self.wp(target)
            if name in KERNEL_DECORATORS:
                return name, dec
        return None

    @cached_property
    def kernels(self) -> list[KernelInfo]:
        out = []
        for node in self.nodes:
            if isinstance(node, ast.FunctionDef):
                found = self.decorator_kind(node)
                if found is None:
                    continue
                kind, dec = found
                info = KernelInfo(node, self, kind)
                if isinstance(dec, ast.Call):
                    if kind in ("func_grad", "func_replay") and dec.args:
                        info.target = (dotted(dec.args[0]) or "").rsplit(".", 1)[-1] or None
                    eb = kwarg(dec, "enable_backward")
                    if isinstance(eb, ast.Constant) and isinstance(eb.value, bool):
                        info.enable_backward = eb.value
                out.append(info)
        return out

    @cached_property
    def module_backward_enabled(self) -> bool:
        return self.module_backward_disabled_at is None

    @cached_property
    def module_backward_disabled_at(self) -> ast.Call | None:
        """The `wp.set_module_options({"enable_backward": False})` call of this module, if any."""
        for node in self.calls:
            if (
                self.wp_call(node, {"set_module_options"})
                and node.args
                and isinstance(node.args[0], ast.Dict)
            ):
                for k, v in zip(node.args[0].keys, node.args[0].values):
                    if is_const(k, "enable_backward") and is_const(v, False):
                        return node
        return None

    def kernel_of(self, node: ast.AST) -> KernelInfo | None:
        """The kernel/func whose body contains `node`."""
        fn = self.enclosing(node, (ast.FunctionDef,))
        while fn is not None:
            for k in self.kernels:
                if k.node is fn:
                    return k
            fn = self.enclosing(fn, (ast.FunctionDef,))
        return None

    @cached_property
    def _kernel_nodes(self) -> set[int]:
        return {id(k.node) for k in self.kernels}

    def is_kernel_def(self, fn: ast.AST) -> bool:
        return id(fn) in self._kernel_nodes

    @cached_property
    def tape_names(self) -> set[str]:
        """Keys assigned a `wp.Tape()` anywhere in this module (`tape`, `self.tape`)."""
        out = set()
        for node in self.nodes:
            if isinstance(node, ast.Assign) and self.wp_call(node.value, {"Tape"}):
                for t in node.targets:
                    if (k := array_key(t)) is not None:
                        out.add(k)
        return out

    def is_tape_expr(self, node: ast.AST) -> bool:
        if self.wp_call(node, {"Tape"}):
            return True
        key = array_key(node)
        if key is None:
            return False
        return key in self.tape_names or "tape" in key.rsplit(".", 1)[-1].lower()

    @cached_property
    def tape_withs(self) -> list[ast.With]:
        return [
            n
            for n in self.nodes
            if isinstance(n, ast.With) and any(self.is_tape_expr(item.context_expr) for item in n.items)
        ]

    @cached_property
    def launches(self) -> list[ast.Call]:
        return [
            n
            for n in self.calls
            if self.wp_call(n, {"launch", "launch_tiled"})
            and not self.is_kernel_def(self.host_function(n) or self.tree)
        ]

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""


@dataclass
class Access:
    """One array argument of a launch: which key, whether the kernel reads/writes it, and through what."""

    expr: ast.expr
    key: str
    reads: bool
    stores: bool
    accums: bool
    via_struct: bool = False
    suffix: str = ""
    """Struct field path below the argument (`.arr` for a kernel that touches `s.arr`)."""


class Project:
    """All parsed files of the workspace the rules run on, with cross-file indexes."""

    def __init__(self, modules: list[SourceModule]):
        self.modules = modules
        self.memo: dict[str, object] = {}
        """Per-project results rules share or reuse across modules (keyed by the rule's own name)."""

    def shared(self, key: str, build: Callable[[Project], T]) -> T:
        """`build(self)`, computed once per project and kept in `memo` under `key` (several rules read it)."""
        if key not in self.memo:
            self.memo[key] = build(self)
        return cast(T, self.memo[key])

    @cached_property
    def call_sites(self) -> dict[int, list[tuple[SourceModule, ast.Call]]]:
        """id(host function) -> the calls in the project that may run it."""
        out: dict[int, list[tuple[SourceModule, ast.Call]]] = {}
        for m in self.modules:
            for node in m.nodes:
                if isinstance(node, ast.Call):
                    for _, fn in self.resolve_call(m, node):
                        out.setdefault(id(fn), []).append((m, node))
        return out

    @cached_property
    def kernels(self) -> dict[str, list[KernelInfo]]:
        out: dict[str, list[KernelInfo]] = {}
        for m in self.modules:
            for k in m.kernels:
                out.setdefault(k.name, []).append(k)
        return out

    def kernel(self, name: str | None, module: SourceModule | None = None) -> KernelInfo | None:
        cands = self.kernels.get(name or "", [])
        if module is not None:
            local = [k for k in cands if k.module is module]
            if local:
                return local[0]
        return cands[0] if cands else None

    @cached_property
    def structs(self) -> set[str]:
        out = set()
        for m in self.modules:
            for node in m.nodes:
                if isinstance(node, ast.ClassDef) and any(m.wp(d) == "struct" for d in node.decorator_list):
                    out.add(node.name)
        return out

    @cached_property
    def host_functions(self) -> dict[str, list[tuple[SourceModule, HostFunction]]]:
        """Name -> plain Python functions/methods defined in the project (kernels excluded)."""
        out: dict[str, list[tuple[SourceModule, HostFunction]]] = {}
        for m in self.modules:
            for node in m.nodes:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not m.is_kernel_def(node):
                    out.setdefault(node.name, []).append((m, node))
        return out

    def resolve_call(
        self, module: SourceModule, call: ast.Call
    ) -> list[tuple[SourceModule, HostFunction]]:
        """Project functions a host call may run: `f()`, `self.m()`, `obj.m()`, `mod.f()`."""
        func = call.func
        if isinstance(func, ast.Name):
            cands = self.host_functions.get(func.id, [])
            plain = [(m, f) for m, f in cands if not isinstance(m.parents.get(f), ast.ClassDef)]
            local = [(m, f) for m, f in plain if m is module]
            return local or plain
        if isinstance(func, ast.Attribute):
            if module.wp(func) is not None:
                return []
            cands = [(m, f) for m, f in self.host_functions.get(func.attr, [])]
            methods = [(m, f) for m, f in cands if isinstance(m.parents.get(f), ast.ClassDef)]
            if isinstance(func.value, ast.Name) and func.value.id == "self":
                cls = module.enclosing_class(call)
                same = [(m, f) for m, f in methods if cls is not None and m.parents.get(f) is cls]
                if same:
                    return same
            if isinstance(func.value, ast.Name) and self._is_module_alias(module, func.value.id):
                # `helpers.step(...)`: a module-level function of an imported project module.
                return [
                    (m, f)
                    for m, f in cands
                    if not isinstance(m.parents.get(f), ast.ClassDef)
                    and Path(m.rel).stem == func.value.id.rsplit(".", 1)[-1]
                ]
            owner = self._receiver_class(module, func.value, call)
            if owner == "":
                return []  # an object built by library code (an optimizer, a torch module)
            if owner is not None:
                return [
                    (m, f) for m, f in methods if isinstance(c := m.parents.get(f), ast.ClassDef) and c.name == owner
                ]
            # A method call on some object: every project method of that name is a candidate (callers
            # that need a single target, like the tracer, check the count).
            return methods if len(methods) <= 3 else []
        return []

    @cached_property
    def class_names(self) -> set[str]:
        return {n.name for m in self.modules for n in m.nodes if isinstance(n, ast.ClassDef)}

    def _receiver_class(self, module: SourceModule, recv: ast.expr, at: ast.AST) -> str | None:
        """The project class an object was built from (`sim = Sim()` / `self.sim = Sim()`), "" when it was
        built by a call to something outside the project, None when unknown."""
        key = array_key(recv)
        if key is None or key == "self" or "[" in key:
            return None
        if key.startswith("self."):
            scope: ast.AST | None = module.enclosing_class(at)
        elif "." not in key:
            scope = module.host_function(at) or module.tree
        else:
            return None
        if scope is None:
            return None
        names = self.shared(f"constructed:{id(scope)}", lambda _: _constructors(scope)).get(key)
        if not names:
            return None
        project_classes = [n for n in names if n in self.class_names]
        return project_classes[0] if project_classes else ""

    @cached_property
    def _stems(self) -> set[str]:
        return {Path(m.rel).stem for m in self.modules}

    def _is_module_alias(self, module: SourceModule, name: str) -> bool:
        return name in self.shared(f"module_aliases:{module.rel}", lambda _: self._module_aliases(module))

    def _module_aliases(self, module: SourceModule) -> set[str]:
        """Names under which `module` imports other project modules."""
        aliases: set[str] = set()
        for node in module.nodes:
            if isinstance(node, ast.Import):
                aliases |= {
                    a.asname or a.name.split(".")[0] for a in node.names if a.name.rsplit(".", 1)[-1] in self._stems
                }
            elif isinstance(node, ast.ImportFrom):
                aliases |= {a.asname or a.name for a in node.names if a.name in self._stems}
        return aliases

    @cached_property
    def taped_functions(self) -> set[ast.AST]:
        """Host functions run while a tape records (called, transitively, from a `with tape:` body)."""
        seen: set[ast.AST] = set()
        work: list[tuple[SourceModule, list[ast.AST]]] = [
            (m, list(w.body)) for m in self.modules for w in m.tape_withs
        ]
        # Functions handed to wp.autograd.gradcheck/jacobian run under the tape those utilities open.
        for m in self.modules:
            for node in m.calls:
                name = m.wp_call(node)
                if name and ("gradcheck" in name or "jacobian" in name):
                    for a in node.args[:1] + [kw.value for kw in node.keywords if kw.arg == "function"]:
                        if isinstance(a, (ast.Name, ast.Attribute)):
                            fake = ast.Call(func=a, args=[], keywords=[])
                            m.parents[fake] = node
                            for fm, fn in self.resolve_call(m, fake):
                                if fn not in seen:
                                    seen.add(fn)
                                    work.append((fm, list(fn.body)))
        while work:
            module, nodes = work.pop()
            for stmt in nodes:
                for sub in ast.walk(stmt):
                    if isinstance(sub, ast.Call):
                        for m, fn in self.resolve_call(module, sub):
                            if fn not in seen:
                                seen.add(fn)
                                work.append((m, list(fn.body)))
        return seen

    @cached_property
    def taped_launches(self) -> list[tuple[SourceModule, ast.Call]]:
        """Forward launches that run while a tape records (not `record_tape=False`, not manual adjoints)."""
        return [
            (m, c)
            for m in self.modules
            for c in m.launches
            if self.in_tape(m, c)
            and not is_const(kwarg(c, "record_tape") or ast.Constant(True), False)
            and not is_const(kwarg(c, "adjoint") or ast.Constant(False), True)
        ]

    def in_tape(self, module: SourceModule, node: ast.AST) -> bool:
        """True when `node` runs while a tape records (lexically in `with tape:` or in a taped function)."""
        withs = set(map(id, module.tape_withs))
        for anc in module.ancestors(node):
            if isinstance(anc, ast.With) and id(anc) in withs:
                return True
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return anc in self.taped_functions
        return False

    @cached_property
    def differentiable(self) -> bool:
        """Whether the project computes gradients at all (kernel rules are moot otherwise)."""
        return any(self.module_differentiable(m) for m in self.modules)

    @cached_property
    def _differentiable_modules(self) -> set[str]:
        direct = {m.rel for m in self.modules if _GRAD_USE.search(m.text)}
        out = set(direct)
        # Kernels launched on a tape from another file, and modules a gradient-computing file imports.
        for m, call in self.taped_launches:
            k = self.launch_kernel(m, call)
            if k is not None:
                out.add(k.module.rel)
        # Imports are followed transitively from every differentiable file: a `wp.func` in helpers.py that a
        # taped kernel in kernels.py imports is on the gradient path although no file that computes
        # gradients imports helpers.py itself (train.py -> kernels.py -> helpers.py).
        frontier = list(out)
        while frontier:
            rel = frontier.pop()
            user = next((m for m in self.modules if m.rel == rel), None)
            if user is None:
                continue
            imported = set()
            for node in user.nodes:
                if isinstance(node, ast.Import):
                    imported |= {part for a in node.names for part in a.name.split(".")}
                elif isinstance(node, ast.ImportFrom):
                    imported |= set((node.module or "").split(".")) | {a.name for a in node.names}
            new = {m.rel for m in self.modules if Path(m.rel).stem in imported and m is not user} - out
            out |= new
            frontier.extend(new)
        return out

    def module_differentiable(self, module: SourceModule) -> bool:
        """Whether gradients can flow through this file's kernels: it computes gradients itself, its kernels
        are launched on a tape, or a file that computes gradients imports it."""
        return module.rel in self._differentiable_modules

    @cached_property
    def _kernel_taped(self) -> dict[int, bool]:
        status: dict[int, bool] = {}
        for m in self.modules:
            for call in m.launches:
                k = self.launch_kernel(m, call)
                if k is not None:
                    taped = self.in_tape(m, call) and not is_const(
                        kwarg(call, "record_tape") or ast.Constant(1), False
                    )
                    status[id(k)] = status.get(id(k), False) or taped
        return status

    def kernel_on_tape(self, kernel: KernelInfo) -> bool:
        """False only when every launch of the kernel the project shows runs outside any tape."""
        return self._kernel_taped.get(id(kernel), True)

    def launch_kernel(self, module: SourceModule, call: ast.Call) -> KernelInfo | None:
        kexpr = arg(call, 0, "kernel")
        name = (dotted(kexpr) or "").rsplit(".", 1)[-1] if kexpr is not None else None
        return self.kernel(name, module)

    def launch_accesses(self, module: SourceModule, call: ast.Call) -> list[Access] | None:
        """Arrays a `wp.launch` passes, with read/write roles from the kernel's own body.

        Returns None when the argument lists are not literal lists (built elsewhere).
        """
        inputs, outputs = arg(call, 2, "inputs"), arg(call, 3, "outputs")
        lists: list[list[ast.expr]] = []
        for lst in (inputs, outputs):
            if lst is None:
                lists.append([])
            elif isinstance(lst, (ast.List, ast.Tuple)) and not any(
                isinstance(e, ast.Starred) for e in lst.elts
            ):
                lists.append(list(lst.elts))
            else:
                return None
        kernel = self.launch_kernel(module, call)
        params = kernel.params if kernel is not None else []
        out = []
        for i, expr in enumerate(lists[0] + lists[1]):
            key = array_key(expr)
            if key is None:
                continue
            is_output = i >= len(lists[0])
            if kernel is None or i >= len(params):
                out.append(Access(expr, key, reads=not is_output, stores=is_output, accums=False))
                continue
            p = params[i]
            reads, stores, accums = p in kernel.reads, p in kernel.stores or is_output, p in kernel.accums
            if stores and accums and p not in kernel.stores:
                stores = False
            out.append(Access(expr, key, reads, stores, accums))
            for path in sorted(kernel.reads | kernel.writes):
                if path.startswith(p + "."):
                    out.append(
                        Access(
                            expr,
                            key + path[len(p) :],
                            path in kernel.reads,
                            path in kernel.stores,
                            path in kernel.accums,
                            via_struct=True,
                            suffix=path[len(p) :],
                        )
                    )
        return out


def _constructors(scope: ast.AST) -> dict[str, list[str]]:
    """Key -> names of the callables whose result is assigned to it in `scope`."""
    table: dict[str, list[str]] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            name = (dotted(node.value.func) or "").rsplit(".", 1)[-1]
            for t in node.targets:
                if (k := array_key(t)) is not None:
                    table.setdefault(k, []).append(name)
    return table


def analyze_kernel(info: KernelInfo, project: Project, stack: tuple[str, ...] = ()) -> None:
    """Fill `reads`/`stores`/`accums` with the parameter paths the body touches (through wp.func calls too)."""
    params = set(info.params)
    module = info.module

    def rooted(path: str | None) -> str | None:
        if path is None:
            return None
        return path if path.split(".", 1)[0] in params else None

    for node in ast.walk(info.node):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if (
                        (isinstance(sub, ast.Subscript)
                        and isinstance(sub.ctx, ast.Store))
                        or (
                            isinstance(sub, ast.Attribute)
                            and isinstance(sub.value, ast.Subscript)
                            and isinstance(sub.ctx, ast.Store)
                        )
                    ):
                        p = rooted(path_of(sub))
                        if p is None:
                            continue
                        if isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
                            info.accums.add(p)
                        else:
                            info.stores.add(p)
                            if isinstance(node, ast.AugAssign):
                                info.reads.add(p)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            p = rooted(path_of(node.value))
            if p is not None:
                info.reads.add(p)
        elif isinstance(node, ast.Call):
            name = module.wp_call(node)
            if name is not None and name.rsplit(".", 1)[-1] in ATOMICS and node.args:
                p = rooted(path_of(node.args[0]))
                if p is not None:
                    info.accums.add(p)
                continue
            if name is not None and name.endswith("tile_store") and node.args:
                p = rooted(path_of(node.args[0]))
                if p is not None:
                    info.stores.add(p)
                continue
            callee = None
            if name is None and isinstance(node.func, ast.Name):
                callee = project.kernel(node.func.id, module)
            for i, a in enumerate(node.args):
                p = rooted(path_of(a)) if isinstance(a, (ast.Name, ast.Attribute)) else None
                if p is None:
                    continue
                if callee is not None and callee.name not in stack and i < len(callee.params):
                    if not callee.reads and not callee.writes:
                        analyze_kernel(callee, project, (*stack, info.name))
                    cp = callee.params[i]
                    for src, dst in (
                        (callee.reads, info.reads),
                        (callee.stores, info.stores),
                        (callee.accums, info.accums),
                    ):
                        for q in src:
                            if q == cp or q.startswith(cp + "."):
                                dst.add(p + q[len(cp) :])
                elif (name is None or name.rsplit(".", 1)[-1] not in {"len", "tid"}) and not (
                    isinstance(node.func, ast.Name) and node.func.id == "len"
                ):
                    info.reads.add(p)


def parse_module(path: Path, root: Path) -> SourceModule:
    """Parse one file (raises SyntaxError/UnicodeDecodeError/OSError for the caller to report)."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = path.as_posix()
    if rel == ".":  # the root is the file itself
        rel = path.name
    return SourceModule(path, rel, text, tree)


def build_project(modules: list[SourceModule]) -> Project:
    project = Project(modules)
    for infos in project.kernels.values():
        for info in infos:
            if not (info.reads or info.writes):
                analyze_kernel(info, project)
    return project
