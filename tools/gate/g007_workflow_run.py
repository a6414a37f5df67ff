"""G007 workflow-run. `check(ev, good)`: a completed run of the workflow on the files the passing checks
`good` imported, as they are now."""

from __future__ import annotations

from .evidence import Check, Evidence, Findings
from .rule import Rule


def check(ev: Evidence, good: list[Check]) -> Findings:
    program = set().union(*(set(c.files) - {c.v.probe} for c in good))
    runs = [r for r, v in ev.runs if not v.failed() and ev.current(r) and program & set(r.files)
            and not ev.run_departures(r, v)]
    if runs:
        return Findings(evidence={"workflow_run": runs[-1].seq})
    return Findings(missing=[RULE.refusal(
        "a completed run of the workflow (its script and arguments) on the files as they are now (run_script), so "
        "the checked program is tied to what the user runs")])


RULE = Rule(
    id="G007", name="workflow-run",
    summary="gradients_correct needs a completed run of the workflow (its script and arguments) on the files as "
            "they are now.",
    refuses="`gradients_correct` without a completed run of the workflow on the files as they are",
    why="Without it nothing ties the checked program to what the user runs.",
    satisfied_by="A run_script record that completed and imported the checked program files unchanged.",
    call="run_script(script, args) with the workflow's script and arguments",
    check=check,
)
