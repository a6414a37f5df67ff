"""Which arguments a Warp kernel reads and writes, from its source alone (pure `ast`, no Warp import).

Warp's overwrite tracker records argument access while it generates code, and it is blind in three
places that corrupt gradients in practice (warp-facts §2.6): a read that only happens inside the left
operand of a binary operator (`y[i] = x[i] * 2.0`), in-place `*=`/`/=` (treated as a pure write), and
arrays held in `wp.struct` fields. This analysis sees all three and marks each access the tracker
cannot see with `tracker_blind`.

Access kinds:

* `read`: an element load (`a[i]`, `s.x[i]`, `a[i].y`), or the array passed to a builtin that reads it;
* `write`: a plain element store (`a[i] = v`, `a[i].x = v`);
* `accumulate`: `a[i] += v` / `-=` (Warp lowers these to atomics) and `wp.atomic_*(a, ...)`;
* `inplace`: any other augmented assignment on an element (`*=`, `/=`, ...): a read *and* a write
  whose adjoint replays the new value, so the gradient of the multiplier is wrong (§3.1);
* `unknown`: the array is passed to a call that cannot be resolved; counted as a read and a write.

Calls into `@wp.func` helpers are followed when a resolver can return their source (by default, any
function defined in the same file); accesses made inside the helper are attributed to the caller's
argument at the call line.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

AccessKind = Literal["read", "write", "accumulate", "inplace", "unknown"]

ATOMICS = {"atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_cas", "atomic_exch", "atomic_and",
           "atomic_or", "atomic_xor", "tile_atomic_add"}
STORES = {"tile_store", "array_store", "store"}
# Attributes of an array that are metadata, not element data.
META_ATTRS = {"shape", "size", "ndim", "strides", "dtype", "ptr", "device", "capacity"}
ARRAY_ANNOTATIONS = ("array", "indexedarray", "fabricarray", "indexedfabricarray")
MAX_CALL_DEPTH = 6

Resolver = Callable[[str], str | None]
"""Maps a called name (`helper` or `mod.helper`) to the source of the function it names, or None."""


class Access(BaseModel):
    """One access to an argument (or a field of a struct argument)."""

    kind: AccessKind
    line: int = Field(description="Line in the analysed source (1-based, offset by `first_line`).")
    field: str | None = Field(None, description="Struct field path (`x`, `a.b`) for arrays held in a struct argument.")
    detail: str = Field("", description="How: the operator, the builtin or helper called.")
    tracker_blind: bool = Field(False, description="Warp's overwrite tracker does not record this access.")
    lhs_operand: bool = Field(False, description="A read inside the left operand of a binary operator (`x[i] + 1.0`), "
                              "the form Warp's tracker deliberately exempts so `x[i] = x[i] + c` is not flagged.")


class ArgAccess(BaseModel):
    """All accesses to one kernel argument, in source order."""

    name: str
    index: int
    annotation: str | None = None
    is_array: bool | None = Field(None, description="From the annotation: True for arrays, False for scalars/vectors, "
                                                    "None when unknown (a struct or an alias).")
    accesses: list[Access] = []

    def of(self, field: str | None = None) -> list[Access]:
        """Accesses to the argument itself (`field=None`) or to one of its struct fields."""
        return [a for a in self.accesses if a.field == field]

    def fields(self) -> list[str | None]:
        seen: list[str | None] = []
        for a in self.accesses:
            if a.field not in seen:
                seen.append(a.field)
        return seen


class KernelAccess(BaseModel):
    """Read/write summary of one kernel."""

    name: str
    line: int = Field(description="Line of the `def`.")
    args: list[ArgAccess]
    unresolved_calls: list[str] = Field(default_factory=list, description="Calls that received an array and could not "
                                        "be followed (counted as read and write).")

    def arg(self, name: str) -> ArgAccess | None:
        return next((a for a in self.args if a.name == name), None)

    def summary(self, name: str, field: str | None = None) -> AccessSummary:
        """Read/write flags of one argument or struct field."""
        a = self.arg(name)
        return summarize([] if a is None else a.of(field))


class AccessSummary(BaseModel):
    """What a kernel does to one array (an argument or a struct field)."""

    read: bool = False
    written: bool = False
    accumulate_only: bool = Field(False, description="Every write is `+=`/`-=`/atomic (no plain store).")
    inplace: bool = Field(False, description="Has `*=`/`/=`-style element updates (not differentiable in Warp).")
    write_after_read: bool = Field(False, description="A write follows a read of the same array in source order "
                                                      "(an in-kernel overwrite).")
    tracker_sees_read: bool = Field(False, description="At least one read is visible to Warp's tracker.")
    value_read: bool = Field(False, description="At least one read outside a binary operator's left operand: a value "
                             "the adjoint may need (`v = a[i]`, `wp.sin(a[i])`, `2.0 * a[i]`).")
    read_lines: list[int] = []
    write_lines: list[int] = []
    conservative: bool = Field(False, description="Includes an unresolved call (assumed read and write).")


def summarize(accesses: list[Access]) -> AccessSummary:
    """Fold a list of accesses into read/write flags."""
    s = AccessSummary()
    seen_read = False
    for a in accesses:
        reads = a.kind in ("read", "inplace", "unknown")
        writes = a.kind in ("write", "accumulate", "inplace", "unknown")
        if writes and seen_read:
            s.write_after_read = True
        if reads:
            seen_read = True
            s.read = True
            s.read_lines.append(a.line)
            if not a.tracker_blind and a.kind != "inplace":
                s.tracker_sees_read = True
            if not a.lhs_operand:
                s.value_read = True
        if writes:
            s.written = True
            s.write_lines.append(a.line)
        s.inplace |= a.kind == "inplace"
        s.conservative |= a.kind == "unknown"
    stores = [a for a in accesses if a.kind in ("write", "accumulate", "inplace", "unknown")]
    s.accumulate_only = bool(stores) and all(a.kind == "accumulate" for a in stores)
    # A write inside a loop may precede a read that comes earlier in the source: source order is an
    # approximation that errs towards reporting.
    return s


# ------------------------------------------------------------------------------------------------ analysis
Ref = tuple[str, str | None]  # (argument name, struct field path)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _is_array_annotation(ann: ast.expr | None) -> bool | None:
    if ann is None:
        return None
    if isinstance(ann, ast.Call):
        name = _dotted(ann.func) or ""
        return name.split(".")[-1] in ARRAY_ANNOTATIONS
    name = _dotted(ann) or ""
    last = name.split(".")[-1]
    if last in ARRAY_ANNOTATIONS:
        return True
    if last in ("float", "int", "bool", "float16", "float32", "float64", "int32", "int64", "uint32", "uint64", "int8",
                "uint8", "int16", "uint16") or last.startswith(("vec", "mat", "quat", "transform", "spatial")):
        return False
    return None


class _Analyzer:
    def __init__(self, params: list[str], resolver: Resolver | None, line_offset: int, depth: int,
                 call_line: int | None = None, call_detail: str = "") -> None:
        self.params = set(params)
        self.env: dict[str, Ref | None] = {}
        self.resolver = resolver
        self.line_offset = line_offset
        self.depth = depth
        self.call_line = call_line
        self.call_detail = call_detail
        self.out: list[tuple[str, Access]] = []
        self.unresolved: list[str] = []

    # -- references to arguments
    def ref(self, node: ast.expr) -> Ref | None:
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            return (node.id, None) if node.id in self.params else None
        if isinstance(node, ast.Attribute):
            if node.attr in META_ATTRS:
                return None
            base = self.ref(node.value)
            if base is None:
                return None
            return base[0], f"{base[1]}.{node.attr}" if base[1] else node.attr
        return None

    def element_base(self, node: ast.expr) -> tuple[Ref | None, list[ast.expr]]:
        """For `a[i]`, `a[i][j]`, `a[i].x`, `s.x[i]`: the array reference and the index expressions."""
        indices: list[ast.expr] = []
        cur = node
        while True:
            if isinstance(cur, ast.Subscript):
                indices.append(cur.slice)
                r = self.ref(cur.value)
                if r is not None:
                    return r, indices
                cur = cur.value
            elif isinstance(cur, ast.Attribute):
                cur = cur.value  # a component of an element (`a[i].x`)
            else:
                return None, indices

    def add(self, ref: Ref, kind: AccessKind, node: ast.AST, detail: str = "", blind: bool = False) -> None:
        line = self.call_line if self.call_line is not None else getattr(node, "lineno", 0) + self.line_offset
        if self.call_detail:
            detail = f"{detail} {self.call_detail}".strip()
        # The tracker skips struct arguments entirely (§2.6).
        lhs = blind and kind == "read"
        blind = blind or ref[1] is not None
        self.out.append((ref[0], Access(kind=kind, line=line, field=ref[1], detail=detail, tracker_blind=blind,
                                        lhs_operand=lhs)))

    # -- statements
    def body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            value = s.value
            if value is not None:
                self.expr(value)
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                self.store(t, value)
        elif isinstance(s, ast.AugAssign):
            self.expr(s.value)
            ref, idx = self.element_base(s.target)
            for e in idx:
                self.expr(e)
            if ref is not None:
                op = type(s.op).__name__
                if isinstance(s.op, (ast.Add, ast.Sub)):
                    self.add(ref, "accumulate", s, "+=" if isinstance(s.op, ast.Add) else "-=")
                else:
                    sym = {"Mult": "*=", "Div": "/=", "Mod": "%=", "Pow": "**=", "FloorDiv": "//="}.get(op, op)
                    # The tracker records an in-place op as a pure write (§2.6).
                    self.add(ref, "inplace", s, sym, blind=True)
            elif isinstance(s.target, ast.Name):
                self.env[s.target.id] = None
        elif isinstance(s, ast.Expr):
            self.expr(s.value)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.expr(s.iter)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, (ast.While, ast.If)):
            self.expr(s.test)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, ast.With):
            for item in s.items:
                self.expr(item.context_expr)
            self.body(s.body)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        else:
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.expr(child)
                elif isinstance(child, ast.stmt):
                    self.stmt(child)

    def store(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            vals = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            for k, t in enumerate(target.elts):
                self.store(t, vals[k] if vals else None)
            return
        if isinstance(target, ast.Name):
            # `p = s.x` makes p an alias of the struct field; any other value ends an alias.
            self.env[target.id] = self.ref(value) if value is not None else None
            return
        if isinstance(target, ast.Starred):
            self.store(target.value, None)
            return
        ref, idx = self.element_base(target)
        for e in idx:
            self.expr(e)
        if ref is not None:
            self.add(ref, "write", target)
        elif isinstance(target, ast.Attribute):
            self.expr(target.value)

    # -- expressions
    def expr(self, node: ast.expr, blind: bool = False) -> None:
        if isinstance(node, ast.BinOp):
            # Warp saves and restores the read flags around the left operand (§2.6).
            self.expr(node.left, True)
            self.expr(node.right, blind)
            return
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            ref, idx = self.element_base(node)
            if ref is not None:
                self.add(ref, "read", node, blind=blind)
                for e in idx:
                    self.expr(e, blind)
                return
            if isinstance(node, ast.Attribute):
                if self.ref(node) is not None:
                    return  # a bare struct field / array handle: not element data
                self.expr(node.value, blind)
                return
            self.expr(node.value, blind)
            self.expr(node.slice, blind)
            return
        if isinstance(node, ast.Call):
            self.call(node, blind)
            return
        if isinstance(node, ast.Lambda):
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, blind)
            elif isinstance(child, ast.comprehension):
                self.expr(child.iter, blind)
                for cond in child.ifs:
                    self.expr(cond, blind)

    def call(self, node: ast.Call, blind: bool) -> None:
        name = _dotted(node.func) or ""
        last = name.split(".")[-1]
        args = list(node.args) + [k.value for k in node.keywords]
        if last in ATOMICS and node.args:
            ref = self.ref(node.args[0])
            if ref is not None:
                self.add(ref, "accumulate", node, f"wp.{last}")
                for a in args[1:]:
                    self.expr(a, blind)
                return
        if last in STORES and node.args:
            ref = self.ref(node.args[0])
            if ref is not None:
                self.add(ref, "write", node, f"wp.{last}")
                for a in args[1:]:
                    self.expr(a, blind)
                return
        refs = [(a, self.ref(a)) for a in args]
        passed = [(a, r) for a, r in refs if r is not None]
        if not passed:
            for a in args:
                self.expr(a, blind)
            return
        for a, r in refs:
            if r is None:
                self.expr(a, blind)
        if name in ("len", "wp.len", "warp.len"):
            return
        source = self.resolver(name) if self.resolver is not None and not name.startswith(("wp.", "warp.")) else None
        if source is not None and self.depth < MAX_CALL_DEPTH:
            helper = _function_def(source)
            if helper is not None:
                params = [a.arg for a in helper.args.args]
                mapping: dict[str, Ref] = {}
                for k, a in enumerate(node.args):
                    r = self.ref(a)
                    if r is not None and k < len(params):
                        mapping[params[k]] = r
                for kw in node.keywords:
                    r = self.ref(kw.value)
                    if r is not None and kw.arg:
                        mapping[kw.arg] = r
                line = self.call_line if self.call_line is not None else node.lineno + self.line_offset
                sub = _Analyzer(list(mapping), self.resolver, 0, self.depth + 1, call_line=line,
                                call_detail=f"(in {name})" if not self.call_detail else self.call_detail)
                sub.body(helper.body)
                for pname, acc in sub.out:
                    base = mapping[pname]
                    field = ".".join(p for p in (base[1], acc.field) if p) or None
                    acc.field = field
                    acc.tracker_blind = acc.tracker_blind or blind
                    self.out.append((base[0], acc))
                self.unresolved.extend(sub.unresolved)
                return
        for _a, r in passed:
            if name.startswith(("wp.", "warp.")) or name in ("float", "int"):
                self.add(r, "read", node, name, blind=blind)
            else:
                self.add(r, "unknown", node, f"passed to {name or 'a call'}", blind=blind)
                self.unresolved.append(name or ast.unparse(node.func))


def _function_def(source: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)


def analyze_function(fn: ast.FunctionDef, resolver: Resolver | None = None, line_offset: int = 0) -> KernelAccess:
    """Analyse a parsed kernel (or `@wp.func`) definition."""
    params = [a.arg for a in fn.args.args]
    # Scalars and vectors are values, not memory: `v[0]` on a vec3 argument is no array access.
    maybe_arrays = [a.arg for a in fn.args.args if _is_array_annotation(a.annotation) is not False]
    an = _Analyzer(maybe_arrays, resolver, line_offset, 0)
    an.body(fn.body)
    by_name: dict[str, list[Access]] = {p: [] for p in params}
    for pname, acc in an.out:
        by_name.setdefault(pname, []).append(acc)
    args = []
    for k, a in enumerate(fn.args.args):
        ann = ast.unparse(a.annotation) if a.annotation is not None else None
        args.append(ArgAccess(name=a.arg, index=k, annotation=ann, is_array=_is_array_annotation(a.annotation),
                              accesses=by_name.get(a.arg, [])))
    return KernelAccess(name=fn.name, line=fn.lineno + line_offset, args=args,
                        unresolved_calls=sorted(set(an.unresolved)))


def analyze_kernel(source: str, *, name: str | None = None, resolver: Resolver | None = None,
                   first_line: int = 1) -> KernelAccess:
    """Analyse one kernel given its source text (as `kernel.adj.source`, decorator included).

    Args:
        source: The function's source; may be indented (a method or nested definition).
        name: Which function to analyse when the source defines several (default: the first).
        resolver: Returns the source of a called helper by name; None follows no calls.
        first_line: Line number of the source's first line in its file, so reported lines are file lines.

    Raises:
        ValueError: The source does not parse or defines no such function.
    """
    tree = ast.parse(textwrap.dedent(source))
    fns = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and (name is None or n.name == name)]
    if not fns:
        raise ValueError(f"no function {name or ''} in the given source".replace("  ", " "))
    return analyze_function(fns[0], resolver, first_line - 1)


def _decorator_names(fn: ast.FunctionDef) -> list[str]:
    out = []
    for d in fn.decorator_list:
        node = d.func if isinstance(d, ast.Call) else d
        out.append((_dotted(node) or "").split(".")[-1])
    return out


def module_resolver(tree: ast.Module, extra: Resolver | None = None) -> Resolver:
    """A resolver over the top-level functions of one parsed file (then `extra`)."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)
            and not {"func_grad", "func_replay", "kernel"} & set(_decorator_names(n))}

    def resolve(name: str) -> str | None:
        fn = defs.get(name)
        if fn is not None:
            return ast.unparse(fn)
        return extra(name) if extra is not None else None

    return resolve


def analyze_source(source: str) -> dict[str, KernelAccess]:
    """Every `@wp.kernel` in a file's source, by function name (helpers in the same file are followed)."""
    tree = ast.parse(source)
    resolver = module_resolver(tree)
    out = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and "kernel" in _decorator_names(n):
            out[n.name] = analyze_function(n, resolver)
    return out


def analyze_file(path: Path) -> dict[str, KernelAccess]:
    """`analyze_source` of a file on disk."""
    return analyze_source(Path(path).read_text(encoding="utf-8"))
