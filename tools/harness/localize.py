"""Harness listener that localizes a wrong gradient on the captured tape (runs after `TapeInspectListener`).

Right after the user's `backward` of each tape the inspector described:

* **NaN origin** (config `localize.nan`): if any adjoint on the tape is non-finite, the backward pass is
  replayed one recorded launch at a time from the same seeds; the first launch, in backward order, whose
  input adjoints turn non-finite while its output adjoints were finite is the origin (like PyTorch's
  `detect_anomaly`). The first forward launch that wrote non-finite values is reported too.
* **Per-launch gradcheck** (config `localize.gradcheck`): `warp.autograd.gradcheck_tape` on a one-launch
  tape for each distinct kernel launch whose dense Jacobians fit `jacobian_budget_bytes` (above it, and for
  large vector/matrix arrays, directional products in linear memory: `directional_check`), guarded against its known failures (warp-facts §4.3): launches
  with no `outputs=` raise even with `raise_exception=False`, backward-disabled kernels and copies are
  skipped silently, and a pair without `requires_grad` passes vacuously; all of these are listed instead.

Both leave the user's run as they found it: array values and gradients are snapshotted and restored, and
the harness listeners do not see the checks' own tapes.
"""

from __future__ import annotations

import contextlib
import io
import re
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import warp as wp

from . import directional_check, hooks, warp_compat
from .hooks import safe as _safe
from .protocol import (
    GradcheckRun,
    GradcheckSkip,
    GradcheckTableRow,
    LaunchGradchecks,
    LocalizeOptions,
    LocalizeReport,
    NanReplay,
    NanStep,
    RecordedTape,
    TapeLocalization,
)
from .tape_listener import TapeInspectListener
from .warp_compat import backward_state

if TYPE_CHECKING:
    from .main import Session

_ANSI = re.compile(r"\x1b\[\d+m")
# Outcomes that hold for every launch of the class (the adjoint code itself); the others depend on the values of
# the launch checked (NaN inputs, float32 rounding at these magnitudes, an error), so later tapes check again.
_VALUE_FREE = frozenset({"passed", "failed", "nan", "vacuous"})
MAX_FULL_SCALARS = 768


def _np(a) -> np.ndarray:
    return hooks.original("numpy")(a)


def _entry_arrays(entry) -> tuple[list, list]:
    """(arrays passed as inputs, arrays passed as outputs) of a tape entry, struct fields included."""
    rec = warp_compat.kernel_record(entry)
    if rec is not None:
        ins = [a for v in rec.inputs for _, a in hooks.iter_arrays(v)]
        outs = [a for v in rec.outputs for _, a in hooks.iter_arrays(v)]
        return ins, outs
    cl = warp_compat.record_closure(entry)
    src, dest = cl.get("src"), cl.get("dest")
    return ([src] if isinstance(src, wp.array) else []), ([dest] if isinstance(dest, wp.array) else [])


def _finite(a) -> bool | None:
    """True: every floating-point value of `a` is finite; False: one is NaN/inf; None: the values could not be
    read (no verdict: an unreadable array is never reported finite)."""
    try:
        v = _np(a)
    except Exception:  # noqa: BLE001 - any failure to read the values is "unknown", never "finite"
        return None
    return finite_values(v)


def finite_values(v: np.ndarray) -> bool | None:
    """`_finite` on host values: struct arrays are checked field by field (nested structs included)."""
    if v.dtype.fields is not None:
        found = [finite_values(v[name]) for name in v.dtype.names or ()]
        return False if False in found else None if None in found else True
    if v.dtype.kind in "fc":
        return bool(np.all(np.isfinite(v)))
    if v.dtype.kind in "iub":
        return True  # integers and booleans hold no NaN/inf
    return None


@contextlib.contextmanager
def _quiet_harness():
    """Run Warp machinery (tapes, jacobians) without the harness listeners seeing it."""
    saved, hooks.STATE.listeners = hooks.STATE.listeners, []
    try:
        with warp_compat.no_active_tape():
            hooks.STATE.in_hook += 1
            try:
                yield
            finally:
                hooks.STATE.in_hook -= 1
    finally:
        hooks.STATE.listeners = saved


class _Snapshot:
    """Values and gradients of a set of arrays, to put back exactly."""

    def __init__(self, arrays, values: bool = True) -> None:
        self.items = []
        seen = set()
        for a in arrays:
            if id(a) in seen or a is None:
                continue
            seen.add(id(a))
            v = _np(a).copy() if values else None
            g = _np(a.grad).copy() if a.grad is not None else None
            self.items.append((a, v, a.grad, g))

    def restore(self, values: bool = True) -> None:
        with _quiet_harness():
            for a, v, grad_obj, g in self.items:
                if values and v is not None:
                    a.assign(v)
                if g is not None and grad_obj is not None:
                    grad_obj.assign(g)


class LocalizeListener(hooks.Listener):
    key = "localize"

    def __init__(self, session: Session) -> None:
        self.s = session
        options = session.config.localize or LocalizeOptions()
        self.nan = options.nan
        self.gradcheck = options.gradcheck
        self.max_launches = options.max_launches
        self.max_per_var = options.max_per_var
        self.budget_s = options.budget_s
        self.jacobian_budget = options.jacobian_budget_bytes
        self.stop_file = options.stop_file
        self.pre: dict[int, Any] = {}
        self.notes: list[str] = []
        # Checks made on an earlier tape of this run, by launch class (`_launch_class`): a later tape's launches of
        # the same class run the same adjoint code, so the check stands for them too instead of being redone on
        # every tape (a training loop records the same kernels each iteration).
        self.done: dict[tuple, tuple[GradcheckRun, int | None]] = {}

    def _inspector(self) -> TapeInspectListener | None:
        return next((x for x in self.s.listeners if isinstance(x, TapeInspectListener)), None)

    def _desc_for(self, tape) -> RecordedTape | None:
        ti = self._inspector()
        return ti.description_of(tape) if ti is not None else None

    @_safe
    def before_backward(self, tape, loss, grads) -> None:
        desc = self._desc_for(tape)
        if desc is None or not self.nan:
            return
        arrays = [a for e in warp_compat.tape_records(tape) for side in _entry_arrays(e) for a in side]
        arrays += [loss] if isinstance(loss, wp.array) else []
        arrays += list(grads or {})
        seeds = {id(a): _np(g).copy() for a, g in (grads or {}).items()}
        self.pre[id(tape)] = (_Snapshot(arrays, values=False), seeds)

    @_safe
    def after_backward(self, tape, loss, grads) -> None:
        desc = self._desc_for(tape)
        if desc is None:
            return
        # The checks below run unseen by the inspector, so its array ids are final already.
        ti = self._inspector()
        ids = {k: v.id for k, v in ti.arrays.items()} if ti is not None else {}
        found = TapeLocalization()
        try:
            if self.nan:
                found.nan = self._nan_origin(tape, loss, grads, ids)
            if self.gradcheck:
                found.gradcheck = self._gradcheck(tape, desc.iteration)
        except Exception as e:  # noqa: BLE001 - localization must never break the user's run
            found.error = f"{type(e).__name__}: {e}"
        desc.localize = found
        self.pre.pop(id(tape), None)

    def result(self) -> LocalizeReport:
        return LocalizeReport(broken=self.broken, notes=self.notes)

    # ------------------------------------------------------------------ NaN origin
    def _nan_origin(self, tape, loss, grads, ids: dict[int, str]) -> NanReplay:
        """Where the first non-finite value appears, forward and backward; arrays named by `ids` (id(array) -> the
        description's array id)."""
        def names(arrays: list) -> list[str]:
            return [ids.get(id(a), "?") for a in arrays]

        entries = list(warp_compat.tape_records(tape))
        res = NanReplay()
        for j, e in enumerate(entries):
            _, outs = _entry_arrays(e)
            bad = [a for a in outs if _finite(a) is False]
            if bad:
                res.forward_origin = NanStep(index=j, arrays=names(bad))
                break
        all_arrays = [a for e in entries for side in _entry_arrays(e) for a in side]
        # Arrays whose values or adjoints could not be read were not checked: listed, never counted as finite.
        res.unreadable = names([a for a in {id(a): a for a in all_arrays}.values()
                                if _finite(a) is None or (a.grad is not None and _finite(a.grad) is None)])
        if not any(a.grad is not None and _finite(a.grad) is False for a in all_arrays):
            return res
        res.nonfinite_adjoints = True
        pre = self.pre.get(id(tape))
        if pre is None:
            res.checked = False
            return res
        snap_pre, seeds = pre
        post = _Snapshot(all_arrays + ([loss] if isinstance(loss, wp.array) else []), values=False)
        try:
            snap_pre.restore(values=False)
            stale = [a for a in all_arrays if a.grad is not None and _finite(a.grad) is False]
            res.nonfinite_before_backward = names(list({id(a): a for a in stale}.values()))
            written = {id(a) for e in entries for a in _entry_arrays(e)[1]}
            with _quiet_harness():
                # Replay this backward's own contributions: gradients left over from earlier backward calls
                # (never zeroed) are cleared; hand-seeded output gradients are kept as the seeds they are.
                for a in all_arrays:
                    if a.grad is None or a is loss or a in (grads or {}):
                        continue
                    if id(a) in written and _finite(a.grad) is True and np.any(_np(a.grad) != 0):
                        continue
                    a.grad.zero_()
                if isinstance(loss, wp.array) and loss.grad is not None:
                    loss.grad.fill_(1.0)
                for a in grads or {}:
                    if id(a) in seeds and a.grad is not None:
                        a.grad.assign(seeds[id(a)])
                one = wp.Tape()
                one.gradients = tape.gradients
                for j in range(len(entries) - 1, -1, -1):
                    e = entries[j]
                    ins, outs = _entry_arrays(e)
                    outs_finite = all(a.grad is None or _finite(a.grad) is True for a in outs)
                    before = {id(a) for a in ins if a.grad is not None and _finite(a.grad) is True}
                    warp_compat.set_tape_records(one, [e])
                    hooks.original("backward")(one)
                    bad = [a for a in ins if id(a) in before and _finite(a.grad) is False]
                    if bad:
                        res.origin = NanStep(index=j, arrays=names(bad), output_adjoints_finite=outs_finite)
                        break
                warp_compat.set_tape_records(one, [])
        finally:
            post.restore(values=False)
        return res

    # ------------------------------------------------------------------ per-launch gradcheck_tape
    def _stopped(self) -> str | None:
        """The parent's reason to start no further check (`LocalizeOptions.stop_file`), once it wrote one."""
        if not self.stop_file:
            return None
        try:
            with open(self.stop_file, encoding="utf-8") as f:
                return f.read().strip() or "stopped by the caller"
        except OSError:
            return None

    def _gradcheck(self, tape, iteration: int | None = None) -> LaunchGradchecks:
        import warp.autograd

        checked: list[GradcheckRun] = []
        skipped: list[GradcheckSkip] = []
        not_run: str | None = None
        records = list(warp_compat.tape_records(tape))
        # One check per launch class on this tape, at its first launch; the count says how many it stands for.
        members: dict[tuple, list[int]] = {}
        for j, e in enumerate(records):
            rec = warp_compat.kernel_record(e)
            if rec is not None:
                members.setdefault(_launch_class(rec), []).append(j)
        t0 = time.monotonic()
        for j, e in enumerate(records):
            rec = warp_compat.kernel_record(e)
            if rec is None:
                skipped.append(GradcheckSkip(index=j, reason="a copy/clone or record_func callable (gradcheck_tape "
                                                             "skips these silently)"))
                continue
            key = _launch_class(rec)
            if members[key][0] != j:
                continue
            kernel, outputs = rec.kernel, rec.outputs
            if key in self.done and len(checked) < self.max_launches:
                run, at = self.done[key]
                checked.append(run.model_copy(update={"index": j, "launches": len(members[key]),
                                                      "others": members[key][1:], "checked_at_iteration": at}))
                continue
            enabled, by = backward_state(kernel)
            if not enabled:
                skipped.append(GradcheckSkip(index=j, kernel=kernel.key, reason=f"backward disabled ({by} option "
                                             "enable_backward=False); gradcheck_tape skips it silently"))
                continue
            if not outputs:
                skipped.append(GradcheckSkip(index=j, kernel=kernel.key, reason="launched with no outputs= (everything "
                                             "passed as inputs=): gradcheck_tape raises on it even with "
                                             "raise_exception=False"))
                continue
            bookkeeping = _written_bookkeeping(rec)
            if bookkeeping:
                # An FD relaunch is only a derivative of a pure function of the inputs. A launch that writes integer
                # arrays (a slot counter, an index list) redoes that bookkeeping on state the forward already
                # advanced: each relaunch hands out new slots, past the end of the buffer when nothing guards it
                # (measured: SIGABRT of the whole run on Warp 1.19 CPU).
                skipped.append(GradcheckSkip(index=j, kernel=kernel.key, reason="writes integer arrays "
                                             f"({', '.join(bookkeeping)}): a relaunch would advance their state "
                                             "(counters, index lists) and is not a pure function of the inputs"))
                continue
            not_run = not_run or self._stopped()
            if not_run:
                continue  # the parent no longer needs them (its reason is the result's `not_run`)
            if len(checked) >= self.max_launches or time.monotonic() - t0 > self.budget_s:
                skipped.append(GradcheckSkip(index=j, kernel=kernel.key, reason="check budget reached"))
                continue
            run = self._check_launch(j, rec, e, warp.autograd).model_copy(update={"launches": len(members[key]),
                                                                                  "others": members[key][1:]})
            if run.status in _VALUE_FREE:
                self.done[key] = (run, iteration)
            checked.append(run)
        return LaunchGradchecks(checked=checked, skipped=skipped, not_run=not_run)

    def _check_launch(self, j: int, rec: warp_compat.KernelRecord, e, autograd) -> GradcheckRun:
        """The check of one launch, by dense Jacobians where they fit, else by directional products."""
        ins, outs = _entry_arrays(e)
        per_var = self.max_per_var
        dense = directional_check.dense_jacobian_bytes(ins, outs)
        if dense > self.jacobian_budget:
            # gradcheck_tape would allocate the full Jacobians whatever max_inputs_per_var says.
            return self._check_one(j, rec, autograd, per_var, directional=dense)
        if any(wp.types.type_size(a.dtype) > 1 for a in ins + outs):
            # Measured on 1.19: with vector/matrix dtypes, max_inputs_per_var leaves NaN in the FD Jacobian
            # and the check FAILs spuriously, so these are checked in full, or by directions when large.
            biggest = max(a.size * wp.types.type_size(a.dtype) for a in ins + outs)
            if biggest > MAX_FULL_SCALARS:
                return self._check_one(j, rec, autograd, per_var, directional=dense)
            per_var = -1
        return self._check_one(j, rec, autograd, per_var)

    def _check_one(self, j: int, launch: warp_compat.KernelRecord, autograd, per_var: int,
                   directional: int | None = None) -> GradcheckRun:
        """gradcheck_tape on the launch alone; `directional` (the dense Jacobians' bytes): directional products
        instead, in memory linear in the arrays."""
        kernel, e = launch.kernel, launch.entry
        ins, outs = _entry_arrays(e)
        f64 = all("64" in str(getattr(a.dtype, "__name__", a.dtype)) for a in ins + outs if a.dtype is not None)
        eps, atol, rtol = (1e-6, 1e-5, 1e-4) if f64 else (1e-3, 1e-2, 5e-2)
        snap = _Snapshot(ins + outs)
        # float32 central differences carry rounding error ~ |value| * 2^-23 / eps: a "failure" inside that band
        # is noise (warp-facts §4.2), not a wrong adjoint.
        mags = [float(np.max(np.abs(v.astype(np.float64)))) for _, v, _, _ in snap.items
                if v is not None and v.size and v.dtype.kind == "f"]
        noise = 0.0 if f64 else 4.0 * 1.2e-7 * max(mags, default=0.0) / eps
        rec = GradcheckRun(index=j, kernel=kernel.key, eps=eps, atol=atol, rtol=rtol,
                           method="jacobian" if directional is None else "directional", dense_jacobian_bytes=directional)
        bad_in = [a for a in ins if _finite(a) is False]
        if bad_in:
            rec.status = "nan_inputs"
            rec.reason = ("its inputs already hold NaN/inf values after the forward pass, so neither AD nor FD is "
                             "meaningful here: see the forward NaN origin (an earlier update may have diverged; "
                             "inspect iteration 0)")
            return rec
        def run(step: float) -> tuple[bool, list[GradcheckTableRow]]:
            if directional is not None:
                with _quiet_harness():
                    rows = directional_check.directional_rows(launch, step, atol, rtol, seed=j,
                                                              support=max(per_var, 1))
                snap.restore()
                return all(r.passed == "PASS" for r in rows), rows
            out = io.StringIO()
            with _quiet_harness(), contextlib.redirect_stdout(out):
                one = wp.Tape()
                warp_compat.set_tape_records(one, [e])
                passed = autograd.gradcheck_tape(one, eps=step, atol=atol, rtol=rtol, raise_exception=False,
                                                 max_inputs_per_var=per_var, max_outputs_per_var=per_var,
                                                 show_summary=True)
                warp_compat.set_tape_records(one, [])
            snap.restore()  # the kernel form runs the launch on the live arrays
            return passed, _parse_table(out.getvalue())

        try:
            ok, rec.rows = run(eps)
            if not ok and not f64 and rec.rows and not any(r.passed == "NaN" for r in rec.rows):
                # float32: a wrong adjoint fails at every step size; rounding noise shrinks with a larger one.
                rec.eps_retry = eps * 10.0
                rec.passed_at_larger_eps = run(eps * 10.0)[0]
            if not rec.rows:
                rec.status = "vacuous"
                structs = [v for v in launch.inputs + launch.outputs if warp_compat.is_struct_instance(v)]
                rec.reason = ("arrays passed inside a wp.struct are not checked by gradcheck, " if structs else "") + (
                    "no input/output pair with requires_grad=True was checked: gradcheck passes without checking "
                    "anything")
            elif any(r.passed == "NaN" for r in rec.rows):
                rec.status = "nan"
            elif ok:
                rec.status = "passed"
            elif rec.passed_at_larger_eps:
                rec.status = "inconclusive"
                rec.reason = (f"fails at eps {eps:g} but passes at eps {eps * 10:g}: float32 finite-difference "
                                 "rounding, not a wrong adjoint; check in float64 to be sure")
            elif all(r.passed == "PASS" or r.max_abs_error <= 10.0 * noise for r in rec.rows):
                rec.status = "inconclusive"
                rec.reason = (f"the mismatches are within float32 finite-difference noise (values up to "
                                 f"{max(mags, default=0.0):.3g}, eps {eps:g}: about {noise:.3g} absolute); check in "
                                 "float64 or on smaller values")
            else:
                rec.status = "failed"
            rec.fd_noise = noise
        except Exception as ex:  # noqa: BLE001 - Warp's autograd raises anything; it is the finding
            rec.status, rec.reason = "error", f"{type(ex).__name__}: {ex}"[:300]
            snap.restore()
        return rec


def _parse_table(text: str) -> list[GradcheckTableRow]:
    rows = []
    for line in _ANSI.sub("", text).splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if len(cells) < 7 or cells[0] == "Input":
            continue
        cells[-1] = cells[-1].rstrip("|").strip()
        try:
            rows.append(GradcheckTableRow(input=cells[0], output=cells[1], max_abs_error=float(cells[2].split(" at ")[0]),
                                          ad=float(cells[3]), fd=float(cells[4]), max_rel_error=float(cells[5]),
                                          passed=cells[6]))
        except ValueError:  # a line that is not a table row (pydantic's ValidationError is a ValueError too)
            continue
    return rows


def _written_bookkeeping(launch: warp_compat.KernelRecord) -> list[str]:
    """Labels of the integer (non-float) arrays the launch's kernel writes, read off its source; empty when the
    source cannot be analysed (then the check runs as before)."""
    from .capture_values import _written_args

    written = _written_args(launch.kernel)
    if not written:
        return []
    labels = warp_compat.kernel_arg_labels(launch.kernel)
    args = [*launch.inputs, *launch.outputs]
    return [labels[i] if i < len(labels) else str(i) for i in sorted(written)
            if i < len(args) and isinstance(args[i], wp.array)
            and not wp.types.type_is_float(getattr(args[i].dtype, "_wp_scalar_type_", args[i].dtype))]


def _launch_class(rec: warp_compat.KernelRecord) -> tuple:
    """What makes two launches run the same adjoint code on alike data: the kernel, the launch dimension, and each
    argument's type (arrays: dtype and shape; structs and scalars: their type). Values are not part of it: the
    check is of the kernel's adjoint, which is the same code at every launch of the class."""
    def arg(v: Any) -> tuple:
        if isinstance(v, wp.array):
            return ("array", str(v.dtype), tuple(v.shape))
        return ("value", type(v).__name__)

    return (id(rec.kernel), rec.kernel.key, str(rec.dim), tuple(arg(v) for v in rec.inputs),
            tuple(arg(v) for v in rec.outputs))
