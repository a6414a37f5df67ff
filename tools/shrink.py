"""Shrink a Warp script to a fast repro: find its size knobs and write a copy with smaller values.

Only values change. The copy is the original source with the chosen integer literals (and, if asked,
the `"cuda..."` device strings) replaced exactly at their source spans found with `ast`; the copy is
re-parsed and its syntax tree must equal the original's with those constants swapped, so a shrink can
never change structure or dataflow. The copy goes next to the original so its imports still resolve.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from .backups import atomic_write, mark_created, require_intact_ledger
from .files import check_writable_new
from .files import read_text_file as _read_text
from .knobs import usage_knobs
from .ledger import Ledger
from .losses import JsonFloat
from .paths import rel_path, resolve_path
from .registry import ToolError, tool

# Category -> pattern over the knob's name tokens; first match wins (substeps before steps).
_CATEGORIES: list[tuple[str, re.Pattern[str]]] = [
    ("substeps", re.compile(r"substeps?|nsubsteps?|substep_count")),
    ("frames", re.compile(r"frames?|nframes|frame_count")),
    ("epochs", re.compile(r"epochs?|nepochs")),
    ("iterations", re.compile(r"iters?|iterations?|niters?|train_iters?|opt_iters?|optim_iters?|max_iters?")),
    ("steps", re.compile(r"steps?|nsteps|timesteps?|horizon|sim_steps?|rollout_len(gth)?|episode_len(gth)?")),
    ("particles", re.compile(r"particles?|nparticles|points?|npoints|bod(y|ies)|nbodies|vert(ex|ices|s)?|envs?|"
                             r"environments?|agents?|samples?|nsamples")),
    ("grid", re.compile(r"res|resolution|grid(_res|_size|_dim)?|dim_[xyz]|n[xyz]|cells?|ncells")),
    ("batch", re.compile(r"batch(_size)?")),
]
# A default small value per category; substeps are kept (fewer substeps can make a sim unstable).
_SUGGEST = {"particles": 16, "count": 16, "steps": 10, "iterations": 3, "frames": 10, "epochs": 2, "grid": 8,
            "batch": 4, "loop": 10}


def knob_category(name: str) -> str | None:
    """The size category of a variable/option name, or None when it does not name a count."""
    n = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.lstrip("-")).lower().replace("-", "_")
    n = n.removeprefix("self.").split(".")[-1]
    core = re.sub(r"^(num|n|number_of|total|max|sim|train|opt|optim)_", "", n)
    core = re.sub(r"_(num|count|n)$", "", core)
    for cat, rx in _CATEGORIES:
        if rx.fullmatch(n) or rx.fullmatch(core):
            return cat
    if n in {"n", "count"} or re.match(r"^(num|n)_[a-z]", n) or n.endswith("_count"):
        return "count"
    return None


class Knob(BaseModel):
    """One integer literal (or device string) that sets the problem size."""

    id: str = Field(description="Key to pass in `values` (the name, or name@line when the name repeats).")
    name: str = Field(description="Variable, attribute, argument or option name.")
    kind: str = Field(description="constant | attribute | function_default | keyword_arg | argparse | loop | device")
    category: str = Field(description="particles, steps, substeps, iterations, frames, epochs, grid, batch, count, "
                                      "loop or device.")
    value: int | str = Field(description="Current value in the source.")
    suggested: int | str = Field(description="A value that usually keeps the symptom while running in seconds.")
    line: int = Field(description="1-based line of the literal.")
    col: int = Field(description="0-based UTF-8 byte column of the literal.")
    end_line: int
    end_col: int


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 2:
        return node.value
    return None


def _cuda_literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"cuda(:\d+)?", node.value):
        return node.value
    return None


class _Found(NamedTuple):
    """A knob candidate: the literal's node (its span) and its value, an int or a device string."""

    name: str
    kind: str
    category: str
    node: ast.Constant
    value: int | str


def _target_name(t: ast.AST) -> str | None:
    if isinstance(t, ast.Name):
        return t.id
    if isinstance(t, ast.Attribute):
        return t.attr
    return None


def find_knobs(source: str) -> list[Knob]:
    """Find the size knobs of a Python source (empty when it does not parse).

    Looks at int literals assigned to names/attributes, function defaults, call keywords and argparse
    `default=`s whose names read like counts (particles, steps, iterations, frames, epochs, substeps,
    grid resolution, batch, `num_*`/`n_*`), literal `range(N)` loop bounds, and `"cuda..."` device strings.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[_Found] = []

    def add(name: str, kind: str, node: ast.AST | None) -> None:
        if not isinstance(node, ast.Constant):
            return
        if (device := _cuda_literal(node)) is not None:
            if "device" in name.lower():
                found.append(_Found(name, kind, "device", node, device))
            return
        if (n := _int_literal(node)) is not None and (cat := knob_category(name)):
            found.append(_Found(name, kind, cat, node, n))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(
                        node.value.elts):
                    for te, ve in zip(t.elts, node.value.elts, strict=True):
                        if (nm := _target_name(te)) is not None:
                            add(nm, "attribute" if isinstance(te, ast.Attribute) else "constant", ve)
                elif (nm := _target_name(t)) is not None:
                    add(nm, "attribute" if isinstance(t, ast.Attribute) else "constant", node.value)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            pos = a.posonlyargs + a.args
            for arg, d in zip(pos[len(pos) - len(a.defaults):], a.defaults, strict=True):
                add(arg.arg, "function_default", d)
            for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):  # None: no default
                add(arg.arg, "function_default", kw_default)
        elif isinstance(node, ast.Call):
            fname = node.func.attr if isinstance(node.func, ast.Attribute) else (
                node.func.id if isinstance(node.func, ast.Name) else "")
            if fname == "add_argument":
                opts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if opts:
                    opt = max(opts, key=len).lstrip("-").replace("-", "_")
                    for kw in node.keywords:
                        if kw.arg == "default":
                            add(opt, "argparse", kw.value)
                continue
            if fname in {"set_device", "ScopedDevice", "get_device"} and node.args:
                add("device", "device", node.args[0])
            for kw in node.keywords:
                if kw.arg:
                    add(kw.arg, "keyword_arg", kw.value)
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) \
                and node.iter.func.id == "range" and 1 <= len(node.iter.args) <= 2:
            stop = node.iter.args[-1]
            if isinstance(stop, ast.Constant) and (n := _int_literal(stop)) is not None:
                found.append(_Found(f"range@{stop.lineno}", "loop", "loop", stop, n))

    # Constants no name reveals (`T = 60`), known by their use (tools/knobs.py).
    found += [_Found(k.name, "constant", k.category, k.node, k.value) for k in usage_knobs(source)
              if all((f.node.lineno, f.node.col_offset) != (k.node.lineno, k.node.col_offset) for f in found)]
    found.sort(key=lambda f: (f.node.lineno, f.node.col_offset))
    counts: dict[str, int] = {}
    for f in found:
        counts[f.name] = counts.get(f.name, 0) + 1
    knobs = []
    for name, kind, cat, node, v in found:
        # Device strings (category "device") are suggested the CPU; counts a smaller value.
        sug: int | str = "cpu" if isinstance(v, str) else min(v, _SUGGEST.get(cat, v))
        knobs.append(Knob(
            id=name if counts[name] == 1 or kind == "loop" else f"{name}@{node.lineno}", name=name, kind=kind,
            category=cat, value=v, suggested=sug, line=node.lineno, col=node.col_offset,
            end_line=node.end_lineno or node.lineno, end_col=node.end_col_offset or node.col_offset,
        ))
    return knobs


def rewrite_values(source: str, changes: list[tuple[Knob, int | str]]) -> str:
    """Replace exactly the literal spans of `changes` in `source`, then prove only those values changed.

    Raises:
        ToolError: The rewritten source does not have the original's syntax tree with those constants
            swapped (it never should; this is the guarantee, checked).
    """
    data = source.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    for k, v in changes:
        a = starts[k.line - 1] + k.col
        b = starts[k.end_line - 1] + k.end_col
        old = data[a:b].decode("utf-8")
        if isinstance(v, str):
            q = old[0] if old[:1] in {"'", '"'} else '"'
            text = f"{q}{v}{q}"
        else:
            text = str(int(v))
        spans.append((a, b, text.encode("utf-8")))
    for a, b, new in sorted(spans, reverse=True):
        data = data[:a] + new + data[b:]
    out = data.decode("utf-8")

    expected = ast.parse(source)
    want = {(k.line, k.col): v for k, v in changes}
    for node in ast.walk(expected):
        if isinstance(node, ast.Constant) and (node.lineno, node.col_offset) in want:
            node.value = want[(node.lineno, node.col_offset)]
    if ast.dump(ast.parse(out)) != ast.dump(expected):
        raise ToolError("internal error: the shrunk copy would differ in structure, not only in values; nothing "
                        "was written")
    return out


class ShrinkArgs(BaseModel):
    script: str = Field(description="Workspace-relative path of the script to shrink.")
    values: dict[str, int] = Field(
        default_factory=dict,
        description="Knob id -> new value (ids from a call without values, or from workspace_overview).")
    use_suggested: bool = Field(False, description="Also apply the suggested value of every knob not in `values`.")
    force_cpu: bool = Field(False, description="Replace literal 'cuda'/'cuda:N' device strings with 'cpu'.")
    output: str | None = Field(None, description="Where to write the copy (default: <name>_shrunk.py next to it).")
    run: bool = Field(False, description="Run the shrunk copy afterwards and report its time and loss trajectory.")
    timeout_s: float = Field(120.0, gt=0, le=1800, description="Wall-clock limit of the run.")


class KnobChange(BaseModel):
    id: str
    line: int
    old: int | str
    new: int | str


class ShrinkResult(BaseModel):
    script: str = Field(description="The original script.")
    knobs: list[Knob] = Field(description="Every size knob found in the script.")
    output: str | None = Field(None, description="The shrunk copy written (None when only listing knobs).")
    changes: list[KnobChange] = Field(default_factory=list, description="Values changed in the copy.")
    device_note: str = Field("", description="What happened to the device choice.")
    run: dict[str, Any] | None = Field(None, description="The run_script result of the copy, when run=true.")
    wall_s: float | None = Field(None, description="Wall time of that run.")
    loss_trajectory: list[JsonFloat] | None = Field(None, description="Losses the run reported, if any.")
    message: str = ""


@tool(args=ShrinkArgs, result=ShrinkResult, read_only=False, long_running=True, forks=True)
def shrink(args: ShrinkArgs, workspace: Path) -> ShrinkResult:
    """Find a script's size knobs (particle counts, steps, iterations, frames, grid res...) and write a shrunk copy.

    Call with no `values` to list the knobs and suggestions. With values, writes a copy next to the
    original (imports still resolve) where only those literals change, optionally forcing CPU, and with
    run=true runs it so you can see whether the symptom survives at the small size.
    """
    src_path = resolve_path(workspace, args.script)
    rel = rel_path(workspace, src_path)
    source = _read_text(src_path, rel)
    knobs = find_knobs(source)
    by_id = {k.id: k for k in knobs}
    unknown = sorted(set(args.values) - set(by_id))
    if unknown:
        raise ToolError(f"unknown knob id(s) {', '.join(unknown)} in {rel}; known: "
                        f"{', '.join(f'{k.id}={k.value}' for k in knobs if k.category != 'device') or 'none'}")
    if devices := sorted(i for i in args.values if by_id[i].category == "device"):
        raise ToolError(f"{', '.join(devices)} choose a device, not a size: use force_cpu=true instead")
    changes: list[tuple[Knob, int | str]] = []
    for k in knobs:
        if k.category == "device":
            if args.force_cpu:
                changes.append((k, "cpu"))
        elif k.id in args.values:
            if args.values[k.id] < 1:
                raise ToolError(f"{k.id}: a size must be at least 1")
            if args.values[k.id] != k.value:
                changes.append((k, args.values[k.id]))
        elif args.use_suggested and k.suggested != k.value:
            changes.append((k, k.suggested))
    has_device = any(k.category == "device" for k in knobs)
    device_note = ("device strings set to 'cpu'" if args.force_cpu and has_device else
                   "no literal device in the script; a run=true run is forced onto the CPU"
                   if args.force_cpu else "")
    if not changes:
        return ShrinkResult(script=rel, knobs=knobs, device_note=device_note,
                            message="knobs listed; pass `values` (knob id -> new value) or use_suggested=true to "
                                    "write a shrunk copy" if knobs else f"no size knobs found in {rel}")
    out_rel = args.output or str(Path(rel).with_name(f"{src_path.stem}_shrunk{src_path.suffix}"))
    out_path = resolve_path(workspace, out_rel)
    if out_path == src_path:
        raise ToolError("output must differ from the script: shrink never changes the original")
    out_rel = rel_path(workspace, out_path)
    check_writable_new(workspace, out_path)
    require_intact_ledger(workspace)
    text = rewrite_values(source, changes)
    data = text.encode("utf-8")
    sha = hashlib.sha256(data).hexdigest()
    atomic_write(out_path, data, src_path.stat().st_mode & 0o7777)
    mark_created(workspace, out_rel, sha)
    kc = [KnobChange(id=k.id, line=k.line, old=k.value, new=v) for k, v in changes]
    # source_sha256 ties the copy to the exact program it was cut from: the gate counts a check on the copy
    # as a check of that program only while the program is still those bytes.
    Ledger(workspace).append("shrink", {"script": rel, "source_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
                                        "output": out_rel, "sha256": sha,
                                        "changes": [c.model_dump() for c in kc], "device_note": device_note},
                             tool="shrink", files={out_rel: sha})
    result = ShrinkResult(script=rel, knobs=knobs, output=out_rel, changes=kc, device_note=device_note,
                          message=f"wrote {out_rel}")
    if args.run:
        _run(result, out_rel, args.timeout_s, args.force_cpu, workspace)
    return result


def _run(result: ShrinkResult, script: str, timeout_s: float, force_cpu: bool, workspace: Path) -> None:
    try:
        from .run_script import RunScriptArgs, run_script
    except ImportError:
        result.message += "; not run: the run_script tool is not available in this build"
        return
    res = run_script(RunScriptArgs(script=script, timeout_s=timeout_s, device="cpu" if force_cpu else None),
                     workspace)
    data = res.model_dump()
    result.run = data
    result.wall_s = _first(data, ("wall_s", "elapsed_s", "duration_s"))
    traj = _first(data, ("loss_trajectory", "losses"))
    result.loss_trajectory = list(traj) if isinstance(traj, list) else None


def _first(d: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """First of `keys` in `d` or in one level of nested dicts (results nest the process record)."""
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    for v in d.values():
        if isinstance(v, dict) and (x := _first(v, keys)) is not None:
            return x
    return None
