"""G010 objective-before-after. `check(ev, last_patch, first_patch, patched)`: a rerun of the workflow after the
fix's last patch improves on the same workflow's run before its first patch (diagnose's run counts, compared
where it was cut short), or the user confirmed the symptom is gone. `variant_check(ev)`: for
not_a_gradient_bug, a run with the suspected cause changed improves on the baseline run of the same script."""

from __future__ import annotations

from ..ledger import LedgerRecord
from ..records import SymptomGoneEvent
from .compare import objective_improves
from .evidence import Evidence, Findings, same_workflow
from .rule import Rule


def check(ev: Evidence, last_patch: LedgerRecord, first_patch: LedgerRecord, patched: set[str]) -> Findings:
    out = Findings()
    confirmed = [r for r in ev.records if isinstance(e := r.event, SymptomGoneEvent) and r.seq > last_patch.seq
                 and e.payload.user_confirmed]
    if confirmed:
        out.evidence["symptom_gone"] = confirmed[-1].seq
        return out
    reruns = [(r, v) for r, v in ev.runs if r.seq > last_patch.seq and not v.changed and not ev.unpatched_run(r)]
    # The run before: any run of the unpatched program (before the first patch, or later on its original bytes);
    # a complete one is preferred to one diagnose cut short, whose end is unknown.
    befores = [(r, v) for r, v in ev.runs if r.seq < first_patch.seq or ev.unpatched_run(r)]
    befores.sort(key=lambda rv: (rv[1].cut_short_at is None, rv[0].seq))
    if not reruns:
        out.missing.append(RULE.refusal(
            f"a rerun of the user's workflow after the patch (record {last_patch.seq}) whose objective improves on "
            "the run before it: finish makes this rerun itself; from the command line, run_script the workflow "
            "(or the user confirms the symptom is gone)"))
        return out
    reasons: list[str] = []  # newest rerun first: its reason is the one worth reading
    for after, av in reversed(reruns):
        stale = ev.stale(after)
        if stale:
            reasons.append(f"the rerun (record {after.seq}) is stale: {', '.join(sorted(stale))} changed since")
            continue
        if patched and not (patched & set(after.files)):
            reasons.append(f"the rerun (record {after.seq}, {av.script}) never imported a patched file "
                           f"({', '.join(sorted(patched))}): it did not run the patched program")
            continue
        away = ev.run_departures(after, av) if ev.workflow is not None else []
        if away:
            reasons.append(f"the rerun (record {after.seq}) is not a run of the workflow: {'; '.join(away)}")
            continue
        before = next((b for b, bv in reversed(befores) if same_workflow(bv, av, same_args=True)), None)
        if before is None:
            reasons.append(f"there is no run of the same workflow ({av.script}, same script and arguments) before the "
                           "patch to compare with (diagnose's run counts; finish runs the unpatched program itself in "
                           "a scratch copy when its backups restore it); have the user confirm the symptom is gone "
                           "(symptom-gone), or undo, run_script, and patch again")
            continue
        ok, reason, cmp = objective_improves(before, after, no_symptom_ok=True)
        if ok:
            out.evidence["run_before"], out.evidence["run_after"] = before.seq, after.seq
            out.comparison = cmp
            return out
        reasons.append(reason)
    out.missing.append(RULE.refusal(f"a workflow rerun whose objective improves on the run before the patch: "
                                    f"{reasons[0]}"))
    return out


def variant_check(ev: Evidence) -> Findings:
    """not_a_gradient_bug: a run with the suspected non-gradient cause changed improves on the baseline run."""
    why = ("a workflow run with the suspected non-gradient cause changed (its payload's `changed` names what, e.g. a "
           "smaller learning rate, or it ran with different args) whose objective improves on the baseline run of "
           "the same script")
    for v, vv in reversed(ev.runs):
        base = next((b for b, bv in reversed(ev.runs) if b.seq < v.seq and same_workflow(bv, vv) and not bv.changed
                     and (vv.changed or bv.args != vv.args)), None)
        if base is None:
            continue
        ok, reason, _ = objective_improves(base, v)
        if ok:
            return Findings(evidence={"baseline_run": base.seq, "variant_run": v.seq})
        if "(the variant run" not in why:
            why += f" (the variant run, record {v.seq}, does not: {reason})"
    return Findings(missing=[RULE.refusal(why)])


RULE = Rule(
    id="G010", name="objective-before-after",
    summary="fixed needs the workflow run before the patch and a rerun after it, both showing the objective or "
            "the named metric, and the rerun improving on it; the report states before -> after.",
    refuses="`fixed` when the workflow's rerun does not improve on the run before (where that run descended steadily "
            "to its end: when the rerun does not descend)",
    why="A run whose loss could not be read (nothing parsed) compared nothing.",
    satisfied_by="The workflow run before the patch (diagnose's run counts, compared where it was cut short; when "
                 "the rerun does not beat it there, finish runs the unpatched program to its end in a scratch copy) "
                 "and a rerun after it, with a parsed loss or a `metric`; finish makes the rerun itself. When the "
                 "whole run before showed no symptom (it descended steadily to its end), a rerun that descends at "
                 "nearly every step counts, however slowly, and the report says it ends higher.",
    call="finish makes the rerun itself (run_script from the command line; run_script(metric=...) when the script "
         "prints a metric rather than a loss)",
    check=check,
)
