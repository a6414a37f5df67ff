"""Parameter registry: what a parameter is, and the gradient its update consumed.

A parameter is an array whose gradient an update consumed (a leaf of the tape, never a loss): its `.grad`
read by an optimizer step, by a launch outside the tape, by a `wp.copy`, or to the host. Its record
(`_Iter.params`) keeps the gradient as it was when read, its value then, and how it was read; a read before
the iteration's backward is a stale read, kept because an update may apply exactly that. Where the update
is a plain step, the parameter's own change cross-checks which gradient it applied (`crosscheck.step`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import warp as wp

from .. import crosscheck, hooks
from ..capture_values import _np, _same_slot, frame_value, name_of
from ..identity import ArraySet

if TYPE_CHECKING:
    from .iterations import _Iter
    from .listener import CaptureListener


class Registry:
    """Which arrays are gradients of which, which are losses, and each iteration's consumed parameters."""

    def __init__(self, capture: CaptureListener) -> None:
        self.c = capture
        self.grad_owner: dict[int, Any] = {}
        # By identity, not id(): freed outputs' addresses are reused by later arrays (a rebuilt parameter).
        self.outputs_written = ArraySet()
        self.tape_written = ArraySet()  # arrays a taped launch writes (outputs=, or inputs its source writes)
        self.loss_ids = ArraySet()
        self.leaf_candidates: dict[int, Any] = {}
        self.named_params: dict[str, Any] = {}
        self.leaf_names: list[str | None] = []
        # Host reads of a .grad that no fresh backward of the reading update precedes: id(grad) -> (grad, values).
        self.early_reads: dict[int, tuple[Any, np.ndarray]] = {}

    # ---------------------------------------------------------------- which array a .grad belongs to
    def owner_of_grad(self, arr):
        owner = self.grad_owner.get(id(arr))
        if owner is None or owner.grad is not arr:
            return None
        if owner in self.loss_ids or owner in self.outputs_written:
            return None
        return owner

    def grad_holder(self, arr):
        """The array whose .grad buffer `arr` is (None when it is no known .grad)."""
        holder = self.grad_owner.get(id(arr)) if isinstance(arr, wp.array) else None
        return holder if holder is not None and holder.grad is arr else None

    def taped_launch(self, call, written: set[int] | None) -> None:
        """What a taped launch writes (never a parameter) and reads with requires_grad (a leaf candidate)."""
        for idx, arg in enumerate(call.args):
            if idx >= len(call.inputs) or (written is not None and idx in written):
                for _, arr in hooks.iter_arrays(arg):
                    self.tape_written.add(arr)
        for out in call.outputs:
            for _, arr in hooks.iter_arrays(out):
                self.outputs_written.add(arr)
                self.leaf_candidates.pop(id(arr), None)
        for arg in call.inputs:
            for _, arr in hooks.iter_arrays(arg):
                if arr.requires_grad and arr not in self.outputs_written:
                    self.leaf_candidates.setdefault(id(arr), arr)

    def find_named_params(self) -> None:
        """`--params NAME ...`: the arrays those names hold in the user's frames, looked up once."""
        c = self.c
        if c.param_names and not self.named_params:
            for n in c.param_names:
                try:
                    v = frame_value(n)
                except (KeyError, AttributeError):
                    continue
                if isinstance(v, wp.array):
                    self.named_params[n] = v

    # ---------------------------------------------------------------- consumption: the gradient used
    def grad_read(self, arr, how: str) -> None:
        c, acct = self.c, self.c.acct
        if arr in self.loss_ids:
            c.obj.seeded_loss_read = True
        holder = self.grad_owner.get(id(arr))
        if holder is not None and holder.grad is arr:
            c.obj.grads_read.append(_np(arr).astype(np.float64).copy())
        owner = self.owner_of_grad(arr)
        if owner is None:
            # Maybe a host read of values (a use the perturbation must precede), maybe an early read of a
            # .grad whose owner is not known yet: recorded as both, each matched later by object identity.
            c.fork.host_read(arr)
        rec = acct.iters.get(acct.it)
        fresh = (rec is not None and rec.backward_calls and acct.phase != "pending"
                 and (owner is None or owner not in acct.updated))
        if not fresh:
            # No backward of the update that will use this read precedes it (or the parameter was already
            # updated): a snapshot of an older gradient. Kept, since an update may apply exactly that.
            self.early_reads[id(arr)] = (arr, _np(arr).astype(np.float64).copy())
            return
        if owner is not None:
            self.early_reads.pop(id(arr), None)
            self.consume(owner, arr, f"host read of its .grad ({how})")

    def param_written(self, arr) -> None:
        """An update writes `arr` (a host assign/copy into it). If the iteration's backward ran but the update
        read no gradient since, the gradient it applies is the last one read before that backward."""
        acct = self.c.acct
        rec = acct.iters.get(acct.it)
        if rec is None or not rec.backward_calls or acct.phase == "pending":
            return
        owned = self.leaf_candidates.get(id(arr)) is arr or rec.owners.get(id(arr)) is arr
        if not owned:
            return
        acct.updated.add(arr)
        early = self.early_reads.pop(id(arr.grad), None) if arr.grad is not None else None
        if id(arr) not in rec.params and early is not None and early[0] is arr.grad:
            self.record_param(rec, arr, early[1], "host read of its .grad BEFORE this iteration's backward: the "
                              "update applies a stale gradient (the previous iteration's, or zeros)", final=True)
            if id(arr) in rec.params:
                rec.params[id(arr)]["stale_read"] = True
                # The tape's own gradient, as this iteration's backward left it: right or wrong apart from the
                # update that applies the stale one.
                rec.params[id(arr)]["tape_grad"] = _np(arr.grad).astype(np.float64).copy()
                acct.consumed_any = True
        if id(arr) in rec.params:
            acct.phase = "consuming"
            acct.update_seen = True
            self.c.fork.loose.clear()

    def optimizer_step(self, opt, grads) -> None:
        acct = self.c.acct
        params = list(getattr(opt, "params", None) or [])
        rec = acct.iters.get(acct.it)
        for p, g in zip(params, list(grads or [])):
            if isinstance(p, wp.array) and isinstance(g, wp.array):
                self.consume(p, g, f"{type(opt).__name__}.step")
                if rec is not None and rec.owners.get(id(p)) is p:
                    rec.params[id(p)]["optimizer"] = True  # the optimizer reads the buffer: no host choice
        if acct.phase == "consuming":
            acct.update_seen = True
            self.c.fork.loose.clear()

    def consume(self, owner, grad, how: str) -> None:
        acct = self.c.acct
        rec = acct.iters.get(acct.it)
        if acct.phase == "pending" or rec is None or not rec.backward_calls:
            return  # no backward in this iteration yet: nothing to consume
        acct.consumed_any = True
        acct.phase = "consuming"
        oid = rec.aliases.get(owner, id(owner))
        if oid not in rec.params:
            self.record_param(rec, owner, grad, how, final=True)
        elif rec.params[oid].get("read_at_call") != rec.backward_calls:
            rec.params[oid]["grads"].append(_np(grad).astype(np.float64).copy())
            rec.params[oid]["read_at_call"] = rec.backward_calls
            if rec.owners[oid] is not owner:
                # Each copy's .grad starts at zero: the update can only apply the reads' sum (a host accumulator).
                rec.params[oid]["zeroed_between"] = True
                rec.params[oid]["how"] = (f"the sum of {len(rec.params[oid]['grads'])} host reads of its .grad, "
                                          "one per backward of this update, each from a fresh copy of it")

    def record_param(self, rec: _Iter, owner, grad, how: str, final: bool) -> None:
        c = self.c
        name = name_of(owner) or f"param{len(rec.params)}"
        if c.param_names and name not in c.param_names and not any(o is owner for o in self.named_params.values()):
            return
        g = (grad if isinstance(grad, np.ndarray) else _np(grad)).astype(np.float64).copy()
        rec.params[id(owner)] = {
            "name": name, "how": how, "grad": g, "grads": [g], "read_at_call": rec.backward_calls,
            "zeroed_between": False, "value": _np(owner).astype(np.float64).copy(),
            "dtype": str(owner.dtype.__name__ if hasattr(owner.dtype, "__name__") else owner.dtype),
            "shape": list(owner.shape), "requires_grad": bool(owner.requires_grad),
        }
        rec.owners[id(owner)] = owner
        if c.objective_name and rec.named_objective is None:
            rec.named_objective = c.obj.named_objective()

    def record_after_backward(self, rec: _Iter) -> None:
        """Without an update to watch, the gradient right after backward is what a caller reads."""
        for owner in list(self.named_params.values()) or list(self.leaf_candidates.values()):
            if owner.grad is not None and owner not in self.loss_ids:
                self.record_param(rec, owner, owner.grad, "read after backward", final=False)

    # ---------------------------------------------------------------- cross-checks against the parameter's change
    def crosscheck_rebuilt(self, role: str, arr) -> None:
        """A new array at a role a parameter of the previous iteration had: that parameter rebuilt from host
        values, so its new values are the update's result."""
        c = self.c
        if c.mode != "capture":
            return
        prev = c.acct.iters.get(c.acct.it - 1)
        if prev is not None:
            for used, r in prev.first_use.items():
                oid = id(used)
                if _same_slot(r, role) and prev.owners.get(oid) is used and used is not arr:
                    self.crosscheck(prev, prev.owners[oid], arr)
                    return

    def crosscheck(self, rec: _Iter | None, owner, new) -> None:
        """Where the update is a plain step, the parameter's own change says which gradient it applied
        (`crosscheck.step`)."""
        if rec is None or self.c.mode != "capture" or rec.owners.get(id(owner)) is not owner:
            return
        p = rec.params[id(owner)]
        if not p.get("crosscheck"):
            crosscheck.step(p, rec.index, self.c.acct.history.get(p["name"], []), _np(new))
