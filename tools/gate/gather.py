"""What finish gathers itself before judging a fix: the runs the model need not make (the tracker, the
workflow's rerun after the last patch). Refusing for their absence would only cost the model calls."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from ..ledger import Ledger
from ..records import TrackerEvent, WorkflowPayload
from .evidence import Evidence, patched_paths


class GatherPlan(BaseModel):
    """The runs finish makes before judging `fixed` when the ledger lacks them."""

    workflow: WorkflowPayload
    tracker: bool = False
    rerun: bool = False


def gather_plan(workspace: Path) -> GatherPlan | None:
    """The runs finish should make before judging `fixed` (None: no workflow, no patch, or no passing check of
    the patched files yet, which only the model can supply)."""
    records, _ = Ledger(workspace).read()
    ev = Evidence(records, Path(workspace))
    patches = [r for r in ev.patches() if patched_paths(r)]
    if ev.workflow is None or not ev.workflow.script or not patches:
        return None
    last = patches[-1].seq
    if not any(c.v.passed is True and c.seq > last and ev.current(c.rec) for c in ev.checks):
        return None  # the model has not checked the patched program yet: running the rest would prove nothing
    trackers = [r for r in ev.records if isinstance(r.event, TrackerEvent) and r.seq > last and ev.current(r)]
    reruns = [r for r, v in ev.runs if r.seq > last and not v.changed and not v.failed() and v.cut_short_at is None
              and ev.current(r) and not ev.run_departures(r, v)]
    plan = GatherPlan(workflow=ev.workflow, tracker=not trackers, rerun=not reruns)
    return plan if plan.tracker or plan.rerun else None
