"""G014 failure-on-record. `check(ev)`: for `blocked`, a failed run on the files as they are now that says why."""

from __future__ import annotations

from .evidence import Evidence, Findings
from .rule import Rule


def check(ev: Evidence) -> Findings:
    why = [r for r, v in ev.runs if v.failed() and v.says_why()]
    if not why:
        return Findings(missing=[RULE.refusal(
            "a recorded failed run that shows why the program cannot run (a run record with ok=false and its error "
            "or stderr): run_script the program so the failure is on record")])
    current = [r for r in why if not ev.stale(r)]
    if not current:
        return Findings(missing=[RULE.refusal(
            f"the failed run (record {why[-1].seq}) is stale: the files changed since; run_script it again to show "
            "it still fails")])
    return Findings(evidence={"failed_run": current[-1].seq})


RULE = Rule(
    id="G014", name="failure-on-record",
    summary="blocked needs a failed run of the program on the files as they are now, recorded with why it failed.",
    refuses="`blocked` without a recorded failed run that says why, on the current files",
    why="A session could end as blocked on a program that runs, with nothing showing what stopped it.",
    satisfied_by="A run_script record with ok=false and its error or stderr, on the files as they are now.",
    call="run_script(script, args) with the workflow's script and arguments",
    check=check,
)
