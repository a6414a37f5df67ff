"""G015 check-on-record. `check(ev)`: for `diagnosis_only`, a conclusive full-horizon check on the files as they
are now (passing or failing: the diagnosis is what it found)."""

from __future__ import annotations

from .evidence import Evidence, Findings
from .rule import Rule


def check(ev: Evidence) -> Findings:
    checks = [c for c in ev.checks if c.v.passed is not None and c.v.full_horizon]
    good = [c for c in checks if ev.current(c.rec)]
    if good:
        return Findings(evidence={"check": good[-1].seq})
    if checks:
        return Findings(missing=[RULE.refusal(
            f"a full-horizon FD check on the files as they are now: the check (record {checks[-1].seq}) lists no "
            "files or is stale; rerun gradcheck")])
    return Findings(missing=[RULE.refusal(
        "a full-horizon FD check (gradcheck with ok=true over the user's objective and horizon, or diagnose)")])


RULE = Rule(
    id="G015", name="check-on-record",
    summary="diagnosis_only needs a conclusive full-horizon FD check on the files as they are now.",
    refuses="`diagnosis_only` without a conclusive full-horizon check on the current files",
    why="A diagnosis with no check behind it is a guess about the gradient.",
    satisfied_by="A gradcheck (or diagnose) record with a verdict, full horizon, on the files as they are now.",
    call="gradcheck(script, args) with the workflow's script and arguments (diagnose makes one)",
    check=check,
)
