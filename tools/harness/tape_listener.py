"""Harness listener that describes the tape recorded at the captured iteration, at its `backward`.

Runs next to `CaptureListener` (mode "capture") and uses its iteration numbering, so "the tape at
iteration T" means the iteration gradcheck measures. For every tape whose backward runs in that
iteration it writes a description (`describe()`): the protocol's `RecordedTape`, built here from its typed records
(`RecordedLaunch`, `LaunchArray`, `RecordedArray`, `UntapedWriteRecord`), so a record that does not match the
protocol fails here, at the tape it describes. The localizer finds the description of the tape it checks with
`description_of(tape)` and fills in its `localize`; `warpgrad.tools.tape_hazards` turns the description into
hazards without Warp.

What it records beyond `tape.launches`:

* per launch and array argument (struct fields included), whether the kernel reads or writes it, from
  the kernel's source (`warpgrad.tools.kernel_access`), not from the tracker;
* array identity: a stable id per Python object plus `ptr`/byte span, so aliases (`ptr=` views, one
  buffer under two names) are visible;
* a content fingerprint of every array a taped launch reads, taken just before that launch and again
  before `backward`: a changed fingerprint proves the values the backward replay will read are not
  the ones the forward read;
* launches and copies that write arrays while the tape is open but are not recorded on it
  (`record_tape=False`, launches after the `with` block, copies of arrays without `.grad`);
* which iteration recorded each launch (a tape reused without `reset()` replays older launches);
* copies/clones (closure introspection, warp-facts §6.1) and backward-disabled kernels.
"""

from __future__ import annotations

import contextlib
import inspect
import zlib
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import warp as wp

from .. import kernel_access
from . import hooks, warp_compat
from .capture import CaptureListener, name_of
from .hooks import safe as _safe
from .protocol import (
    CallSite,
    LaunchArg,
    LaunchArray,
    RecordedArray,
    RecordedLaunch,
    RecordedTape,
    TapeInspectReport,
    UntapedWriteRecord,
)
from .warp_compat import backward_state

if TYPE_CHECKING:
    from .main import Session

MAX_TAPES = 4
MAX_LAUNCHES = 5000
MAX_FINGERPRINT_BYTES = 256 * 2**20
MAX_NAME_LOOKUPS = 20000
BACKWARD_SCHEME_AFTER = 64


def _stamp(entry, info: dict[str, Any]) -> None:
    """Attach what was seen at recording time to the tape entry itself, so it lives and dies with the tape.

    Kernel entries carry a metadata dict (Warp keeps the call site there); copies are functions, which
    take attributes.
    """
    rec = warp_compat.kernel_record(entry)
    meta = rec.metadata if rec is not None else None
    if meta is not None:
        meta["warpgrad"] = info
    elif callable(entry):
        with contextlib.suppress(AttributeError, TypeError):
            entry._warpgrad = info


def _stamp_of(entry) -> dict[str, Any]:
    rec = warp_compat.kernel_record(entry)
    meta = rec.metadata if rec is not None else None
    if meta is not None:
        return meta.get("warpgrad") or {}
    return getattr(entry, "_warpgrad", None) or {}


class TapeInspectListener(hooks.Listener):
    key = "tape_inspect"

    def __init__(self, session: Session) -> None:
        self.s = session
        self.arrays: dict[int, RecordedArray] = {}
        self.keep: dict[int, Any] = {}  # keeps described arrays alive so ids are not reused
        self.access_cache: dict[str, kernel_access.KernelAccess | str] = {}
        self.untaped: dict[int, list[UntapedWriteRecord]] = {}  # id(tape) -> writes outside the record
        self.open_tapes: dict[int, Any] = {}
        self.descriptions: list[RecordedTape] = []
        # id() of the tape the last description is of: bookkeeping of this process, kept beside the description
        # rather than in it (it means nothing to the parent).
        self.last_tape_id: int | None = None
        self.name_lookups = 0
        self.names: dict[int, str | None] = {}
        self.notes: list[str] = []
        self.pending_copy: dict[int, dict[str, Any]] = {}
        self.by_rid: dict[str, Any] = {}  # "a3" -> the array
        self._pending: dict[str, Any] | None = None
        options = session.config.tape_inspect
        self.max_tapes = options.max_tapes if options is not None else MAX_TAPES

    # ------------------------------------------------------------------ iteration numbering (capture's)
    def _cap(self) -> CaptureListener | None:
        return next((x for x in self.s.listeners if isinstance(x, CaptureListener)), None)

    def _active(self) -> bool:
        """Whether the current launches can still belong to the captured iteration (fingerprints cost time).

        Until a gradient is consumed the scheme is unknown: a script may run many backward calls per
        iteration (backward per step) before its first update. Past BACKWARD_SCHEME_AFTER backward calls
        with no consumption, each backward is taken as an iteration (capture's "backward" scheme).
        """
        cap = self._cap()
        if cap is None:
            return True
        ru = cap.record_until
        return cap.acct.it <= ru and (cap.acct.consumed_any or cap.acct.bwd <= ru + BACKWARD_SCHEME_AFTER)

    def _wanted(self, it: int, bwd: int) -> bool:
        """Whether the tape whose backward runs now can be the one `result()` reports."""
        cap = self._cap()
        if cap is None:
            return len(self.descriptions) < self.max_tapes
        t = cap.target
        if not ((it == t or bwd == t) if t is not None else (it <= 1 or bwd <= 1)):
            return False
        same = sum(1 for d in self.descriptions if d.iteration == it)
        return same < self.max_tapes or bwd <= (t if t is not None else 1)

    def _iteration(self) -> tuple[int, int]:
        cap = self._cap()
        return (cap.acct.it, cap.acct.bwd) if cap is not None else (0, len(self.descriptions))

    # ------------------------------------------------------------------ arrays
    def _array_id(self, arr) -> str:
        rec = self.arrays.get(id(arr))
        if rec is None:
            rec = self._describe_array(arr)
            self.arrays[id(arr)] = rec
            self.keep[id(arr)] = arr
            self.by_rid[rec.id] = arr
        return rec.id

    def _describe_array(self, arr) -> RecordedArray:
        dtype = getattr(arr.dtype, "__name__", str(arr.dtype))
        ptr = int(arr.ptr) if arr.ptr else None
        span = 0
        if arr.shape and all(s > 0 for s in arr.shape):
            # Byte span from the first to one past the last element (strided views included).
            span = sum((s - 1) * abs(st) for s, st in zip(arr.shape, arr.strides)) + wp.types.type_size_in_bytes(arr.dtype)
        return RecordedArray(
            id=f"a{len(self.arrays)}", name=self._name(arr), shape=list(arr.shape), dtype=dtype,
            device=str(arr.device), requires_grad=bool(arr.requires_grad),
            retain_grad=bool(getattr(arr, "retain_grad", False)), ptr=ptr, nbytes=int(span),
            grad_ptr=int(arr.grad.ptr) if arr.grad is not None and arr.grad.ptr else None,
        )

    def _name(self, arr) -> str | None:
        if self.name_lookups < MAX_NAME_LOOKUPS:
            self.name_lookups += 1
            n = name_of(arr)
            if n:
                self.names[id(arr)] = n
            return n or self.names.get(id(arr))
        return self.names.get(id(arr))

    def _fingerprint(self, arr) -> int | None:
        try:
            if arr.ptr is None or arr.size == 0:
                return None
            if arr.size * wp.types.type_size_in_bytes(arr.dtype) > MAX_FINGERPRINT_BYTES:
                return None
            a = hooks.original("numpy")(arr)
            return zlib.crc32(np.ascontiguousarray(a).view(np.uint8).tobytes())
        except Exception:  # noqa: BLE001 - an exotic array type must not break the user's run
            return None

    # ------------------------------------------------------------------ kernel access
    def _access(self, kernel) -> kernel_access.KernelAccess | str:
        key = kernel.key
        if key not in self.access_cache:
            try:
                ks = warp_compat.kernel_source(kernel)
                glb = ks.globals

                def resolve(name: str) -> str | None:
                    base, *rest = name.split(".")
                    obj = glb.get(base)
                    for r in rest:
                        obj = getattr(obj, r, None)
                    fn = getattr(obj, "func", None)
                    if isinstance(obj, wp.Function) and fn is not None:
                        try:
                            return inspect.getsource(fn)
                        except (OSError, TypeError):
                            return None
                    return None

                self.access_cache[key] = kernel_access.analyze_kernel(
                    ks.source, name=ks.name, resolver=resolve, first_line=ks.first_line)
            except Exception as e:  # noqa: BLE001 - fall back to the inputs/outputs split the user passed
                self.access_cache[key] = f"{type(e).__name__}: {e}"
        return self.access_cache[key]

    def _launch_arrays(self, kernel, inputs: list, outputs: list,
                       names: bool = True) -> tuple[list[LaunchArg], list[tuple[LaunchArray, Any]], str]:
        """(the arguments, each array passed with the array object, how the accesses were found)."""
        ka = self._access(kernel)
        labels = warp_compat.kernel_arg_labels(kernel)
        args_desc: list[LaunchArg] = []
        arrays: list[tuple[LaunchArray, Any]] = []
        values = list(inputs) + list(outputs)
        for i, v in enumerate(values):
            label = labels[i] if i < len(labels) else f"arg{i}"
            io: Literal["input", "output"] = "input" if i < len(inputs) else "output"
            found = list(hooks.iter_arrays(v))
            kind: Literal["array", "struct", "value"] = "array" if isinstance(v, wp.array) else "struct" if found or warp_compat.is_struct_instance(v) else "value"
            args_desc.append(LaunchArg(index=i, name=label, io=io, kind=kind,
                                       value=repr(v)[:80] if kind == "value" else None))
            for path, arr in found:
                field = path or None
                if isinstance(ka, kernel_access.KernelAccess):
                    arg = ka.arg(label)
                    accs = [] if arg is None else [a for a in arg.accesses if a.field == field
                                                   or (a.field is None and field is not None and a.kind == "unknown")]
                    s = kernel_access.summarize(accs)
                    summary = s.model_dump(exclude={"read_lines", "write_lines"})
                    summary["read_lines"], summary["write_lines"] = s.read_lines[:5], s.write_lines[:5]
                else:
                    summary = {"read": io == "input", "written": io == "output", "accumulate_only": False,
                               "inplace": False, "write_after_read": False, "tracker_sees_read": True,
                               "conservative": True, "read_lines": [], "write_lines": []}
                arrays.append((LaunchArray(arg=label, arg_index=i, field=field, array=self._array_id(arr),
                                           user_name=self._name(arr) if names else None, **summary), arr))
        return args_desc, arrays, ("ast" if isinstance(ka, kernel_access.KernelAccess) else f"fallback ({ka})")

    # ------------------------------------------------------------------ hooks
    @_safe
    def before_launch(self, call: hooks.LaunchCall) -> None:
        self._pending = None  # a launch that raised never reached after_launch
        if call.in_backward:
            return
        if call.taped and not self._active():
            # Cheap bookkeeping only: which backward call each launch precedes (stale-launch evidence).
            it, bwd = self._iteration()
            self._pending = {"n_before": len(warp_compat.tape_records(call.tape)), "fp": {}, "iteration": it,
                             "bwd": bwd, "names": None}
            return
        if not self._active():
            return
        if call.taped:
            tape = call.tape
            self.open_tapes[id(tape)] = tape
            it, bwd = self._iteration()
            info: dict[str, Any] = {"n_before": len(warp_compat.tape_records(tape)), "fp": {}, "iteration": it,
                                    "bwd": bwd}
            _, arrays, _ = self._launch_arrays(call.kernel, call.inputs, call.outputs)
            # Names as bound at the launch: rebinding (a, b = b, a) shows as one buffer under two names.
            info["names"] = {(a.arg, a.field): a.user_name for a, _ in arrays}
            for a, obj in arrays:
                if a.read and not a.written:
                    info["fp"][a.array] = self._fingerprint(obj)
            # An array the launch itself rewrites is compared from after the launch: its own write is the
            # in-kernel hazard, reported from the source, not a later mutation.
            info["after"] = [obj for a, obj in arrays if a.read and a.written]
            self._pending = info
        elif not call.in_optimizer:
            self._note_untaped_launch(call)

    @_safe
    def after_launch(self, call: hooks.LaunchCall) -> None:
        if not call.taped or call.in_backward:
            return
        info, self._pending = self._pending, None
        if info is None:
            return
        tape = call.tape
        if len(warp_compat.tape_records(tape)) > info["n_before"]:
            for obj in info.pop("after", []):
                info["fp"][self._array_id(obj)] = self._fingerprint(obj)
            entry = warp_compat.tape_records(tape)[-1]
            _stamp(entry, {"iteration": info["iteration"], "bwd": info["bwd"], "fp": info["fp"],
                           "names": info.get("names")})

    def _open_windows(self) -> list[int]:
        return [tid for tid, t in self.open_tapes.items() if warp_compat.tape_records(t)]

    def _note_untaped_launch(self, call: hooks.LaunchCall) -> None:
        wins = self._open_windows()
        if not wins:
            return
        _, arrays, _ = self._launch_arrays(call.kernel, call.inputs, call.outputs)
        written = [a.array for a, _ in arrays if a.written]
        if not written:
            return
        why = "record_tape=False" if call.tape is not None else "launched while no tape was recording"
        for tid in wins:
            self.untaped.setdefault(tid, []).append(UntapedWriteRecord(
                kind="launch", kernel=call.kernel.key, site=CallSite(**call.site), arrays=written, why=why,
                after_launch=len(warp_compat.tape_records(self.open_tapes[tid])) - 1,
            ))

    @_safe
    def before_copy(self, call: hooks.CopyCall) -> None:
        if call.in_backward or hooks.STATE.current is not None or not self._active():
            return
        if not isinstance(call.dest, wp.array) or not isinstance(call.src, wp.array):
            return
        tape = call.tape
        n = len(warp_compat.tape_records(tape)) if tape is not None else 0
        it, bwd = self._iteration()
        self.pending_copy[id(call)] = {"n": n, "fp": self._fingerprint(call.src), "site": dict(call.site),
                                       "iteration": it, "bwd": bwd}
        if tape is not None:
            self.open_tapes[id(tape)] = tape

    @_safe
    def after_copy(self, call: hooks.CopyCall) -> None:
        pend = self.pending_copy.pop(id(call), None)
        if pend is None:
            return
        tape = call.tape
        if tape is not None and len(warp_compat.tape_records(tape)) > pend["n"]:
            entry = warp_compat.tape_records(tape)[-1]
            _stamp(entry, {"iteration": pend["iteration"], "bwd": pend["bwd"], "site": pend["site"],
                           "fp": {self._array_id(call.src): pend["fp"]},
                           "dest_name": self._name(call.dest), "src_name": self._name(call.src)})
            return
        wins = self._open_windows()
        why = ("a wp.copy inside the tape that Warp did not record (an array without .grad)" if tape is not None
               else "a wp.copy while no tape was recording")
        for tid in wins:
            self.untaped.setdefault(tid, []).append(UntapedWriteRecord(
                kind="copy", kernel="wp.copy", site=CallSite(**pend["site"]), arrays=[self._array_id(call.dest)],
                why=why, after_launch=len(warp_compat.tape_records(self.open_tapes[tid])) - 1,
                src_requires_grad=bool(call.src.requires_grad),
            ))

    @_safe
    def before_backward(self, tape, loss, grads) -> None:
        if not self._active() or not self._wanted(*self._iteration()):
            return
        try:
            self.descriptions.append(self.describe(tape, loss, grads))
            self.last_tape_id = id(tape)
        except Exception as e:  # noqa: BLE001 - describing must never break the user's run
            self.notes.append(f"could not describe a tape: {type(e).__name__}: {e}")

    @_safe
    def after_backward(self, tape, loss, grads) -> None:
        self._forget(tape)

    @_safe
    def tape_reset(self, tape) -> None:
        self._forget(tape)

    def _forget(self, tape) -> None:
        self.untaped.pop(id(tape), None)
        self.open_tapes.pop(id(tape), None)
        for entry in warp_compat.tape_records(tape):
            info = _stamp_of(entry)
            if info:
                info["fp"] = {}  # the next backward of a reused tape compares against nothing stale

    def description_of(self, tape) -> RecordedTape | None:
        """The last description, where it is of `tape` and not yet localized (the localizer's entry point)."""
        if not self.descriptions or self.last_tape_id != id(tape):
            return None
        d = self.descriptions[-1]
        return d if d.localize is None else None

    # ------------------------------------------------------------------ the description
    def describe(self, tape, loss, grads) -> RecordedTape:
        it, bwd = self._iteration()
        launches: list[RecordedLaunch] = []
        current_fp: dict[str, int | None] = {}
        for j, entry in enumerate(warp_compat.tape_records(tape)[:MAX_LAUNCHES]):
            info = _stamp_of(entry)
            described = self._describe_entry(j, entry, info)
            if described is not None:
                launches.append(self._with_arrays(*described, info, current_fp))
        loss_ids, seed = self._seed(loss, grads, launches)
        n_records = len(warp_compat.tape_records(tape))
        return RecordedTape(
            iteration=it, backward_index=bwd, n_launches=n_records,
            truncated=n_records > MAX_LAUNCHES, loss=loss_ids, seed=seed,
            launches=launches, arrays=self._arrays_used(launches, loss_ids),
            untaped_writes=list(self.untaped.get(id(tape), []))[:200],
            warp_version=wp.__version__,
        )

    def _describe_entry(self, j: int, entry: Any,
                        info: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[LaunchArray, Any]]] | None:
        """(description, array arguments) of one tape entry; None for an entry of no known kind."""
        rec = warp_compat.kernel_record(entry)
        if rec is not None:
            return self._describe_kernel(j, rec, info)
        if callable(entry):
            return self._describe_callable(j, entry, info)
        return None

    def _describe_kernel(self, j: int, rec: warp_compat.KernelRecord,
                         info: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[LaunchArray, Any]]]:
        kernel, dim, outputs, caller = rec.kernel, rec.dim, rec.outputs, rec.caller
        enabled, disabled_by = backward_state(kernel)
        names = info.get("names")
        args_desc, arrays, source = self._launch_arrays(kernel, rec.inputs, outputs, names=names is None)
        if names:
            for a, obj in arrays:
                a.user_name = names.get((a.arg, a.field)) or self.names.get(id(obj))
        ks = warp_compat.kernel_source(kernel)
        d = {
            "index": j, "type": "kernel", "kernel": kernel.key, "module": getattr(kernel.module, "name", None),
            "kernel_def": f"{ks.filename}:{ks.first_line}",
            "site": {"file": caller.get("file"), "line": caller.get("lineno"), "func": caller.get("func")},
            "dim": list(dim) if isinstance(dim, (tuple, list)) else [dim],
            "backward_enabled": enabled, "backward_disabled_by": disabled_by,
            "n_outputs": len(outputs), "args": args_desc, "access_source": source,
        }
        return d, arrays

    def _describe_callable(self, j: int, entry: Any,
                           info: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[LaunchArray, Any]]]:
        """A `wp.copy` (a closure over src and dest) or another `record_func` callable."""
        qual = getattr(entry, "__qualname__", "")
        cl = warp_compat.record_closure(entry)
        if not (qual.startswith("copy.") and isinstance(cl.get("src"), wp.array) and isinstance(cl.get("dest"), wp.array)):
            return {"index": j, "type": "func", "kernel": qual or repr(entry)[:80], "site": info.get("site") or {},
                    "backward_enabled": True, "args": []}, []
        src, dest = cl["src"], cl["dest"]
        fixed: dict[str, Any] = {"accumulate_only": False, "inplace": False, "write_after_read": False, "conservative": False,
                 "tracker_sees_read": True}
        arrays = [
            (LaunchArray(arg="src", arg_index=0, field=None, array=self._array_id(src),
                         user_name=info.get("src_name") or self._name(src), read=True, written=False, **fixed), src),
            (LaunchArray(arg="dest", arg_index=1, field=None, array=self._array_id(dest),
                         user_name=info.get("dest_name") or self._name(dest), read=False, written=True, **fixed),
             dest),
        ]
        d: dict[str, Any] = {"index": j, "type": "copy", "kernel": "wp.copy", "site": info.get("site") or {},
             "count": cl.get("count"), "src_offset": cl.get("src_offset"), "dest_offset": cl.get("dest_offset"),
             "backward_enabled": True, "args": []}
        return d, arrays

    def _with_arrays(self, d: dict[str, Any], arrays: list[tuple[LaunchArray, Any]], info: dict[str, Any],
                     current_fp: dict[str, int | None]) -> RecordedLaunch:
        """Complete a description: recording iteration, the arrays (changed since the launch read them?), signature."""
        fps = info.get("fp") or {}
        for a, obj in arrays:
            if a.read and a.array in fps and fps[a.array] is not None:
                if a.array not in current_fp:
                    current_fp[a.array] = self._fingerprint(obj)
                a.changed_since_launch = current_fp[a.array] != fps[a.array]
            else:
                a.changed_since_launch = None
        launch_arrays = [a for a, _ in arrays]
        return RecordedLaunch(**d, recorded_iteration=info.get("iteration"), recorded_backward_index=info.get("bwd"),
                              arrays=launch_arrays, signature=self._signature(d, launch_arrays))

    def _seed(self, loss, grads, launches: list[RecordedLaunch]) -> tuple[list[str], str]:
        """(ids of the arrays backward is seeded from, how: "loss" | "grads" | "hand-seeded .grad" | "none")."""
        if loss is not None and isinstance(loss, wp.array):
            return [self._array_id(loss)], "loss"
        if grads:
            return [self._array_id(a) for a in grads if isinstance(a, wp.array)], "grads"
        loss_ids: list[str] = []
        for d in launches:
            for a in d.arrays:
                if a.written:
                    obj = self.by_rid.get(a.array)
                    if obj is not None and obj.grad is not None and a.array not in loss_ids:
                        g = hooks.original("numpy")(obj.grad)
                        if np.any(g != 0):
                            loss_ids.append(a.array)
        return loss_ids, "hand-seeded .grad" if loss_ids else "none"

    def _arrays_used(self, launches: list[RecordedLaunch], loss_ids: list[str]) -> dict[str, RecordedArray]:
        used = {a.array for d in launches for a in d.arrays} | set(loss_ids)
        arrays_out = {rec.id: rec for rec in self.arrays.values() if rec.id in used}
        for rec_id, rec in arrays_out.items():
            obj = self.by_rid.get(rec_id)
            if obj is not None:  # flags may have changed since first sight
                rec.requires_grad = bool(obj.requires_grad)
                rec.retain_grad = bool(getattr(obj, "retain_grad", False))
        return arrays_out

    @staticmethod
    def _signature(d: dict[str, Any], arrays: list[LaunchArray]) -> str:
        # From the entry's own fields, before defaults fill them: a copy's dim stays "None" in the signature.
        parts = [d["type"], str(d.get("kernel")), str(d.get("dim"))]
        parts += [f"{a.arg}.{a.field}={a.array}" for a in arrays]
        parts += [f"{a.name}={a.value}" for a in d.get("args", []) if a.kind == "value"]
        return "|".join(parts)

    # ------------------------------------------------------------------ result
    def result(self) -> TapeInspectReport:
        cap = self._cap()
        if cap is not None:
            scheme = "consume" if cap.acct.consumed_any else "backward"
            table = cap.acct.iters if scheme == "consume" else cap.acct.bwd_iters
            seen = sorted(i for i, r in table.items() if r.params or r.backward_calls)
            if cap.target is not None:
                target = cap.target
            else:
                complete = [i for i in seen if table[i].params]
                target = 1 if 1 in complete else (complete[0] if complete else 0)
            field = "iteration" if scheme == "consume" else "backward_index"
            tapes = [d for d in self.descriptions if getattr(d, field) == target]
            if not tapes and self.descriptions and cap.target is None:
                # No complete iteration: describe the first tape seen rather than nothing.
                tapes = self.descriptions[:1]
        else:
            scheme, target, tapes = "backward", None, self.descriptions[:1]
        notes = self.notes + ([f"the tape inspector stopped after an internal error ({self.broken})"]
                              if self.broken else [])
        return TapeInspectReport(scheme=scheme, iteration=target, tapes=tapes[:self.max_tapes],
                                 tapes_in_iteration=len(tapes), notes=notes)
