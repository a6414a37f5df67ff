"""What the user's frames and a tape hold, read without changing anything (runs in the harness subprocess).

Names of arrays in the user's frames (`name_of`, `frame_value`), scalar values, what a hand seed is, which
arrays a tape's launches write, and the argument slot a role names. Capture's listener asks; nothing here
keeps state across calls except the per-kernel cache of written arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from . import hooks, warp_compat


def _np(a) -> np.ndarray:
    return hooks.original("numpy")(a)


def _is_user_file(fn: str) -> bool:
    return not (fn.startswith((hooks._WARP_DIR, hooks._HARNESS_DIR, "<")) or fn == hooks._FAKE_FILENAME or "site-packages" in fn or "/lib/python3" in fn)


def name_of(obj: Any, frame=None) -> str | None:
    """Best-effort variable name of `obj` in the user's frames: `x`, `state.q`, `params[2]`, `self.k`."""
    f = frame or hooks.user_frame(2)
    seen_globals = set()
    while f is not None:
        if _is_user_file(f.f_code.co_filename):
            scopes = [f.f_locals]
            if id(f.f_globals) not in seen_globals:
                seen_globals.add(id(f.f_globals))
                scopes.append(f.f_globals)
            for scope in scopes:
                found = _search_scope(obj, scope)
                if found:
                    return found
        f = f.f_back
    return None


def _search_scope(obj: Any, scope: dict) -> str | None:
    items = [(k, v) for k, v in list(scope.items()) if not k.startswith("__")]
    for k, v in items:
        if v is obj:
            return k
    for k, v in items:
        if isinstance(v, (list, tuple)) and len(v) < 10_000:
            for i, e in enumerate(v):
                if e is obj:
                    return f"{k}[{i}]"
        elif isinstance(v, dict) and len(v) < 10_000:
            for kk, e in v.items():
                if e is obj:
                    return f"{k}[{kk!r}]"
        elif hasattr(v, "__dict__") and not isinstance(v, type) and type(v).__module__ not in ("builtins",):
            try:
                attrs = vars(v)
            except TypeError:
                continue
            for a, e in attrs.items():
                if e is obj:
                    return f"{k}.{a}"
        fields = warp_compat.struct_field_names(v)
        if fields is not None:
            for a in fields:
                if getattr(v, a, None) is obj:
                    return f"{k}.{a}"
    return None


def frame_value(name: str):
    """Look `name` up in the user's frames, innermost first (`--objective NAME`)."""
    f = hooks.user_frame(2)
    base, *attrs = name.split(".")
    while f is not None:
        if _is_user_file(f.f_code.co_filename):
            for scope in (f.f_locals, f.f_globals):
                if base in scope:
                    v = scope[base]
                    for a in attrs:
                        v = getattr(v, a)
                    return v
        f = f.f_back
    raise KeyError(name)


def scalar_of(value) -> float:
    if isinstance(value, wp.array):
        return float(np.sum(_np(value).astype(np.float64)))
    return float(np.sum(np.asarray(value, dtype=np.float64)))


def _seed_kind(g: np.ndarray) -> str:
    """What a hand seed is: the adjoint of a scalar loss (`scalar seed`), a uniform weight on every entry
    (`uniform seed`: the implied objective is c * sum(y)), or an arbitrary adjoint (`boundary seed`: an
    adjoint handed over from another backward pass, as hand-written checkpointing does)."""
    nz = g[g != 0]
    if g.size == 1:
        return "scalar seed"
    if nz.size == g.size and np.all(nz == nz.flat[0]):
        return "uniform seed"
    return "boundary seed"


_WRITES: dict[str, set[int] | None] = {}


def _written_args(kernel) -> set[int] | None:
    """Indices of the kernel arguments its source writes (None when the source cannot be analysed)."""
    key = getattr(kernel, "key", None) or str(id(kernel))
    if key not in _WRITES:
        try:
            from ..kernel_access import analyze_kernel, summarize

            ka = analyze_kernel(warp_compat.kernel_source(kernel).source, name=kernel.func.__name__)
            _WRITES[key] = {a.index for a in ka.args if summarize(a.accesses).written}
        except Exception:  # noqa: BLE001 - an unparsable source: fall back to outputs=
            _WRITES[key] = None
    return _WRITES[key]


def _same_slot(a: str, b: str) -> bool:
    """Two roles name the same argument slot of the same kernel (or copy), whatever the occurrence count:
    `launch:k:3:1` and `launch:k:7:1` are both argument 1 of kernel k."""
    pa, pb = a.split(":"), b.split(":")
    if len(pa) != len(pb) or pa[0] != pb[0]:
        return False
    if pa[0] == "launch":  # launch:KERNEL:OCCURRENCE:ARG[.field]
        return pa[1] == pb[1] and pa[3:] == pb[3:]
    return pa[2:] == pb[2:]  # copy:OCCURRENCE:src


def _launch_arrays(tape):
    """(kernel, argument index, number of inputs, array) for every array argument of the tape's launches."""
    for entry in warp_compat.tape_records(tape):
        launch = warp_compat.kernel_record(entry)
        if launch is not None:
            inputs, outputs = launch.inputs, launch.outputs
            for idx, arg in enumerate(inputs + outputs):
                for _, arr in hooks.iter_arrays(arg):
                    yield launch.kernel, idx, len(inputs), arr


def _tape_arrays(tape) -> list:
    """Every array the tape's launches take, in launch order, without repeats."""
    return list({id(arr): arr for _, _, _, arr in _launch_arrays(tape)}.values())


def written_arrays(tape) -> list:
    """Arrays the tape's launches write (outputs=, or inputs the kernel source writes), without repeats."""
    seen: dict[int, Any] = {}
    for kernel, idx, n_inputs, arr in _launch_arrays(tape):
        written = _written_args(kernel)
        if idx >= n_inputs or (written is not None and idx in written):
            seen.setdefault(id(arr), arr)
    return list(seen.values())
