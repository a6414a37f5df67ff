"""Each outcome's rules put together, and `check_finish`, the one gate every front end calls (the `finish`
tool, `warpgrad gate`, hooks, the eval runner)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..ledger import Ledger, LedgerRecord
from ..records import Comparison, GradcheckEvent, RunEvent
from ..workflow import constant_changes, program_constants
from . import (
    g001_intact_signed_ledger,
    g002_no_current_failure,
    g006_first_and_later_iteration,
    g007_workflow_run,
    g008_fix_evidence_chain,
    g010_objective_before_after,
    g013_second_cause_evidence,
    g014_failure_on_record,
    g015_check_on_record,
)
from .evidence import Evidence, Findings
from .g012_objective_invariant import ObjectiveShift

Outcome = Literal["fixed", "objective_changed", "gradients_correct", "not_a_gradient_bug", "blocked",
                  "diagnosis_only"]
OUTCOMES: tuple[str, ...] = ("fixed", "objective_changed", "gradients_correct", "not_a_gradient_bug", "blocked",
                             "diagnosis_only")
CORRECT_CLAIMS = ("fixed", "objective_changed", "gradients_correct", "not_a_gradient_bug")
OtherCause = Literal["learning_rate_too_high", "ill_posed_objective", "chaos"]


class GateResult(BaseModel):
    """Whether the ledger holds the evidence an outcome needs, and what is missing if not."""

    outcome: str = Field(description="The outcome that was asked for.")
    accepted: bool = Field(description="True when every piece of evidence the outcome needs is on record.")
    missing: list[str] = Field(default_factory=list, description="What is missing, each an action to take.")
    evidence: dict[str, int] = Field(
        default_factory=dict, description="Role -> ledger seq of the records that satisfy the gate."
    )
    comparison: Comparison | None = Field(None, description="fixed: the workflow objective before -> after.")
    signed: bool = Field(False, description="Every ledger record carries a valid signature under this machine's key.")
    objective_shift: ObjectiveShift | None = Field(None, description="fixed/objective_changed: the objective at "
                                                   "iteration 0 before and after the patch (G012).")
    hyperparameter_changes: list[str] = Field(default_factory=list, description="Module constants and arguments that "
                                              "differ from the workflow's, whatever the outcome.")
    workflow_seq: int | None = Field(None, description="The ledger record that fixed the workflow.")


def _fixed(ev: Evidence) -> Findings:
    return g008_fix_evidence_chain.check(ev)


def _objective_changed(ev: Evidence) -> Findings:
    """fixed's evidence chain with the objective's change declared instead of proven absent (G012 waived, and
    constants may differ from the workflow's); the report shows both objective values and the changes."""
    return g008_fix_evidence_chain.check(ev, declared=True)


def _unmodified(ev: Evidence, *, need_run: bool) -> Findings:
    """Passing checks of the workflow on the unmodified program, at the first and a later iteration, no failing
    check on the current files, and (need_run) a workflow run on them."""
    out, good = g008_fix_evidence_chain.unmodified_check(ev)
    if good:
        out.missing += g006_first_and_later_iteration.check(good, g008_fix_evidence_chain.CHECK_THE_WORKFLOW)
        if need_run:
            run = g007_workflow_run.check(ev, good)
            out.missing += run.missing
            out.evidence.update(run.evidence)
    out.missing = g002_no_current_failure.check(ev) + out.missing
    return out


def _gradients_correct(ev: Evidence) -> Findings:
    return _unmodified(ev, need_run=True)


def _not_a_gradient_bug(ev: Evidence) -> Findings:
    out = _unmodified(ev, need_run=False)
    variant = g010_objective_before_after.variant_check(ev)
    out.missing += variant.missing
    out.evidence.update(variant.evidence)
    return out


def _blocked(ev: Evidence) -> Findings:
    return g014_failure_on_record.check(ev)


def _diagnosis_only(ev: Evidence) -> Findings:
    return g015_check_on_record.check(ev)


_OUTCOME_RULES = {
    "fixed": _fixed,
    "objective_changed": _objective_changed,
    "gradients_correct": _gradients_correct,
    "not_a_gradient_bug": _not_a_gradient_bug,
    "blocked": _blocked,
    "diagnosis_only": _diagnosis_only,
}


def hyperparameter_changes(ev: Evidence) -> list[str]:
    """Module constants that differ between the workflow and the files now, and arguments of the runs and
    checks after the first patch that differ from the workflow's: listed in the report whatever the outcome."""
    wf = ev.workflow
    if wf is None:
        return []
    files = {k.split(":", 1)[0] for k in wf.constants}
    out = [f"module constant {c}" for c in constant_changes(wf.constants, program_constants(ev.workspace, files))]
    first_patch = next((r.seq for r in ev.patches()), None)
    if first_patch is None:
        return out
    seen: set[tuple[str, ...]] = set()
    for r in ev.records:
        if r.seq < first_patch:
            continue
        args = (r.event.payload.args if isinstance(r.event, RunEvent) else r.event.payload.harness.args
                if isinstance(r.event, GradcheckEvent) else None)
        if args is not None and args != wf.args and tuple(args) not in seen:
            seen.add(tuple(args))
            out.append(f"arguments {args} (record {r.seq}) where the workflow runs {wf.args}")
    return out


def localization(records: list[LedgerRecord], workspace: Path) -> dict[int, str]:
    """Seq -> why, for each check that is localization evidence rather than a check of the workflow (G003,
    G004, G011): the report shows them as such."""
    ev = Evidence(records, Path(workspace))
    out = {}
    for c in ev.checks:
        if c.kind in ("probe", "partial") or not c.full_objective():
            out[c.seq] = c.kind_why
        elif away := ev.departures(c, constants=False):
            out[c.seq] = "; ".join(away)
    return out


def check_finish(workspace: Path, outcome: str, also: str | None = None) -> GateResult:
    """Decide whether the ledger of `workspace` proves `outcome`; list what is missing if not.

    Every outcome needs an intact, signed ledger (G001). Then:
    - `fixed`: the fix chain (G008): a failing check, a patch after it, a passing check of the workflow with the
      same harness on the patched files as they are now (G003, G004, G005, G011), agreeing in 3+ directions at
      iteration 0 and a later one (G006), the objective at iteration 0 unmoved (G012), no failing check on the
      current files (G002), a clean tracker run (G009) and a workflow rerun that improves on the run before
      (G010), or a `symptom_gone` record the user confirmed.
    - `objective_changed`: as `fixed`, with G012 and the constants of G011 waived and no improvement asked for.
    - `gradients_correct`: passing checks of the workflow on the unmodified program covering the first and a
      later iteration (G003-G006, G011), no failing check on the current files (G002), and a completed
      workflow run on those files (G007).
    - `not_a_gradient_bug`: as `gradients_correct` without G007, plus a workflow run with the suspected cause
      changed that improves on the baseline run (G010).
    - `blocked`: a failed run that records why (G014).
    - `diagnosis_only`: a full-horizon check (passing or failing) on the files as they are (G015).

    Args:
        workspace: The workspace root.
        outcome: One of `OUTCOMES`.
        also: A second cause named beside a fix (`OtherCause`), which then needs its own evidence (G013).

    Returns:
        The verdict, the missing pieces as actions, the seqs of the records that satisfied it, and for
        `fixed` the before -> after comparison of the workflow objective.
    """
    if outcome not in _OUTCOME_RULES:
        return GateResult(outcome=outcome, accepted=False,
                          missing=[f"a known outcome: one of {', '.join(OUTCOMES)}"])
    records, verification = Ledger(workspace).read()
    ev = Evidence(records, Path(workspace))
    out = _OUTCOME_RULES[outcome](ev)
    if also is not None:
        if outcome not in ("fixed", "objective_changed"):
            out.missing.append(g013_second_cause_evidence.RULE.refusal(
                f"a second cause ({also}) is named only beside a fix: finish(outcome='fixed', also='{also}')"))
        else:
            second = g013_second_cause_evidence.check(ev, also)
            out.missing += second.missing
            out.evidence.update(second.evidence)
    # The ledger's own problems first (nothing else can be trusted while they stand), then the outcome's.
    missing = (g001_intact_signed_ledger.ledger_missing(verification) + out.missing
               + g001_intact_signed_ledger.unbound_missing(out.evidence, verification.unbound))
    return GateResult(outcome=outcome, accepted=not missing, missing=missing, evidence=out.evidence,
                      comparison=out.comparison, signed=verification.signed, objective_shift=out.shift,
                      hyperparameter_changes=hyperparameter_changes(ev), workflow_seq=ev.workflow_seq)
