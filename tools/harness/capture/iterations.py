"""Iteration accounting: what an iteration is, the span between two parameter updates.

An iteration ends when, after a `tape.backward`, the gradient is *consumed* (an optimizer step, a launch
outside the tape reading a `.grad`, a host read of a `.grad`, a `wp.copy` from one) and an update follows;
the next one starts at the next taped launch or tape enter. A consumption with no update behind it (a script
that reads the gradient after each per-step backward and sums it on the host) leaves the iteration "pending"
until the next use of a parameter or the next backward says whether the parameter changed. Every backward and
every `.grad` read in between belongs to the same iteration.

Two accountings run side by side: "consume" (`iters`, by updates) and "backward" (`bwd_iters`, one per
backward call), used when the script never consumes a gradient. Each `_Iter` is what one iteration did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..capture_values import _np, _same_slot
from ..identity import ArrayMap, ArraySet

if TYPE_CHECKING:
    from .listener import CaptureListener


class _Iter:
    """What one training iteration did."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.first_use: ArrayMap[str] = ArrayMap()  # array -> role of its first taped use in this iteration
        self.objective = 0.0
        self.seeds: list[str] = []
        self.backward_calls = 0
        self.params: dict[int, dict[str, Any]] = {}  # id(owner) -> record
        self.owners: dict[int, Any] = {}
        self.boundary_values: list[np.ndarray] = []  # non-uniform hand seeds, in order
        # Backward passes seeded only by adjoints handed over from another backward (checkpointed segments):
        # their seeded dot products are not part of the objective, which is the loss of the other passes.
        self.handoff_calls = 0
        self.handoff_seeds: list[str] = []
        self.perturb_at: ArrayMap[str] = ArrayMap()  # array -> where FD perturbs it: its first use of any kind
        self.pre_backward: dict[int, tuple[Any, float]] = {}  # id -> (array, max |grad| before the first backward)
        self.named_objective: float | None = None
        self.nonfinite_loss = False
        # New arrays holding a consumed parameter's unchanged values (rebuilt from host values for another
        # backward of the same update) -> id of the parameter they copy.
        self.aliases: ArrayMap[int] = ArrayMap()


class Iterations:
    """The iteration counters, the phase within an iteration, and each iteration's record."""

    def __init__(self, capture: CaptureListener) -> None:
        self.c = capture
        self.it = 0  # consumption-scheme iteration
        self.bwd = 0  # backward-scheme iteration (index of the next backward call)
        self.phase = "forward"
        self.update_seen = False  # an explicit update (optimizer step, update launch, assign) since the consumption
        self.consumed_any = False
        self.iters: dict[int, _Iter] = {}
        self.bwd_iters: dict[int, _Iter] = {}
        self.updated = ArraySet()  # parameters written by an update since the iteration's backward
        self.pending_uses: ArrayMap[str] = ArrayMap()
        self.history: dict[str, list[tuple[int, np.ndarray]]] = {}  # (iteration, consumed gradient), by name

    def iter(self, table: dict[int, _Iter], i: int) -> _Iter | None:
        if i > self.c.record_until and self.c.mode == "capture":
            return None
        if i not in table:
            table[i] = _Iter(i)
        return table[i]

    def forward_activity(self) -> None:
        """New forward work. After a gradient was consumed it starts the next iteration, unless nothing was
        updated: a script that reads the gradient after each per-step backward and sums it on the host
        updates once per horizon, and those steps are one iteration (the truncation case)."""
        if self.phase == "consuming":
            if self.update_seen or self._updated_in_place():
                self.new_iteration()
            else:
                self.phase = "pending"  # resolved by the next use of a consumed parameter, or by backward
                self.pending_uses = ArrayMap()
        elif self.phase == "backward":
            self.phase = "forward"

    def _updated_in_place(self) -> bool:
        rec = self.iters.get(self.it)
        if rec is None:
            return True
        for oid, owner in rec.owners.items():
            snap = rec.params[oid]["value"]
            if snap.shape != _np(owner).shape or not np.array_equal(snap, _np(owner).astype(np.float64)):
                self.c.reg.crosscheck(rec, owner, owner)  # written in place (its numpy view): the step shows here
                return True
        return not rec.owners  # nothing to compare: every consumption ends an iteration

    def resolve_pending(self, same_iteration: bool) -> None:
        uses, self.pending_uses = self.pending_uses, ArrayMap()
        if same_iteration:
            self.phase = "forward"
        else:
            self.new_iteration()  # a parameter rebuilt as a new array: the old one is never used again
            for arr, role in uses.items():
                self.c.reg.crosscheck_rebuilt(role, arr)
        rec = self.iter(self.iters, self.it)
        if rec is not None:
            for arr, role in uses.items():
                if arr not in rec.first_use:
                    rec.first_use[arr] = role
                    rec.perturb_at[arr] = self.c.fork.perturb_point(role, arr)

    def new_iteration(self) -> None:
        c = self.c
        done = self.iters.get(self.it)
        if done is not None:
            for p in done.params.values():
                g = np.sum(p["grads"], axis=0) if p.get("zeroed_between") else p["grads"][-1]
                self.history.setdefault(p["name"], []).append((done.index, g))
        self.it += 1
        self.phase = "forward"
        self.update_seen = False
        self.updated = ArraySet()
        if c.scheme != "consume":
            return
        if c.mode == "capture" and self.it > c.record_until:
            c.stopped_at = f"start of iteration {self.it}"
            c.s.finish("completed")
        if c.mode == "fd" and c.target is not None and self.it > c.target:
            c.fd_stop()

    # ---------------------------------------------------------------- a taped use of an array
    def note_use(self, role: str, arr) -> None:
        """`arr` used on the tape at `role`: it may resolve a pending iteration, start the next one (a parameter
        rebuilt with new values), or be the first use FD perturbs at."""
        c = self.c
        if self.phase != "pending":
            c.reg.crosscheck_rebuilt(role, arr)
            self._rebuilt_since_backward(role, arr)
        if self.phase == "pending":
            rec = self.iters.get(self.it)
            alias = self._unchanged_copy(rec, role, arr) if rec is not None else None
            if rec is not None and id(arr) in rec.owners and rec.owners[id(arr)] is arr:
                self.resolve_pending(same_iteration=True)  # the unchanged parameter is used again
            elif rec is not None and alias is not None:
                # A new array with the parameter's unchanged values: no update happened, this backward feeds
                # the same update (host-accumulated frames/scenes). FD perturbs it as the parameter itself.
                rec.aliases[arr] = alias
                self.resolve_pending(same_iteration=True)
                if c.mode == "fd":
                    c.fork.perturb_alias(rec.owners[alias], arr)
            else:
                self.pending_uses.setdefault(arr, role)
        for table, i in ((self.iters, self.it), (self.bwd_iters, self.bwd)):
            if table is self.iters and self.phase == "pending":
                continue
            rec = self.iter(table, i)
            if rec is not None and arr not in rec.first_use:
                rec.first_use[arr] = role
                rec.perturb_at[arr] = c.fork.perturb_point(role, arr)
        if arr.grad is not None:
            c.reg.grad_owner[id(arr.grad)] = arr
        if c.mode == "fd":
            c.fork.perturb_at(role, arr)

    def _rebuilt_since_backward(self, role: str, arr) -> None:
        """A backward whose gradient nobody read, then a fresh leaf at a consumed parameter's slot: with the
        parameter's values unchanged it is one more copy for the same update; with new values, the update
        happened (an accumulator that skipped the last read) and the next iteration starts here."""
        c = self.c
        rec = self.iters.get(self.it)
        if rec is None or self.phase not in ("forward", "backward") or not rec.params or arr in rec.first_use \
                or arr in rec.aliases or id(arr) in rec.owners or arr in c.reg.tape_written:
            return
        slots = [rec.first_use.get(owner) for owner in rec.owners.values()]
        if not any(r is not None and _same_slot(r, role) for r in slots):
            return
        alias = self._unchanged_copy(rec, role, arr)
        if alias is not None:
            rec.aliases[arr] = alias
            if c.mode == "fd":
                c.fork.perturb_alias(rec.owners[alias], arr)
            return
        self.new_iteration()
        c.reg.crosscheck_rebuilt(role, arr)

    def _unchanged_copy(self, rec: _Iter, role: str, arr) -> int | None:
        """The consumed parameter `arr` is a fresh copy of: same argument slot as its first use, identical
        (unperturbed) values. None when there is none."""
        new = _np(arr)
        for oid, owner in rec.owners.items():
            first = rec.first_use.get(owner)
            if owner is arr or first is None or not _same_slot(first, role):
                continue
            perturbed = self.c.fork.deltas.get(owner)
            base = perturbed[0] if perturbed is not None else rec.params[oid]["value"]
            if new.shape == base.shape and np.array_equal(new.astype(np.float64), base):
                return oid
        return None

    # ---------------------------------------------------------------- backward: one more in this iteration
    def start_backward(self) -> None:
        """A backward begins: a pending iteration is resolved (the parameters were rebuilt) and a consumed one ends."""
        if self.phase == "pending":
            self.resolve_pending(same_iteration=False)
        elif self.phase == "consuming":
            self.new_iteration()

    def record_backward(self, pre_backward: list, value: float, seeds: list[str], handoff: bool,
                        boundary: list[np.ndarray]) -> None:
        """Count a backward, and what it seeded, in the current iteration of both accountings."""
        for table, i in ((self.iters, self.it), (self.bwd_iters, self.bwd)):
            rec = self.iter(table, i)
            if rec is None:
                continue
            if rec.backward_calls == 0:
                # Gradient state belongs to the buffer, not to the role: an array rebuilt this iteration starts
                # at zero whatever its predecessor held. Only a buffer this backward is about to add into, and
                # that already holds a gradient, makes the update read more than this iteration's gradient.
                for arr in pre_backward:
                    g = np.abs(_np(arr.grad).astype(np.float64))
                    if g.size and float(g.max()) > 0:
                        rec.pre_backward[id(arr)] = (arr, float(g.max()))
            if rec.backward_calls > 0 and table is self.iters:
                for oid, owner in rec.owners.items():
                    # Zeroed between two backward calls of one update: the update uses the sum of the reads.
                    if owner.grad is not None and not np.any(_np(owner.grad)):
                        rec.params[oid]["zeroed_between"] = True
            rec.backward_calls += 1
            if handoff:
                # Seeded only by adjoints handed over from another backward: the seeded dot product moves with
                # the parameters but is no objective. The objective is the loss the other passes seed; FD of it
                # checks the whole hand-composed backward end to end through the gradient the update applies.
                rec.handoff_calls += 1
                rec.handoff_seeds.extend(seeds)
            else:
                rec.objective += value
                rec.seeds.extend(seeds)
            if not handoff:
                rec.boundary_values.extend(boundary)
            rec.nonfinite_loss |= not np.isfinite(value)

    def stale(self, rec: _Iter) -> dict[str, float]:
        """Consumed parameters whose own buffer held a gradient before this iteration's backward added to it."""
        out = {}
        for oid, owner in rec.owners.items():
            before = rec.pre_backward.get(oid)
            if before is not None and before[0] is owner and before[1] > 0:
                out[rec.params[oid]["name"]] = before[1]
        return out

    def at_target(self, table: dict[int, _Iter]) -> _Iter | None:
        return table.get(self.c.target) if self.c.target is not None else None
