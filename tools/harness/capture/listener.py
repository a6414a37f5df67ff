"""Zero-config capture and FD evaluation of a user's own training script (runs in the subprocess).

`CaptureListener` is the hook listener: it receives Warp's events and hands each to the part that owns it.
The parts are the terms of DESIGN.md's FD driver, one module each:

* `iterations` - iteration accounting: an iteration is the span between two parameter updates;
* `params` - the parameter registry: the arrays whose gradient an update consumed, and that gradient;
* `objective` - what each backward differentiates, read off its seeds;
* `perturb` - perturbation and fork point: the roles of uses, where FD perturbs, where a hub forks;
* `report` - the typed report handed back.

In "capture" mode the listener records the objective seeded into `backward`, the parameters and the gradient
the update consumed at iteration T. In "fd" mode it adds a perturbation to each parameter at its first use in
iteration T and reports the objective at T's end (then stops the run). An FD hub ("fd" with `serve`) perturbs
nothing itself: at the first use of any role it serves (or at T's end, or the script's, when none is used) it
forks one evaluation per request (`serve.py`), and each forked process goes on from there as a perturbed
"fd" run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import warp as wp

from .. import hooks, torch_follow
from ..capture_values import _tape_arrays, _written_args, name_of, written_arrays
from ..protocol import CaptureConfig, CaptureReport, FdConfig, FdReport
from . import report
from .iterations import Iterations
from .objective import Objective
from .params import Registry
from .perturb import Perturbation

if TYPE_CHECKING:
    from ..main import Session


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
        self.outdir = Path(config.outdir or ".")  # an FD hub's evaluation moves it to its own folder
        self.record_until = (self.target if self.target is not None else 2)
        self.notes: list[str] = []
        self.stopped_at: str | None = None
        self.capturing = False
        self.graph_events: list[str] = []  # what was recorded into, or replayed from, a captured graph
        self.acct = Iterations(self)
        self.reg = Registry(self)
        self.obj = Objective(self)
        self.fork = Perturbation(self, spec)
        self.torch = torch_follow.TorchFollow(self)  # torch losses and torch.optim steps (torch_follow)

    # ---------------------------------------------------------------- forward: uses of arrays
    def before_launch(self, call: hooks.LaunchCall) -> None:
        acct, reg, fork = self.acct, self.reg, self.fork
        if call.in_backward:
            return
        if call.taped:
            acct.forward_activity()
            fork.launching = call
            for role, arr in fork.roles_of_launch(call):
                acct.note_use(role, arr)
            fork.launching = None
            reg.taped_launch(call, _written_args(call.kernel))
        elif not call.in_optimizer:
            rec = acct.iters.get(acct.it)
            written = _written_args(call.kernel)
            key = call.kernel.key
            occ = fork.untaped_occurrence(key)
            for idx, arg in enumerate(call.args):
                for path, arr in hooks.iter_arrays(arg):
                    owner = reg.owner_of_grad(arr)
                    if owner is not None:
                        reg.consume(owner, arr, "a launch outside the tape reads its .grad")
                        acct.update_seen = acct.update_seen or acct.phase == "consuming"
                        fork.loose.clear()  # an update: uses before it belong to the iteration that ends here
                    elif acct.phase == "consuming" and rec is not None and rec.owners.get(id(arr)) is arr:
                        acct.update_seen = True
                        fork.loose.clear()
                    elif idx < len(call.inputs) and (written is None or idx not in written):
                        fork.loose_use(f"untaped:{key}:{occ}:{idx}{'.' + path if path else ''}", arr)

    def before_copy(self, call: hooks.CopyCall) -> None:
        acct, reg = self.acct, self.reg
        if call.in_backward:
            return
        if call.tape is not None:
            acct.forward_activity()
            role = self.fork.copy_role()
            if isinstance(call.src, wp.array):
                acct.note_use(role, call.src)
        else:
            if reg.grad_holder(call.dest) is not None and reg.grad_holder(call.src) is not None:
                # One array's .grad copied into another's: a boundary adjoint handed to the next backward pass
                # (hand-written checkpointing), not a gradient an update consumes.
                self.obj.handed.add(call.dest)
                return
            owner = reg.owner_of_grad(call.src) if isinstance(call.src, wp.array) else None
            if owner is not None:
                reg.consume(owner, call.src, "wp.copy from its .grad")
            elif isinstance(call.src, wp.array):
                self.fork.untaped_copy(call.src)
            if isinstance(call.dest, wp.array):
                reg.param_written(call.dest)  # p.assign(...) / wp.copy(p, ...) outside the tape
                self.fork.written(call.dest)

    def after_copy(self, call: hooks.CopyCall) -> None:
        if not call.in_backward and call.tape is None and isinstance(call.dest, wp.array):
            self.reg.crosscheck(self.acct.iters.get(self.acct.it), call.dest, call.dest)

    def after_launch(self, call: hooks.LaunchCall) -> None:
        if call.in_backward or call.taped or call.in_optimizer:
            return
        for arg in call.args:
            for _, arr in hooks.iter_arrays(arg):
                self.reg.crosscheck(self.acct.iters.get(self.acct.it), arr, arr)

    def tape_enter(self, tape) -> None:
        self.acct.forward_activity()

    def graph_capture(self, active: bool) -> None:
        self.capturing = active

    def graph_launch(self, graph) -> None:
        # Only a replay the hooks cannot follow reaches here (see graph_replay): the reason is the refusal.
        self.graph_events.append(hooks.graph_decline(graph) or "wp.capture_launch replays a captured graph")

    # ---------------------------------------------------------------- backward: the objective
    def before_backward(self, tape, loss, grads) -> None:
        acct, reg, obj = self.acct, self.reg, self.obj
        if self.capturing:
            self.graph_events.append("tape.backward recorded into a captured graph (it runs only on replay)")
        acct.start_backward()
        written = written_arrays(tape)
        written_ids = {id(a) for a in written}
        pre_backward = [a for a in _tape_arrays(tape) if a.grad is not None and id(a) not in written_ids
                        and (loss is None or a is not loss)]
        self.fork.loose.clear()  # after the pending uses are resolved: they may need their loose uses
        obj.last_boundary = []
        value, seeds = obj.seeded_value(written, loss, grads)
        handoff = obj.is_handoff(seeds)
        if not reg.leaf_names:
            # Named here, while the user's frames are alive: the ambiguity message lists them.
            reg.leaf_names = [name_of(a) for a in reg.leaf_candidates.values()][:20]
        acct.record_backward(pre_backward, value, seeds, handoff, obj.last_boundary)
        reg.find_named_params()
        if self.mode == "fd" and self.scheme == "backward" and acct.bwd == self.target:
            self.fd_stop()
        acct.phase = "backward"

    def after_backward(self, tape, loss, grads) -> None:
        acct = self.acct
        if self.scheme == "backward" or not acct.consumed_any:
            rec = acct.iter(acct.bwd_iters, acct.bwd)
            if rec is not None:
                self.reg.record_after_backward(rec)
        acct.bwd += 1

    # ---------------------------------------------------------------- consumption: the gradient used
    def grad_read(self, arr, how: str) -> None:
        self.reg.grad_read(arr, how)

    def optimizer_step(self, opt, grads) -> None:
        self.reg.optimizer_step(opt, grads)

    # ---------------------------------------------------------------- the end of the run
    def fd_stop(self) -> None:
        self.fork.serve(f"the end of iteration {self.target}")  # a hub none of whose roles was used: fork here
        self.stopped_at = f"iteration {self.target}"
        self.s.finish("completed")

    def script_end(self) -> None:
        if self.mode == "fd":
            self.fork.serve("the end of the script")
            rec = self.acct.at_target(self.acct.iters) if self.scheme == "consume" else None
            # The last iteration ends with the script: it is complete if its gradient was consumed.
            self.stopped_at = f"iteration {self.target} (script end)" if rec is not None and rec.params and \
                self.acct.it == self.target else "script end"

    def result(self) -> CaptureReport | FdReport:
        if self.mode == "fd":
            return report.fd_report(self)
        return report.capture_report(self)
