"""What capture hands back: the typed report of a "capture" run or of one perturbed "fd" run.

Arrays (consumed gradients, parameter values, perturbations really applied) go to `.npy` files in the run's
output folder; the report names them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from ..protocol import CapturedIteration, CapturedParam, CaptureReport, FdReport

if TYPE_CHECKING:
    from .iterations import _Iter
    from .listener import CaptureListener


def fd_report(c: CaptureListener) -> FdReport:
    acct = c.acct
    table = acct.iters if c.scheme == "consume" else acct.bwd_iters
    rec = acct.at_target(table)
    obj = None
    if rec is not None:
        obj = rec.named_objective if c.objective_name else rec.objective
        if c.objective_name and obj is None:
            obj = c.obj.named_objective()
    applied = {}
    # Numbered, not named by hash(role): a string's hash changes between processes and two roles could share one.
    for k, (role, d) in enumerate(sorted(c.fork.applied.items())):
        path = c.outdir / f"applied_{k}.npy"
        np.save(path, d)
        applied[role] = str(path)
    return FdReport(objective=obj, stopped_at=c.stopped_at,
                    reached=bool(c.stopped_at and c.stopped_at.startswith("iteration")), applied=applied,
                    unapplied=sorted(c.fork.perturb), backward_calls=rec.backward_calls if rec else 0,
                    notes=c.notes)


def capture_report(c: CaptureListener) -> CaptureReport:
    acct = c.acct
    scheme: Literal["consume", "backward"] = "consume" if acct.consumed_any else "backward"
    table = acct.iters if scheme == "consume" else acct.bwd_iters
    seen = sorted(i for i, r in table.items() if r.params or r.backward_calls)
    complete = [i for i in seen if table[i].params]
    target = c.target if c.target is not None else (1 if 1 in complete else (complete[0] if complete else 0))
    # Every complete recorded iteration is returned: gradcheck checks the first and a later one.
    others = [_iteration_payload(c, table[i], f"it{i}_") for i in complete if i != target]
    rec = table.get(target)
    at_target = _iteration_payload(c, rec, "") if rec is not None else \
        CapturedIteration(iteration=target, backward_calls=0)
    candidates = [n for n in c.reg.leaf_names if n]
    return CaptureReport(
        **dict(at_target),
        scheme=scheme,
        iterations_seen=seen,
        other_iterations=others,
        boundary_seeds=c.obj.boundary_seeds(table),
        unseeded_backward=c.obj.unseeded_backward,
        graph_events=sorted(set(c.graph_events)),
        seeded_trajectory=[table[i].objective for i in sorted(table) if table[i].backward_calls],
        seeded_loss_read=c.obj.seeded_loss_read,
        leaf_candidates=candidates[:20],
        stopped_at=c.stopped_at,
        notes=c.notes,
    )


def _iteration_payload(c: CaptureListener, rec: _Iter, prefix: str) -> CapturedIteration:
    params = []
    for k, (oid, p) in enumerate(rec.params.items()):
        owner = rec.owners[oid]
        role = rec.perturb_at.get(owner, rec.first_use.get(owner))
        gpath, vpath = c.outdir / f"{prefix}grad_{k}.npy", c.outdir / f"{prefix}value_{k}.npy"
        reads = p.get("grads") or [p["grad"]]
        np.save(gpath, np.sum(reads, axis=0) if p.get("zeroed_between") else reads[-1])
        np.save(vpath, p["value"])
        tpath = None
        if p.get("tape_grad") is not None:
            tpath = c.outdir / f"{prefix}tape_grad_{k}.npy"
            np.save(tpath, p["tape_grad"])
        params.append(CapturedParam(
            name=p["name"], role=role, how=p["how"], shape=p["shape"], dtype=p["dtype"],
            numpy_shape=list(p["grad"].shape), grad_file=str(gpath), value_file=str(vpath),
            requires_grad=p["requires_grad"], stale_read=bool(p.get("stale_read")), crosscheck=p.get("crosscheck"),
            untied=bool(p.get("untied")), tape_grad_file=str(tpath) if tpath is not None else None,
        ))
    return CapturedIteration(
        iteration=rec.index,
        objective=rec.named_objective if c.objective_name else rec.objective,
        objective_seeds=rec.seeds,
        backward_calls=rec.backward_calls,
        nonfinite_loss=rec.nonfinite_loss,
        stale_grads=c.acct.stale(rec),
        params=params,
        handoff_backward_calls=rec.handoff_calls,
        handoff_seeds=sorted(set(rec.handoff_seeds)),
    )
