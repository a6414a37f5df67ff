"""What finish gathers itself before judging a fix: what the model need not supply (the tracker, the workflow's
rerun after the last patch, and a check with more directions when FD left a direction unresolved). Refusing for
their absence would only cost the model calls; the gate still refuses for what contradicts the outcome."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from ..ledger import Ledger
from ..records import TrackerEvent, WorkflowPayload
from . import g006_first_and_later_iteration
from .evidence import Check, Evidence, patched_paths

MAX_DIRECTIONS = 16  # gradcheck's own bound on `directions`


class CheckPlan(BaseModel):
    """A gradcheck of the workflow with more directions, on the harness of the check it strengthens."""

    directions: int
    iteration: int | None = None
    seed: int = 0
    why: str = Field(description="What the last check left unresolved, in words.")


class GatherPlan(BaseModel):
    """The runs finish makes before judging `fixed` when the ledger lacks them."""

    workflow: WorkflowPayload
    tracker: bool = False
    rerun: bool = False
    check: CheckPlan | None = None


def _unresolved(checks: list[Check]) -> CheckPlan | None:
    """A check with more directions when the latest check of the patched workflow did not fail but left G006 short:
    no verdict with a direction unresolved, or a pass with fewer than MIN_DIRECTIONS agreeing at an iteration."""
    if not checks:
        return None
    last = checks[-1]
    if last.v.passed is False:
        return None  # a failure contradicts the fix: that is the model's to answer, not more sampling
    unresolved = any(d.status == "unresolved" for d in last.v.directions)
    if last.v.passed is None and not unresolved:
        return None
    passing = [c for c in checks if c.v.passed is True]
    if last.v.passed is True and not g006_first_and_later_iteration.strength_missing(passing, ""):
        return None
    asked = last.v.harness.directions or g006_first_and_later_iteration.MIN_DIRECTIONS
    if asked >= MAX_DIRECTIONS:
        return None
    why = ("its verdict was left open by an unresolved direction" if last.v.passed is None else
           f"it passed with fewer than {g006_first_and_later_iteration.MIN_DIRECTIONS} resolved agreeing directions "
           "at an iteration")
    return CheckPlan(directions=min(MAX_DIRECTIONS, 2 * asked), iteration=last.v.harness.iteration,
                     seed=last.v.harness.seed or 0, why=f"the check at record {last.seq}: {why}")


def gather_plan(workspace: Path, outcome: str = "fixed") -> GatherPlan | None:
    """The runs finish should make before judging `outcome` (None: nothing to gather, or what is missing only the
    model can supply: for a fix, a patch and a check of the patched files).

    `fixed` and `objective_changed`: the tracker and the workflow's rerun after the last patch, and a check with
    more directions when the check of the patched files left one unresolved. `gradients_correct` and
    `not_a_gradient_bug`: only that check, on the files as they are."""
    records, _ = Ledger(workspace).read()
    ev = Evidence(records, Path(workspace))
    wf = ev.workflow
    if wf is None or not wf.script:
        return None
    patches = [r for r in ev.patches() if patched_paths(r)]
    last = patches[-1].seq if patches else -1
    check = _unresolved([c for c in ev.checks if c.seq > last and ev.current(c.rec)
                         and c.v.script == wf.script and c.v.harness.args == wf.args])
    if outcome in ("gradients_correct", "not_a_gradient_bug"):
        return GatherPlan(workflow=wf, check=check) if check is not None else None
    if not patches:
        return None
    if not any(c.v.passed is True and c.seq > last and ev.current(c.rec) for c in ev.checks) and check is None:
        return None  # the model has not checked the patched program yet: running the rest would prove nothing
    trackers = [r for r in ev.records if isinstance(r.event, TrackerEvent) and r.seq > last and ev.current(r)]
    reruns = [r for r, v in ev.runs if r.seq > last and not v.changed and not v.failed() and v.cut_short_at is None
              and ev.current(r) and not ev.run_departures(r, v)]
    plan = GatherPlan(workflow=wf, tracker=not trackers, rerun=not reruns, check=check)
    return plan if plan.tracker or plan.rerun or plan.check else None


def unpatched_run_needed(workspace: Path) -> bool:
    """Whether finish should run the program as it was before the first patch to its end (in a scratch copy): a
    patch exists, and no completed run of the unpatched workflow (same script and arguments) is on record, only one
    diagnose cut short once it had read the trend (a wrong gradient that descends fast and then climbs can lie
    below a right fix at the cut, so where the buggy run would have ended is what the rerun must be compared
    with). finish asks only when G010 still refuses after its other runs."""
    records, _ = Ledger(workspace).read()
    ev = Evidence(records, Path(workspace))
    wf = ev.workflow
    patches = [r for r in ev.patches() if patched_paths(r)]
    if wf is None or not wf.script or not patches or not ev.originals():
        return False
    first = patches[0].seq
    befores = [v for r, v in ev.runs if (r.seq < first or ev.unpatched_run(r)) and v.script == wf.script
               and v.args == wf.args and not v.changed]
    return not any(v.cut_short_at is None and not v.failed() for v in befores)

