"""Abstract execution of the host code around each tape scope, to find write-after-read hazards.

The tracer walks the function that opens a `with tape:` block from its first statement, following calls
into project functions, and keeps a map from names (`state_in`, `self.s0`, `s.field`) to the array
objects they currently denote. Inside the tape it records which object each launch / `wp.copy` /
`assign` / `zero_` reads and writes. A write to an object that a recorded operation already read is a
hazard: backward replays the earlier reader with the overwritten values. Loops are walked twice so that
loop-carried rebinding (ping-pong buffers) shows up; keys indexed by the loop variable are kept apart
between the two passes (`states[t]` is a different element each iteration).

It is deliberately conservative: anything it cannot follow (third-party helpers, arrays built from
arbitrary calls) becomes a fresh object, which can hide a hazard but never invents one.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field

from .source import (
    ALLOCATORS,
    HOST_WRITES,
    LIKE_ALLOCATORS,
    HostFunction,
    Project,
    SourceModule,
    names_in,
)

Canon = tuple[str, ...]


@dataclass(frozen=True)
class Binding:
    canon: Canon
    rebind: tuple[SourceModule, ast.stmt] | None = None
    """The assignment inside a taped loop that made this name point at another buffer."""
    struct_field: bool = False


@dataclass
class Event:
    module: SourceModule
    node: ast.Call
    """The launch or host call (`wp.copy`, `.assign`, `.zero_()`) that reads or writes."""
    canon: Canon
    surface: str
    kind: str
    """"launch", "copy", "assign" or "host" (zero_/fill_)."""
    via_struct: bool
    rebind: tuple[SourceModule, ast.stmt] | None
    store: bool = False


@dataclass
class Hazard:
    read: Event
    write: Event


@dataclass
class Frame:
    module: SourceModule
    locals: dict[str, Binding] = field(default_factory=dict)
    iter_tag: dict[str, int] = field(default_factory=dict)
    taped_loops: int = 0
    ret: Binding | None = None
    func: ast.AST | None = None


@dataclass
class TraceResult:
    hazards: list[Hazard] = field(default_factory=list)
    swaps: list[tuple[SourceModule, ast.Assign]] = field(default_factory=list)
    """Tuple swaps of buffers inside a loop that runs while a tape records."""
    stores: dict[Canon, list[Event]] = field(default_factory=dict)


class _OutOfBudget(Exception):
    """A root's abstract execution grew too large (deep call chains in nested loops): give up on it."""


class Tracer:
    MAX_DEPTH = 6
    BUDGET = 5_000
    """Statements one root may execute (loops run twice, calls are inlined: this keeps it linear-ish)."""
    TOTAL_BUDGET = 300_000
    """Statements for the whole project; a user's program needs a small fraction of either."""

    def __init__(self, project: Project):
        self.project = project
        self.result = TraceResult()
        self.heap: dict[Canon, Binding] = {}
        self.struct_objs: set[Canon] = set()
        self.reads: dict[Canon, Event] = {}
        self.recording = 0
        self.stack: list[ast.AST] = []
        self.fresh = itertools.count()
        self._seen_hazards: set[tuple[int, int]] = set()
        self.budget = self.BUDGET
        self.total = self.TOTAL_BUDGET

    # --- names -> objects -------------------------------------------------------------------------
    def parts(self, expr: ast.AST, frame: Frame) -> list[str] | None:
        if isinstance(expr, ast.Name):
            return [expr.id]
        if isinstance(expr, ast.Attribute):
            base = self.parts(expr.value, frame)
            return [*base, "." + expr.attr] if base else None
        if isinstance(expr, ast.Subscript):
            base = self.parts(expr.value, frame)
            if not base:
                return None
            tags = sorted(v for v in names_in(expr.slice) if v in frame.iter_tag)
            suffix = "@" + ",".join(f"{v}={frame.iter_tag[v]}" for v in tags) if tags else ""
            return [*base, f"[{ast.unparse(expr.slice)}{suffix}]"]
        return None

    def resolve_parts(self, parts: list[str], frame: Frame) -> tuple[Binding, bool]:
        """The object `parts` denotes now, and whether it was reached through a struct field."""
        b = frame.locals.get(parts[0])
        canon: Canon = b.canon if b else (f"{frame.module.rel}:{parts[0]}",)
        rebind = b.rebind if b else None
        via_struct = b.struct_field if b else False
        for p in parts[1:]:
            if canon in self.struct_objs and p.startswith("."):
                via_struct = True
            canon = (*canon, p)
            h = self.heap.get(canon)
            if h is not None:
                canon, rebind = h.canon, h.rebind or rebind
                via_struct = via_struct or h.struct_field
        return Binding(canon, rebind), via_struct

    def resolve(self, expr: ast.AST, frame: Frame) -> tuple[Binding, bool] | None:
        parts = self.parts(expr, frame)
        return self.resolve_parts(parts, frame) if parts else None

    def new_object(self, tag: str) -> Binding:
        return Binding((f"<{tag}#{next(self.fresh)}>",))

    def bind(self, target: ast.AST, value: Binding, frame: Frame, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
            return
        parts = self.parts(target, frame)
        if not parts or len(parts) < 2:
            return
        prefix, _ = self.resolve_parts(parts[:-1], frame)
        key = (*prefix.canon, parts[-1])
        for k in [k for k in self.heap if k[: len(key)] == key and len(k) > len(key)]:
            del self.heap[k]
        self.heap[key] = Binding(value.canon, value.rebind, struct_field=prefix.canon in self.struct_objs)

    # --- statements -------------------------------------------------------------------------------
    def run(self, stmts: list[ast.stmt], frame: Frame) -> None:
        for stmt in stmts:
            self.stmt(stmt, frame)

    def stmt(self, stmt: ast.stmt, frame: Frame) -> None:
        self.budget -= 1
        self.total -= 1
        if self.budget < 0 or self.total < 0:
            raise _OutOfBudget
        if isinstance(stmt, ast.Assign):
            self.assign(stmt, frame)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
            if stmt.value is not None:
                value = self.eval(stmt.value, frame)
                if isinstance(stmt, ast.AnnAssign) and value is not None:
                    self.bind(stmt.target, value, frame, stmt)
        elif isinstance(stmt, ast.Expr):
            self.eval(stmt.value, frame)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                frame.ret = self.eval(stmt.value, frame)
        elif isinstance(stmt, ast.If):
            self.eval(stmt.test, frame)
            before = dict(self.reads)
            self.run(stmt.body, frame)
            after_body = self.reads
            self.reads = dict(before)
            self.run(stmt.orelse, frame)
            self.reads = {**after_body, **self.reads}
        elif isinstance(stmt, (ast.For, ast.While)):
            self.loop(stmt, frame)
        elif isinstance(stmt, ast.With):
            self.with_(stmt, frame)
        elif isinstance(stmt, ast.Try):
            self.run(stmt.body, frame)
            for h in stmt.handlers:
                self.run(h.body, frame)
            self.run(stmt.orelse, frame)
            self.run(stmt.finalbody, frame)

    def assign(self, stmt: ast.Assign, frame: Frame) -> None:
        in_taped_loop = bool(self.recording) and frame.taped_loops > 0
        if (
            len(stmt.targets) == 1
            and isinstance(stmt.targets[0], (ast.Tuple, ast.List))
            and isinstance(stmt.value, (ast.Tuple, ast.List))
            and len(stmt.targets[0].elts) == len(stmt.value.elts)
        ):
            values = [self.eval(v, frame) for v in stmt.value.elts]
            targets = stmt.targets[0].elts
            if in_taped_loop and self._is_swap(targets, stmt.value.elts):
                self.result.swaps.append((frame.module, stmt))
            for t, v, src in zip(targets, values, stmt.value.elts):
                if v is not None:
                    self.bind(t, self._mark(v, src, in_taped_loop, frame, stmt), frame, stmt)
            return
        value = self.eval(stmt.value, frame)
        if value is None:
            return
        value = self._mark(value, stmt.value, in_taped_loop, frame, stmt)
        for t in stmt.targets:
            self.bind(t, value, frame, stmt)

    @staticmethod
    def _is_swap(targets: list[ast.expr], values: list[ast.expr]) -> bool:
        tk = [ast.unparse(t) for t in targets]
        vk = [ast.unparse(v) for v in values]
        return len(tk) >= 2 and sorted(tk) == sorted(vk) and tk != vk

    def _mark(
        self, value: Binding, src: ast.expr, in_taped_loop: bool, frame: Frame, stmt: ast.stmt
    ) -> Binding:
        # Rebinding a name to an existing buffer inside a taped loop is what makes buffers ping-pong.
        if in_taped_loop and isinstance(src, (ast.Name, ast.Attribute, ast.Subscript)):
            return Binding(value.canon, (frame.module, stmt), value.struct_field)
        return value

    def loop(self, stmt: ast.For | ast.While, frame: Frame) -> None:
        loop_vars: set[str] = set()
        if isinstance(stmt, ast.For):
            self.eval(stmt.iter, frame)
            loop_vars = names_in(stmt.target)
            # Names computed from the loop variable (`nxt = t + 1`) index a different element each pass too.
            changed = True
            while changed:
                changed = False
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Assign) and names_in(node.value) & loop_vars:
                        new = {
                            n for t in node.targets for n in names_in(t) if isinstance(t, ast.Name)
                        } - loop_vars
                        if new:
                            loop_vars |= new
                            changed = True
        if self.recording:
            frame.taped_loops += 1
        saved = dict(frame.iter_tag)
        for p in (1, 2):
            for v in loop_vars:
                frame.iter_tag[v] = p
            if isinstance(stmt, ast.For):
                it = self.resolve(stmt.iter, frame)
                if isinstance(stmt.target, ast.Name):
                    base = it[0].canon if it else self.new_object("iter").canon
                    frame.locals[stmt.target.id] = Binding((*base, f"[it{p}]"))
            self.run(stmt.body, frame)
        frame.iter_tag = saved
        if self.recording:
            frame.taped_loops -= 1
        self.run(stmt.orelse, frame)

    def with_(self, stmt: ast.With, frame: Frame) -> None:
        module = frame.module
        taped = any(module.is_tape_expr(item.context_expr) for item in stmt.items)
        for item in stmt.items:
            if module.wp_call(item.context_expr, {"Tape"}):
                self.reads = {}
            if item.optional_vars is not None:
                self.bind(item.optional_vars, self.new_object("ctx"), frame, stmt)
        if taped:
            self.recording += 1
            saved_loops, frame.taped_loops = frame.taped_loops, 0
            self.run(stmt.body, frame)
            frame.taped_loops = saved_loops
            self.recording -= 1
        else:
            self.run(stmt.body, frame)

    # --- expressions ------------------------------------------------------------------------------
    def eval(self, expr: ast.expr, frame: Frame) -> Binding | None:
        if isinstance(expr, ast.Call):
            return self.call(expr, frame)
        if isinstance(expr, (ast.Name, ast.Attribute, ast.Subscript)):
            for node in ast.walk(expr):
                if isinstance(node, ast.Call):
                    self.call(node, frame)
            r = self.resolve(expr, frame)
            return r[0] if r else None
        if isinstance(expr, (ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
            return self.new_object("value")
        for node in ast.iter_child_nodes(expr):
            if isinstance(node, ast.expr):
                self.eval(node, frame)
        return self.new_object("value")

    def call(self, call: ast.Call, frame: Frame) -> Binding | None:
        module = frame.module
        for a in call.args:
            self.eval(a.value if isinstance(a, ast.Starred) else a, frame)
        for kw in call.keywords:
            self.eval(kw.value, frame)
        name = module.wp_call(call)
        if name is not None:
            short = name.rsplit(".", 1)[-1]
            if short in ("launch", "launch_tiled"):
                if self.recording:
                    self.launch(call, frame)
                return None
            if short == "copy" and self.recording and len(call.args) >= 2:
                self.host_op(call, call.args[0], call.args[1], "copy", frame)
                return None
            if short == "Tape":
                self.reads = {}
                return self.new_object("tape")
            if short in ALLOCATORS or short in LIKE_ALLOCATORS:
                return self.new_object(f"alloc:{module.rel}:{call.lineno}")
            return self.new_object("value")
        func = call.func
        if isinstance(func, ast.Attribute) and self.recording:
            if func.attr == "assign" and call.args:
                self.host_op(call, func.value, call.args[0], "assign", frame)
                return None
            if func.attr in HOST_WRITES:
                self.host_op(call, func.value, None, "host", frame)
                return None
        if isinstance(func, ast.Attribute) and func.attr == "reset" and module.is_tape_expr(func.value):
            self.reads = {}
            return None
        if isinstance(func, ast.Name) and func.id in self.project.structs:
            obj = self.new_object(f"struct:{func.id}")
            self.struct_objs.add(obj.canon)
            return obj
        targets = self.project.resolve_call(module, call)
        if len(targets) == 1 and targets[0][1] not in self.stack and len(self.stack) < self.MAX_DEPTH:
            return self.inline(call, targets[0][0], targets[0][1], frame)
        return self.new_object("value")

    def inline(
        self, call: ast.Call, module: SourceModule, fn: HostFunction, frame: Frame
    ) -> Binding | None:
        inner = Frame(module, func=fn)
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        args = list(call.args)
        if params and params[0] in ("self", "cls"):
            recv = self.resolve(call.func.value, frame) if isinstance(call.func, ast.Attribute) else None
            inner.locals[params[0]] = recv[0] if recv else self.new_object("self")
            params = params[1:]
        for p, a in zip(params, args):
            if isinstance(a, ast.Starred):
                break
            r = self.resolve(a, frame)
            inner.locals[p] = r[0] if r else self.new_object("arg")
        for kw in call.keywords:
            if kw.arg in params:
                r = self.resolve(kw.value, frame)
                inner.locals[kw.arg] = r[0] if r else self.new_object("arg")
        self.stack.append(fn)
        try:
            self.run(fn.body, inner)
        finally:
            self.stack.pop()
        return inner.ret or self.new_object("value")

    # --- recorded operations ----------------------------------------------------------------------
    def launch(self, call: ast.Call, frame: Frame) -> None:
        accesses = self.project.launch_accesses(frame.module, call)
        if accesses is None:
            return
        events = []
        for acc in accesses:
            parts = self.parts(acc.expr, frame)
            if not parts:
                continue
            if acc.suffix:
                parts = parts + ["." + p for p in acc.suffix.strip(".").split(".")]
            b, via = self.resolve_parts(parts, frame)
            ev = Event(
                frame.module,
                call,
                b.canon,
                acc.key,
                "launch",
                via or acc.via_struct,
                b.rebind,
                store=acc.stores,
            )
            events.append((acc, ev))
        for acc, ev in events:
            if acc.reads:
                self.reads.setdefault(ev.canon, ev)
        for acc, ev in events:
            if acc.stores or acc.accums:
                self.write(ev)

    def host_op(self, call: ast.Call, dest: ast.AST, src: ast.AST | None, kind: str, frame: Frame) -> None:
        if src is not None:
            r = self.resolve(src, frame)
            if r:
                self.reads.setdefault(
                    r[0].canon,
                    Event(frame.module, call, r[0].canon, ast.unparse(src), kind, r[1], r[0].rebind),
                )
        r = self.resolve(dest, frame)
        if r:
            self.write(
                Event(frame.module, call, r[0].canon, ast.unparse(dest), kind, r[1], r[0].rebind, store=True)
            )

    def write(self, ev: Event) -> None:
        if ev.store:
            self.result.stores.setdefault(ev.canon, []).append(ev)
        read = self.reads.get(ev.canon)
        if read is None or ev.canon[-1].endswith(".grad"):
            return
        key = (id(read.node), id(ev.node))
        if key not in self._seen_hazards:
            self._seen_hazards.add(key)
            self.result.hazards.append(Hazard(read, ev))


def trace_project(project: Project) -> TraceResult:
    """Run the tracer from every function (or module body) that opens a tape scope."""
    tracer = Tracer(project)
    for module in project.modules:
        roots: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Module] = []
        for w in module.tape_withs:
            fn: ast.FunctionDef | ast.AsyncFunctionDef | None = None
            for anc in module.ancestors(w):
                if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    fn = anc  # keep climbing: the outermost function is the root
            root = fn or module.tree
            if root not in roots:
                roots.append(root)
        for root in roots:
            # Each root is analysed on its own: names bound by one entry point say nothing about another.
            tracer.reads, tracer.recording, tracer.heap, tracer.struct_objs = {}, 0, {}, set()
            tracer.stack = [root] if root is not module.tree else []
            frame = Frame(module, func=root)
            tracer.budget = Tracer.BUDGET
            try:
                tracer.run(root.body, frame)
            except _OutOfBudget:
                continue  # what was recorded before the cut is still sound
    return tracer.result


def project_trace(project: Project) -> TraceResult:
    """Write-after-read hazards and buffer swaps inside the project's tape scopes, traced once per project."""
    return project.shared("host_trace.result", trace_project)
