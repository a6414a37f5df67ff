"""Zero-config capture and FD evaluation of a user's own training script (runs in the subprocess).

The script's training iterations are read off its use of Warp:

* an iteration ends when, after a `tape.backward`, the gradient is *consumed*: a `warp.optim`
  optimizer step, a launch outside the tape that reads a `.grad` array, a host read of a `.grad`
  (`.numpy()`, `wp.to_torch`) or a `wp.copy` from one;
* the next iteration starts at the next taped launch or tape enter.

Parameters are the arrays whose gradient was consumed (leaves of the tape, never the loss). Each is
identified across runs by its *role*: the first taped launch argument (kernel, global occurrence,
argument index, struct field) or copy through which the iteration used it, so scripts that build a new
parameter array every iteration are followed too.

`CaptureListener` in "capture" mode records the objective seeded into `backward`, the parameters and
the gradient the optimizer consumed at iteration T. In "fd" mode it adds a perturbation to each
parameter at its first use in iteration T, and reports the objective at T's end (then stops the run).
An FD hub ("fd" with `serve`) perturbs nothing itself: at the first use of any role it serves (or at T's
end, or the script's, when none is used) it forks one evaluation per request (`serve.py`), and each
forked process goes on from there as a perturbed "fd" run.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import warp as wp

from . import crosscheck, hooks, torch_follow, warp_compat
from .capture_values import (  # name_of, frame_value, scalar_of are also capture's API to other listeners
    _np,
    _same_slot,
    _seed_kind,
    _tape_arrays,
    _written_args,
    frame_value,
    name_of,
    scalar_of,
    written_arrays,
)
from .identity import ArrayMap, ArraySet
from .protocol import (
    CaptureConfig,
    CapturedIteration,
    CapturedParam,
    CaptureReport,
    FdConfig,
    FdOptions,
    FdReport,
    RunCounts,
    ServeOptions,
)

if TYPE_CHECKING:
    from .main import Session


def _digest(arr) -> bytes | None:
    """A fingerprint of a CPU array's values: a later write through its numpy view shows as a new digest. None
    off the CPU, where `.numpy()` is a copy and every write goes through a hooked call (assign, copy, launch)."""
    if not (arr.device.is_cpu and arr.is_contiguous):
        return None
    return hashlib.blake2b(np.ascontiguousarray(_np(arr)).data, digest_size=16).digest()


# Seed kinds of an adjoint handed over from another backward pass: read to the host and seeded back, or kept on
# the device (copied from one .grad into another, or passed as grads= straight from another array's .grad).
_READ_BACK = "a gradient read after another backward"
_ON_DEVICE = "another array's .grad, handed over from another backward"


class RunListener(hooks.Listener):
    """Counts what a plain run did with Warp (launches, tapes, backward calls, updates)."""

    key = "run"

    def __init__(self, session: Session) -> None:
        self.s = session
        self.launches = 0
        self.taped_launches = 0
        self.tapes = 0
        self.backward_calls = 0
        self.optimizer_steps = 0

    def before_launch(self, call: hooks.LaunchCall) -> None:
        self.launches += 1
        self.taped_launches += call.taped

    def tape_enter(self, tape) -> None:
        self.tapes += 1

    def before_backward(self, tape, loss, grads) -> None:
        self.backward_calls += 1

    def optimizer_step(self, opt, grads) -> None:
        self.optimizer_steps += 1

    def result(self) -> RunCounts:
        return RunCounts(launches=self.launches, taped_launches=self.taped_launches, tapes=self.tapes,
                         backward_calls=self.backward_calls, optimizer_steps=self.optimizer_steps)


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


class CaptureListener(hooks.Listener):
    key = "capture"

    def __init__(self, session: Session) -> None:
        self.s = session
        config = session.config
        if not isinstance(config, (CaptureConfig, FdConfig)):
            raise TypeError(f"CaptureListener runs in mode capture or fd, not {config.mode!r}")
        self.mode: Literal["capture", "fd"] = config.mode
        spec = config.capture
        self.target: int | None = spec.iteration
        self.scheme: str = spec.scheme  # "consume" | "backward"
        self.param_names: list[str] = list(spec.params)
        self.objective_name: str | None = spec.objective
        self.outdir = Path(config.outdir or ".")
        self.record_until = (self.target if self.target is not None else 2)
        self.it = 0  # consumption-scheme iteration
        self.bwd = 0  # backward-scheme iteration (index of the next backward call)
        self.phase = "forward"
        self.update_seen = False  # an explicit update (optimizer step, update launch, assign) since the consumption
        self.consumed_any = False
        self.kernel_occ: dict[str, int] = {}
        self.copy_occ = 0
        self.iters: dict[int, _Iter] = {}
        self.bwd_iters: dict[int, _Iter] = {}
        self.grad_owner: dict[int, Any] = {}
        # By identity, not id(): freed outputs' addresses are reused by later arrays (a rebuilt parameter).
        self.outputs_written = ArraySet()
        self.tape_written = ArraySet()  # arrays a taped launch writes (outputs=, or inputs its source writes)
        self.loss_ids = ArraySet()
        self.seeded_loss_read = False  # a host read of an array seeded into backward, after that backward
        self.leaf_candidates: dict[int, Any] = {}
        self.named_params: dict[str, Any] = {}
        self.leaf_names: list[str | None] = []
        self.notes: list[str] = []
        self.stopped_at: str | None = None
        self._last_boundary: list[np.ndarray] = []
        # .grad buffers the script filled from another array's .grad outside any tape (wp.copy / assign): an
        # adjoint handed over on the device between backward passes, whatever its values look like.
        self.handed = ArraySet()
        self.unseeded_backward = False
        # Host reads of a .grad that no fresh backward of the reading update precedes: id(grad) -> (grad, values).
        self.early_reads: dict[int, tuple[Any, np.ndarray]] = {}
        # The last gradients the script read to the host: a later hand seed equal to one is a handed-over adjoint.
        self.grads_read: collections.deque[np.ndarray] = collections.deque(maxlen=64)
        self.updated = ArraySet()  # parameters written by an update since the iteration's backward
        self.capturing = False
        # Uses outside the tape since the last update or backward: id -> (role, array, digest of its values then).
        self.loose: dict[int, tuple[str, Any, bytes | None]] = {}
        self.untaped_occ: dict[str, int] = {}
        self.untaped_copy_occ = 0
        self.host_read_occ = 0
        self.pending_uses: ArrayMap[str] = ArrayMap()
        self.history: dict[str, list[tuple[int, np.ndarray]]] = {}  # (iteration, consumed gradient), by name
        self.graph_events: list[str] = []  # what was recorded into, or replayed from, a captured graph
        # fd mode
        self.perturb: dict[str, np.ndarray] = {}
        self.applied: dict[str, np.ndarray] = {}
        self.deltas: ArrayMap[tuple[np.ndarray, np.ndarray]] = ArrayMap()  # perturbed array -> (before, delta)
        for p in spec.perturb if isinstance(spec, FdOptions) else []:
            self.perturb[p.role] = np.load(p.delta)
        # An FD hub: forks its evaluations at the first use of any of these roles (`serve`).
        self.serving: ServeOptions | None = spec.serve if isinstance(spec, FdOptions) else None
        self.launching: hooks.LaunchCall | None = None  # the taped launch whose arguments are being noted
        self.torch = torch_follow.TorchFollow(self)  # torch losses and torch.optim steps (torch_follow)

    # ---------------------------------------------------------------- iteration bookkeeping
    def _cur(self) -> int:
        return self.it if self.scheme == "consume" else self.bwd

    def _iter(self, table: dict[int, _Iter], i: int) -> _Iter | None:
        if i > self.record_until and self.mode == "capture":
            return None
        if i not in table:
            table[i] = _Iter(i)
        return table[i]

    def _forward_activity(self) -> None:
        """New forward work. After a gradient was consumed it starts the next iteration, unless nothing was
        updated: a script that reads the gradient after each per-step backward and sums it on the host
        updates once per horizon, and those steps are one iteration (the truncation case)."""
        if self.phase == "consuming":
            if self.update_seen or self._updated_in_place():
                self._new_iteration()
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
                self._crosscheck(rec, owner, owner)  # written in place (its numpy view): the step shows here
                return True
        return not rec.owners  # nothing to compare: every consumption ends an iteration

    def _resolve_pending(self, same_iteration: bool) -> None:
        uses, self.pending_uses = self.pending_uses, ArrayMap()
        if same_iteration:
            self.phase = "forward"
        else:
            self._new_iteration()  # a parameter rebuilt as a new array: the old one is never used again
            for arr, role in uses.items():
                self._crosscheck_rebuilt(role, arr)
        rec = self._iter(self.iters, self.it)
        if rec is not None:
            for arr, role in uses.items():
                if arr not in rec.first_use:
                    rec.first_use[arr] = role
                    rec.perturb_at[arr] = self._perturb_point(role, arr)

    def _new_iteration(self) -> None:
        done = self.iters.get(self.it)
        if done is not None:
            for p in done.params.values():
                g = np.sum(p["grads"], axis=0) if p.get("zeroed_between") else p["grads"][-1]
                self.history.setdefault(p["name"], []).append((done.index, g))
        self.it += 1
        self.phase = "forward"
        self.update_seen = False
        self.updated = ArraySet()
        if self.scheme != "consume":
            return
        if self.mode == "capture" and self.it > self.record_until:
            self.stopped_at = f"start of iteration {self.it}"
            self.s.finish("completed")
        if self.mode == "fd" and self.target is not None and self.it > self.target:
            self._fd_stop()

    # ---------------------------------------------------------------- roles and perturbation
    def _roles_of_launch(self, call: hooks.LaunchCall):
        key = call.kernel.key
        occ = self.kernel_occ.get(key, 0)
        self.kernel_occ[key] = occ + 1
        for idx, arg in enumerate(call.args):
            for path, arr in hooks.iter_arrays(arg):
                yield f"launch:{key}:{occ}:{idx}{'.' + path if path else ''}", arr

    def _loose_use(self, role: str, arr) -> None:
        """A use outside the tape (an untaped launch or copy reading it, a host read) before the iteration's
        taped use: the perturbation must come before it too, or FD misses the paths AD misses as well."""
        if self.mode == "fd":
            self._perturb_at(role, arr)
        seen = self.loose.get(id(arr))
        if seen is None or seen[1] is not arr:
            # Only capture chooses perturbation points; FD runs perturb at the roles capture chose.
            self.loose[id(arr)] = (role, arr, _digest(arr) if self.mode == "capture" else None)

    def _perturb_point(self, role: str, arr) -> str:
        """Where FD perturbs `arr`, first used on the tape at `role`: at its earlier use outside the tape, unless
        the host wrote it since (`p.assign(...)`, a write through its numpy view, an untaped kernel): the
        perturbation must follow the write that sets this iteration's value, or the write erases it."""
        loose = self.loose.get(id(arr))
        if loose is None or loose[1] is not arr:
            return role
        if loose[2] is not None and loose[2] != _digest(arr):
            return role
        return loose[0]

    def _note_use(self, role: str, arr) -> None:
        if self.phase != "pending":
            self._crosscheck_rebuilt(role, arr)
            self._rebuilt_since_backward(role, arr)
        if self.phase == "pending":
            rec = self.iters.get(self.it)
            alias = self._unchanged_copy(rec, role, arr) if rec is not None else None
            if rec is not None and id(arr) in rec.owners and rec.owners[id(arr)] is arr:
                self._resolve_pending(same_iteration=True)  # the unchanged parameter is used again
            elif rec is not None and alias is not None:
                # A new array with the parameter's unchanged values: no update happened, this backward feeds
                # the same update (host-accumulated frames/scenes). FD perturbs it as the parameter itself.
                rec.aliases[arr] = alias
                self._resolve_pending(same_iteration=True)
                if self.mode == "fd":
                    self._perturb_alias(rec.owners[alias], arr)
            else:
                self.pending_uses.setdefault(arr, role)
        for table, i in ((self.iters, self.it), (self.bwd_iters, self.bwd)):
            if table is self.iters and self.phase == "pending":
                continue
            rec = self._iter(table, i)
            if rec is not None and arr not in rec.first_use:
                rec.first_use[arr] = role
                rec.perturb_at[arr] = self._perturb_point(role, arr)
        if arr.grad is not None:
            self.grad_owner[id(arr.grad)] = arr
        if self.mode == "fd":
            self._perturb_at(role, arr)

    def _rebuilt_since_backward(self, role: str, arr) -> None:
        """A backward whose gradient nobody read, then a fresh leaf at a consumed parameter's slot: with the
        parameter's values unchanged it is one more copy for the same update; with new values, the update
        happened (an accumulator that skipped the last read) and the next iteration starts here."""
        rec = self.iters.get(self.it)
        if rec is None or self.phase not in ("forward", "backward") or not rec.params or arr in rec.first_use \
                or arr in rec.aliases or id(arr) in rec.owners or arr in self.tape_written:
            return
        slots = [rec.first_use.get(owner) for owner in rec.owners.values()]
        if not any(r is not None and _same_slot(r, role) for r in slots):
            return
        alias = self._unchanged_copy(rec, role, arr)
        if alias is not None:
            rec.aliases[arr] = alias
            if self.mode == "fd":
                self._perturb_alias(rec.owners[alias], arr)
            return
        self._new_iteration()
        self._crosscheck_rebuilt(role, arr)

    def _unchanged_copy(self, rec: _Iter, role: str, arr) -> int | None:
        """The consumed parameter `arr` is a fresh copy of: same argument slot as its first use, identical
        (unperturbed) values. None when there is none."""
        new = _np(arr)
        for oid, owner in rec.owners.items():
            first = rec.first_use.get(owner)
            if owner is arr or first is None or not _same_slot(first, role):
                continue
            perturbed = self.deltas.get(owner)
            base = perturbed[0] if perturbed is not None else rec.params[oid]["value"]
            if new.shape == base.shape and np.array_equal(new.astype(np.float64), base):
                return oid
        return None

    def _perturb_alias(self, owner, arr) -> None:
        perturbed = self.deltas.get(owner)
        if perturbed is not None:
            self._add(arr, perturbed[1])

    def _perturb_at(self, role: str, arr) -> None:
        """A use at `role`: where an FD run adds its perturbation, and where a hub forks its evaluations."""
        if self.serving is not None and role in self.serving.roles:
            self._serve(role)
        if role in self.perturb:
            self._apply(role, arr)

    def _serve(self, at: str) -> None:
        """Fork the hub's evaluations here (`serve`); returns only in an evaluation, with its perturbation."""
        from . import serve

        options, self.serving = self.serving, None
        if options is None:
            return
        if self.launching is not None:
            # Forking inside a launch whose module is not loaded yet (the first iteration): load it once here,
            # as the launch is about to, instead of once in every evaluation.
            with contextlib.suppress(Exception):  # the launch itself then raises what the load would
                warp_compat.load_launch_module(self.launching.kernel, self.launching.options)
        evaluation = serve.serve(self.s, options, at)
        self.perturb = {p.role: np.load(p.delta) for p in evaluation.perturb}
        self.outdir = Path(evaluation.outdir)

    def _apply(self, role: str, arr) -> None:
        self.applied[role] = self._add(arr, self.perturb.pop(role))

    def _add(self, arr, delta: np.ndarray) -> np.ndarray:
        """Add `delta` to `arr`'s storage; returns what was really added (after rounding to its dtype)."""
        with warp_compat.no_active_tape():
            hooks.STATE.in_hook += 1
            try:
                before = _np(arr).astype(np.float64).copy()
                if arr.device.is_cpu and arr.is_contiguous:
                    view = _np(arr)
                    view += delta.reshape(view.shape).astype(view.dtype)
                else:
                    arr.assign((before + delta.reshape(before.shape)).astype(_np(arr).dtype))
                after = _np(arr).astype(np.float64)
                self.deltas[arr] = (before, after - before)
                return after - before
            finally:
                hooks.STATE.in_hook -= 1

    def before_launch(self, call: hooks.LaunchCall) -> None:
        if call.in_backward:
            return
        if call.taped:
            self._forward_activity()
            self.launching = call
            for role, arr in self._roles_of_launch(call):
                self._note_use(role, arr)
            self.launching = None
            written = _written_args(call.kernel)
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
        elif not call.in_optimizer:
            rec = self.iters.get(self.it)
            written = _written_args(call.kernel)
            key = call.kernel.key
            occ = self.untaped_occ.get(key, 0)
            self.untaped_occ[key] = occ + 1
            for idx, arg in enumerate(call.args):
                for path, arr in hooks.iter_arrays(arg):
                    owner = self._owner_of_grad(arr)
                    if owner is not None:
                        self._consume(owner, arr, "a launch outside the tape reads its .grad")
                        self.update_seen = self.update_seen or self.phase == "consuming"
                        self.loose.clear()  # an update: uses before it belong to the iteration that ends here
                    elif self.phase == "consuming" and rec is not None and rec.owners.get(id(arr)) is arr:
                        self.update_seen = True
                        self.loose.clear()
                    elif idx < len(call.inputs) and (written is None or idx not in written):
                        self._loose_use(f"untaped:{key}:{occ}:{idx}{'.' + path if path else ''}", arr)

    def before_copy(self, call: hooks.CopyCall) -> None:
        if call.in_backward:
            return
        if call.tape is not None:
            self._forward_activity()
            role = f"copy:{self.copy_occ}:src"
            self.copy_occ += 1
            if isinstance(call.src, wp.array):
                self._note_use(role, call.src)
        else:
            if self._grad_holder(call.dest) is not None and self._grad_holder(call.src) is not None:
                # One array's .grad copied into another's: a boundary adjoint handed to the next backward pass
                # (hand-written checkpointing), not a gradient an update consumes.
                self.handed.add(call.dest)
                return
            owner = self._owner_of_grad(call.src) if isinstance(call.src, wp.array) else None
            if owner is not None:
                self._consume(owner, call.src, "wp.copy from its .grad")
            elif isinstance(call.src, wp.array):
                self._loose_use(f"untaped-copy:{self.untaped_copy_occ}:src", call.src)
                self.untaped_copy_occ += 1
            if isinstance(call.dest, wp.array):
                self._param_written(call.dest)  # p.assign(...) / wp.copy(p, ...) outside the tape
                # Uses before the write saw the values it replaces: the perturbation goes after it.
                seen = self.loose.get(id(call.dest))
                if seen is not None and seen[1] is call.dest:
                    del self.loose[id(call.dest)]

    def after_copy(self, call: hooks.CopyCall) -> None:
        if not call.in_backward and call.tape is None and isinstance(call.dest, wp.array):
            self._crosscheck(self.iters.get(self.it), call.dest, call.dest)

    def after_launch(self, call: hooks.LaunchCall) -> None:
        if call.in_backward or call.taped or call.in_optimizer:
            return
        for arg in call.args:
            for _, arr in hooks.iter_arrays(arg):
                self._crosscheck(self.iters.get(self.it), arr, arr)

    def _crosscheck_rebuilt(self, role: str, arr) -> None:
        """A new array at a role a parameter of the previous iteration had: that parameter rebuilt from host
        values, so its new values are the update's result."""
        if self.mode != "capture":
            return
        prev = self.iters.get(self.it - 1)
        if prev is not None:
            for used, r in prev.first_use.items():
                oid = id(used)
                if _same_slot(r, role) and prev.owners.get(oid) is used and used is not arr:
                    self._crosscheck(prev, prev.owners[oid], arr)
                    return

    def _crosscheck(self, rec: _Iter | None, owner, new) -> None:
        """Where the update is a plain step, the parameter's own change says which gradient it applied
        (`crosscheck.step`)."""
        if rec is None or self.mode != "capture" or rec.owners.get(id(owner)) is not owner:
            return
        p = rec.params[id(owner)]
        if not p.get("crosscheck"):
            crosscheck.step(p, rec.index, self.history.get(p["name"], []), _np(new))

    def tape_enter(self, tape) -> None:
        self._forward_activity()

    def graph_capture(self, active: bool) -> None:
        self.capturing = active

    def graph_launch(self, graph) -> None:
        # Only a replay the hooks cannot follow reaches here (see graph_replay): the reason is the refusal.
        self.graph_events.append(hooks.graph_decline(graph) or "wp.capture_launch replays a captured graph")

    # ---------------------------------------------------------------- backward: the objective
    def before_backward(self, tape, loss, grads) -> None:
        if self.capturing:
            self.graph_events.append("tape.backward recorded into a captured graph (it runs only on replay)")
        if self.phase == "pending":
            self._resolve_pending(same_iteration=False)
        elif self.phase == "consuming":
            self._new_iteration()
        written = written_arrays(tape)
        written_ids = {id(a) for a in written}
        pre_backward = [a for a in _tape_arrays(tape) if a.grad is not None and id(a) not in written_ids
                        and (loss is None or a is not loss)]
        self.loose.clear()  # after the pending uses are resolved: they may need their loose uses
        self._last_boundary = []
        value, seeds = self._seeded_value(written, loss, grads)
        # Only an identity hand-off is certain: a seed merely equal to a gradient read earlier may be a loss seed
        # of 1 after a read of a loss's .grad; those stay with the non-uniform seeds, judged across iterations.
        handoff = bool(seeds) and all(_ON_DEVICE in sd for sd in seeds)
        if not self.leaf_names:
            # Named here, while the user's frames are alive: the ambiguity message lists them.
            self.leaf_names = [name_of(a) for a in self.leaf_candidates.values()][:20]
        for table, i in ((self.iters, self.it), (self.bwd_iters, self.bwd)):
            rec = self._iter(table, i)
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
                rec.boundary_values.extend(self._last_boundary)
            rec.nonfinite_loss |= not np.isfinite(value)
        if self.param_names and not self.named_params:
            for n in self.param_names:
                try:
                    v = frame_value(n)
                except (KeyError, AttributeError):
                    continue
                if isinstance(v, wp.array):
                    self.named_params[n] = v
        if self.mode == "fd" and self.scheme == "backward" and self.bwd == self.target:
            self._fd_stop()
        self.phase = "backward"

    def after_backward(self, tape, loss, grads) -> None:
        if self.scheme == "backward" or not self.consumed_any:
            rec = self._iter(self.bwd_iters, self.bwd)
            if rec is not None:
                # Without an update to watch, the gradient right after backward is what a caller reads.
                for owner in list(self.named_params.values()) or list(self.leaf_candidates.values()):
                    if owner.grad is not None and owner not in self.loss_ids:
                        self._record_param(rec, owner, owner.grad, "read after backward", final=False)
        self.bwd += 1

    def _seeded_value(self, written: list, loss, grads) -> tuple[float, list[str]]:
        if loss is not None:
            self.loss_ids.add(loss)
            self.leaf_candidates.pop(id(loss), None)
            return scalar_of(loss), [f"tape.backward(loss={name_of(loss) or 'loss'})"]
        if grads:
            total, seeds = 0.0, []
            for arr, seed in grads.items():
                self.loss_ids.add(arr)
                self.leaf_candidates.pop(id(arr), None)
                sv = _np(seed).astype(np.float64)
                total += float(np.sum(_np(arr).astype(np.float64) * sv))
                holder = self._grad_holder(seed) if isinstance(seed, wp.array) else None
                kind = f"boundary seed ({_ON_DEVICE})" if holder is not None and holder is not arr else \
                    self._seed_kind(sv)
                seeds.append(f"grads={{{name_of(arr) or 'array'}: {kind}}}")
                if kind.startswith("boundary seed"):
                    self._last_boundary.append(sv.copy())
            return total, seeds
        # Seeded by hand (`x.grad.fill_(1)`, `.grad.assign(...)`): the seeds are the nonzero grads of
        # arrays the tape writes (users often pass outputs in `inputs=`, so writes are read off the kernel
        # source); their dot product with the values is the objective being differentiated.
        total, seeds = 0.0, []
        for arr in written:
            if arr.grad is None or arr in self.loss_ids:
                continue
            g = _np(arr.grad).astype(np.float64)
            if np.any(g != 0):
                self.loss_ids.add(arr)
                self.leaf_candidates.pop(id(arr), None)
                total += float(np.sum(g * _np(arr).astype(np.float64)))
                kind = f"boundary seed ({_ON_DEVICE})" if arr.grad in self.handed else self._seed_kind(g)
                seeds.append(f"hand-seeded {name_of(arr) or 'array'}.grad ({kind})")
                if kind.startswith("boundary seed"):
                    self._last_boundary.append(g.copy())
        if not seeds:
            self.notes.append("tape.backward() was called with no loss, no grads= and no nonzero seed gradient")
            self.unseeded_backward = True
        return total, seeds

    # ---------------------------------------------------------------- consumption: the gradient used
    def _owner_of_grad(self, arr):
        owner = self.grad_owner.get(id(arr))
        if owner is None or owner.grad is not arr:
            return None
        if owner in self.loss_ids or owner in self.outputs_written:
            return None
        return owner

    def _grad_holder(self, arr):
        """The array whose .grad buffer `arr` is (None when it is no known .grad)."""
        holder = self.grad_owner.get(id(arr)) if isinstance(arr, wp.array) else None
        return holder if holder is not None and holder.grad is arr else None

    def _seed_kind(self, seed: np.ndarray) -> str:
        """`_seed_kind`, except that a seed equal to a gradient the script read after an earlier backward is an
        adjoint handed over between backward passes (hand-written checkpointing), whatever its shape: a
        one-element or uniform adjoint looks like a loss seed but is not one."""
        if np.any(seed) and any(r.shape == seed.shape and np.array_equal(r, seed) for r in self.grads_read):
            return f"boundary seed ({_READ_BACK})"
        return _seed_kind(seed)

    def grad_read(self, arr, how: str) -> None:
        if arr in self.loss_ids:
            self.seeded_loss_read = True
        holder = self.grad_owner.get(id(arr))
        if holder is not None and holder.grad is arr:
            self.grads_read.append(_np(arr).astype(np.float64).copy())
        owner = self._owner_of_grad(arr)
        if owner is None:
            # Maybe a host read of values (a use the perturbation must precede), maybe an early read of a
            # .grad whose owner is not known yet: recorded as both, each matched later by object identity.
            self._loose_use(f"host-read:{self.host_read_occ}", arr)
            self.host_read_occ += 1
        rec = self.iters.get(self.it)
        fresh = (rec is not None and rec.backward_calls and self.phase != "pending"
                 and (owner is None or owner not in self.updated))
        if not fresh:
            # No backward of the update that will use this read precedes it (or the parameter was already
            # updated): a snapshot of an older gradient. Kept, since an update may apply exactly that.
            self.early_reads[id(arr)] = (arr, _np(arr).astype(np.float64).copy())
            return
        if owner is not None:
            self.early_reads.pop(id(arr), None)
            self._consume(owner, arr, f"host read of its .grad ({how})")

    def _param_written(self, arr) -> None:
        """An update writes `arr` (a host assign/copy into it). If the iteration's backward ran but the update
        read no gradient since, the gradient it applies is the last one read before that backward."""
        rec = self.iters.get(self.it)
        if rec is None or not rec.backward_calls or self.phase == "pending":
            return
        owned = self.leaf_candidates.get(id(arr)) is arr or rec.owners.get(id(arr)) is arr
        if not owned:
            return
        self.updated.add(arr)
        early = self.early_reads.pop(id(arr.grad), None) if arr.grad is not None else None
        if id(arr) not in rec.params and early is not None and early[0] is arr.grad:
            self._record_param(rec, arr, early[1], "host read of its .grad BEFORE this iteration's backward: the "
                               "update applies a stale gradient (the previous iteration's, or zeros)", final=True)
            if id(arr) in rec.params:
                rec.params[id(arr)]["stale_read"] = True
                # The tape's own gradient, as this iteration's backward left it: right or wrong apart from the
                # update that applies the stale one.
                rec.params[id(arr)]["tape_grad"] = _np(arr.grad).astype(np.float64).copy()
                self.consumed_any = True
        if id(arr) in rec.params:
            self.phase = "consuming"
            self.update_seen = True
            self.loose.clear()

    def optimizer_step(self, opt, grads) -> None:
        params = list(getattr(opt, "params", None) or [])
        rec = self.iters.get(self.it)
        for p, g in zip(params, list(grads or [])):
            if isinstance(p, wp.array) and isinstance(g, wp.array):
                self._consume(p, g, f"{type(opt).__name__}.step")
                if rec is not None and rec.owners.get(id(p)) is p:
                    rec.params[id(p)]["optimizer"] = True  # the optimizer reads the buffer: no host choice
        if self.phase == "consuming":
            self.update_seen = True
            self.loose.clear()

    def _consume(self, owner, grad, how: str) -> None:
        rec = self.iters.get(self.it)
        if self.phase == "pending" or rec is None or not rec.backward_calls:
            return  # no backward in this iteration yet: nothing to consume
        self.consumed_any = True
        self.phase = "consuming"
        oid = rec.aliases.get(owner, id(owner))
        if oid not in rec.params:
            self._record_param(rec, owner, grad, how, final=True)
        elif rec.params[oid].get("read_at_call") != rec.backward_calls:
            rec.params[oid]["grads"].append(_np(grad).astype(np.float64).copy())
            rec.params[oid]["read_at_call"] = rec.backward_calls
            if rec.owners[oid] is not owner:
                # Each copy's .grad starts at zero: the update can only apply the reads' sum (a host accumulator).
                rec.params[oid]["zeroed_between"] = True
                rec.params[oid]["how"] = (f"the sum of {len(rec.params[oid]['grads'])} host reads of its .grad, "
                                          "one per backward of this update, each from a fresh copy of it")

    def _record_param(self, rec: _Iter, owner, grad, how: str, final: bool) -> None:
        name = name_of(owner) or f"param{len(rec.params)}"
        if self.param_names and name not in self.param_names and not any(o is owner for o in self.named_params.values()):
            return
        g = (grad if isinstance(grad, np.ndarray) else _np(grad)).astype(np.float64).copy()
        rec.params[id(owner)] = {
            "name": name, "how": how, "grad": g, "grads": [g], "read_at_call": rec.backward_calls,
            "zeroed_between": False, "value": _np(owner).astype(np.float64).copy(),
            "dtype": str(owner.dtype.__name__ if hasattr(owner.dtype, "__name__") else owner.dtype),
            "shape": list(owner.shape), "requires_grad": bool(owner.requires_grad),
        }
        rec.owners[id(owner)] = owner
        if self.objective_name and rec.named_objective is None:
            rec.named_objective = self._named_objective()

    def _named_objective(self) -> float | None:
        if self.objective_name is None:
            return None
        try:
            return scalar_of(frame_value(self.objective_name))
        except (KeyError, AttributeError, TypeError, ValueError) as e:
            self.notes.append(f"--objective {self.objective_name}: not found in the script's frames ({e})")
            return None

    def _handed_over(self, table: dict[int, _Iter]) -> list[str]:
        """Non-uniform hand seeds that are adjoints handed from one backward to another (checkpointing), not a
        fixed weighting of the terms: a weighting repeats unchanged in every iteration, a handed-over adjoint
        changes with the parameters. With a single iteration to compare, it cannot be told apart: handed over."""
        recs = [r for r in table.values() if r.backward_calls]
        seqs = [r.boundary_values for r in recs]
        if not any(seqs):
            return []
        fixed = len(recs) >= 2 and all(len(q) == len(seqs[0]) for q in seqs) and all(
            a.shape == b.shape and np.array_equal(a, b) for q in seqs[1:] for a, b in zip(seqs[0], q))
        if fixed:
            return []
        return sorted({sd for r in recs for sd in r.seeds if "boundary seed" in sd})

    def _boundary_seeds(self, table: dict[int, _Iter]) -> list[str]:
        """Every seed that hands an adjoint from one backward pass to another, in any recorded iteration of either
        accounting: the passes of one hand-written backward may fall into different accounted iterations (a
        boundary read to the host looks like a consumption), and one piece of it must never be judged alone."""
        handed = {sd for t in (self.iters, self.bwd_iters) for r in t.values() for sd in r.handoff_seeds}
        return sorted(set(self._handed_over(table)) | handed)

    def _stale(self, rec: _Iter) -> dict[str, float]:
        """Consumed parameters whose own buffer held a gradient before this iteration's backward added to it."""
        out = {}
        for oid, owner in rec.owners.items():
            before = rec.pre_backward.get(oid)
            if before is not None and before[0] is owner and before[1] > 0:
                out[rec.params[oid]["name"]] = before[1]
        return out

    # ---------------------------------------------------------------- fd mode
    def _fd_stop(self) -> None:
        self._serve(f"the end of iteration {self.target}")  # a hub none of whose roles was used: fork here
        self.stopped_at = f"iteration {self.target}"
        self.s.finish("completed")

    def _at_target(self, table: dict[int, _Iter]) -> _Iter | None:
        return table.get(self.target) if self.target is not None else None

    def script_end(self) -> None:
        if self.mode == "fd":
            self._serve("the end of the script")
            rec = self._at_target(self.iters) if self.scheme == "consume" else None
            # The last iteration ends with the script: it is complete if its gradient was consumed.
            self.stopped_at = f"iteration {self.target} (script end)" if rec is not None and rec.params and \
                self.it == self.target else "script end"

    # ---------------------------------------------------------------- result
    def result(self) -> CaptureReport | FdReport:
        if self.mode == "fd":
            return self._fd_report()
        return self._capture_report()

    def _fd_report(self) -> FdReport:
        table = self.iters if self.scheme == "consume" else self.bwd_iters
        rec = self._at_target(table)
        obj = None
        if rec is not None:
            obj = rec.named_objective if self.objective_name else rec.objective
            if self.objective_name and obj is None:
                obj = self._named_objective()
        applied = {}
        for role, d in self.applied.items():
            path = self.outdir / f"applied_{abs(hash(role))}.npy"
            np.save(path, d)
            applied[role] = str(path)
        return FdReport(objective=obj, stopped_at=self.stopped_at,
                        reached=bool(self.stopped_at and self.stopped_at.startswith("iteration")), applied=applied,
                        unapplied=sorted(self.perturb), backward_calls=rec.backward_calls if rec else 0,
                        notes=self.notes)

    def _capture_report(self) -> CaptureReport:
        scheme: Literal["consume", "backward"] = "consume" if self.consumed_any else "backward"
        table = self.iters if scheme == "consume" else self.bwd_iters
        seen = sorted(i for i, r in table.items() if r.params or r.backward_calls)
        complete = [i for i in seen if table[i].params]
        if self.target is not None:
            target = self.target
        else:
            target = 1 if 1 in complete else (complete[0] if complete else 0)
        # Every complete recorded iteration is returned: gradcheck checks the first and a later one.
        others = [self._iteration_payload(table[i], f"it{i}_") for i in complete if i != target]
        rec = table.get(target)
        at_target = self._iteration_payload(rec, "") if rec is not None else \
            CapturedIteration(iteration=target, backward_calls=0)
        candidates = [n for n in self.leaf_names if n]
        return CaptureReport(
            **dict(at_target),
            scheme=scheme,
            iterations_seen=seen,
            other_iterations=others,
            boundary_seeds=self._boundary_seeds(table),
            unseeded_backward=self.unseeded_backward,
            graph_events=sorted(set(self.graph_events)),
            seeded_trajectory=[table[i].objective for i in sorted(table) if table[i].backward_calls],
            seeded_loss_read=self.seeded_loss_read,
            leaf_candidates=candidates[:20],
            stopped_at=self.stopped_at,
            notes=self.notes,
        )

    def _iteration_payload(self, rec: _Iter, prefix: str) -> CapturedIteration:
        params = []
        for k, (oid, p) in enumerate(rec.params.items()):
            owner = rec.owners[oid]
            role = rec.perturb_at.get(owner, rec.first_use.get(owner))
            gpath, vpath = self.outdir / f"{prefix}grad_{k}.npy", self.outdir / f"{prefix}value_{k}.npy"
            reads = p.get("grads") or [p["grad"]]
            np.save(gpath, np.sum(reads, axis=0) if p.get("zeroed_between") else reads[-1])
            np.save(vpath, p["value"])
            tpath = None
            if p.get("tape_grad") is not None:
                tpath = self.outdir / f"{prefix}tape_grad_{k}.npy"
                np.save(tpath, p["tape_grad"])
            params.append(CapturedParam(
                name=p["name"], role=role, how=p["how"], shape=p["shape"], dtype=p["dtype"],
                numpy_shape=list(p["grad"].shape), grad_file=str(gpath), value_file=str(vpath),
                requires_grad=p["requires_grad"], stale_read=bool(p.get("stale_read")), crosscheck=p.get("crosscheck"),
                untied=bool(p.get("untied")), tape_grad_file=str(tpath) if tpath is not None else None,
            ))
        return CapturedIteration(
            iteration=rec.index,
            objective=rec.named_objective if self.objective_name else rec.objective,
            objective_seeds=rec.seeds,
            backward_calls=rec.backward_calls,
            nonfinite_loss=rec.nonfinite_loss,
            stale_grads=self._stale(rec),
            params=params,
            handoff_backward_calls=rec.handoff_calls,
            handoff_seeds=sorted(set(rec.handoff_seeds)),
        )
