"""G012 objective-invariant. `check(shift)`: the objective at iteration 0 (the script's initial parameters) is
where it was before the patch; `objective_shift(f, a)` reads it from the failing check `f` and the passing one
`a`."""

from __future__ import annotations

import math

from ..records import ObjectiveAtStart
from .evidence import Check
from .rule import Rule

# A gradient fix leaves the forward as it was; float32 sums reordered by a fix move it by ~1e-7 relative per
# term, far below this. A horizon cut or a removed code path moves it by orders of magnitude more.
OBJECTIVE_RTOL = 1e-4

ObjectiveShift = ObjectiveAtStart  # the gate's name for the record model


def objective_at_start(c: Check) -> float | None:
    """The objective the check measured at iteration 0 (the script's initial parameters), if it checked it.

    The value is the seeded objective times the factor by which the script's printed loss differs from it."""
    # The engine seeds backward with the loss it captured; a script that prints a multiple of it (a mean over a
    # batch it seeds as a sum) reports `reported_factor`. A fix of such a seed changes the seeded value while the
    # objective the user sees stays: compare what the script reports.
    factor = c.v.reported_factor if c.v.reported_factor is not None else 1.0
    value: float | None = None
    for p in c.v.per_iteration:
        if p.iteration == 0:
            value = p.objective_value
            break
    else:
        if not c.v.per_iteration and c.v.iteration == 0:
            value = c.v.objective_value
    return None if value is None else value * factor


def objective_shift(f: Check, a: Check) -> ObjectiveShift:
    b, v = objective_at_start(f), objective_at_start(a)
    moved = None
    if b is not None and v is not None and math.isfinite(b) and math.isfinite(v):
        moved = not math.isclose(b, v, rel_tol=OBJECTIVE_RTOL, abs_tol=1e-30)
    return ObjectiveAtStart(before_seq=f.seq, after_seq=a.seq, before=b, after=v, moved=moved)


def check(shift: ObjectiveShift) -> list[str]:
    if shift.moved is False:
        return []
    if shift.moved is None:
        return [RULE.refusal(
            f"the workflow's objective at iteration 0 before and after the patch: the failing check (record "
            f"{shift.before_seq}) shows {shift.before!r} and the passing one (record {shift.after_seq}) "
            f"{shift.after!r}; both must have checked iteration 0 (gradcheck without iteration= checks it)")]
    return [RULE.refusal(
        f"an objective the patch left unchanged: at iteration 0 it was {shift.before!r} before the patch (record "
        f"{shift.before_seq}) and is {shift.after!r} after it (record {shift.after_seq}): the patch changed what is "
        "optimized, not only its gradient. Undo it (undo) and fix the gradient, or, if the change is intended, call "
        "finish(outcome='objective_changed', summary=<why the objective had to change>)")]


RULE = Rule(
    id="G012", name="objective-invariant",
    summary="fixed needs the workflow's objective at the initial parameters (iteration 0) unchanged by the patch, "
            f"within a relative {OBJECTIVE_RTOL:g}.",
    refuses="`fixed` when the objective at iteration 0 moved under the patch (a horizon cut, a removed branch)",
    why="Cutting the horizon or raising a threshold past the buggy code path makes the gradient match by changing "
        "what is optimized, not by fixing its gradient.",
    satisfied_by="The failing check before the patch and the passing one after it both checked iteration 0 of the "
                 "workflow and report the same objective there; otherwise declare the change: "
                 "finish(outcome='objective_changed', summary=why).",
    call="undo (then fix the gradient itself), or finish(outcome='objective_changed', summary=why) when the change "
         "is intended",
    check=check,
)
