"""G013 second-cause-evidence. `check(ev, also)`: after the last patch, a run with the named second cause changed
improves on the workflow's own rerun after the patch."""

from __future__ import annotations

from .compare import objective_improves
from .evidence import Evidence, Findings
from .rule import Rule


def check(ev: Evidence, also: str) -> Findings:
    patches = [r.seq for r in ev.patches()]
    last = patches[-1] if patches else -1
    after = [(r, v) for r, v in ev.runs if r.seq > last and not v.failed() and ev.current(r)]
    bases = [r for r, v in after if not v.changed and not ev.run_departures(r, v)]
    variants = [r for r, v in after if v.changed or (ev.workflow is not None and v.args != ev.workflow.args)]
    why = "no run with the cause changed after the last patch"
    for variant in reversed(variants):
        for base in reversed(bases):
            ok, reason, _ = objective_improves(base, variant)
            if ok:
                return Findings(evidence={"baseline_run": base.seq, "variant_run": variant.seq})
            why = reason
    if not bases:
        why = "no rerun of the workflow after the last patch to compare a variant with (finish makes it)"
    return Findings(missing=[RULE.refusal(
        f"evidence for the second cause ({also}): a run after the last patch with that cause changed (run_script "
        f"with the workflow's script and the changed argument, e.g. a smaller learning rate) that improves on the "
        f"workflow's own rerun after the patch; {why}")])


RULE = Rule(
    id="G013", name="second-cause-evidence",
    summary="A fix that names a second cause besides the gradient bug (learning rate too high, an ill-posed "
            "objective, chaos) needs that cause's own evidence.",
    refuses="a second cause named beside a fix without a variant run that improves",
    why="A partial fix plus a learning-rate change was accepted as a gradient fix, the improvement coming from the "
        "learning rate; one outcome must say both parts and show each.",
    satisfied_by="The fix chain for the gradient bug, and after the last patch a run with the cause changed (its "
                 "arguments differ from the workflow's, e.g. a smaller --lr) that improves on the workflow's own "
                 "rerun after the patch.",
    call="run_script(script, args) with the workflow's script and its arguments with the cause changed (e.g. a smaller --lr)",
    check=check,
)
