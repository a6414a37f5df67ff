"""`finish`: the only way to end a session with an outcome, gated by the evidence in the ledger."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from .backups import BackupFile, Backups
from .gate import OtherCause, Outcome, check_finish, gather_plan, unpatched_run_needed
from .gate.evidence import Evidence, patch_payload
from .gradcheck import GradcheckArgs, gradcheck
from .ledger import STATE_DIR, Ledger
from .records import Comparison, FinishPayload, WorkflowPayload
from .registry import ToolError, tool
from .report import write_report
from .run_script import RunScriptArgs, run_script, run_script_in
from .tracker import InstrumentArgs, instrument


def _gather(workspace: Path, outcome: str) -> list[str]:
    """Make what the gate can gather itself after the last patch (a check with more directions when FD left one
    unresolved, the tracker, the workflow's rerun); what ran, in words. Each run is recorded in the ledger by its
    own tool, like any other call of it."""
    plan = gather_plan(workspace, outcome)
    if plan is None:
        return []
    wf, done = plan.workflow, []
    if plan.check is not None:
        c = plan.check
        gradcheck(GradcheckArgs(script=wf.script, args=wf.args, directions=c.directions, iteration=c.iteration,
                                seed=c.seed), workspace)
        done.append(f"gradcheck of {wf.script} with {c.directions} directions ({c.why})")
        plan = gather_plan(workspace, outcome)
        if plan is None or plan.check is not None:
            return done  # still unresolved (or failed): the tracker and the rerun follow only a check that settled
    if plan.tracker:
        instrument(InstrumentArgs(script=wf.script, args=wf.args), workspace)
        done.append(f"the tracker on {wf.script}")
    if plan.rerun:
        m = wf.metric
        run_script(RunScriptArgs(script=wf.script, args=wf.args, metric=m.name if m else None,
                                 metric_regex=m.regex if m else None, metric_direction=m.direction if m else "lower",
                                 metric_target=m.target if m else None), workspace)
        done.append(f"the workflow's rerun ({' '.join([wf.script, *wf.args])})")
    return done


def _run_unpatched(workspace: Path, wf: WorkflowPayload) -> str | None:
    """Run the workflow on the program as it was before the first patch, to its end, in a scratch copy of the
    workspace (the user's files stay as they are); the run is recorded in the ledger with the original files'
    hashes, which is what makes it the run before (G010). What ran, in words (None: an original could not be
    restored from its verified backup, so nothing ran)."""
    records, _ = Ledger(workspace).read()
    ev = Evidence(records, Path(workspace))
    first_before: dict[str, tuple[str | None, str | None]] = {}  # rel -> (backup id, sha256 before; None: created)
    for r in ev.patches():
        p = patch_payload(r)
        for rel, sha in p.before.items():
            if rel not in p.diagnostic:
                first_before.setdefault(rel, (p.backup_op, sha))
    backups = Backups(workspace)
    with tempfile.TemporaryDirectory(prefix="wg-unpatched-") as tmp:
        copy = Path(tmp) / "ws"
        shutil.copytree(workspace, copy, ignore=shutil.ignore_patterns(STATE_DIR, "__pycache__"), symlinks=True)
        for rel, (op, sha) in first_before.items():
            target = copy / rel
            if sha is None:  # the patch created it: the unpatched program had no such file
                target.unlink(missing_ok=True)
                continue
            if op is None:
                return None
            try:
                data, mode = backups.verified(op, BackupFile(path=rel, before=sha, after=""))
            except ToolError:
                return None
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            os.chmod(target, mode)
        m = wf.metric
        result = run_script_in(copy, copy / wf.script, wf.args, metric=m)
    Ledger(workspace).append("run", result, tool="finish")
    return f"the unpatched workflow to its end in a scratch copy ({' '.join([wf.script, *wf.args])})"


def _gather_before_run(workspace: Path, outcome: str, gate_missing: list[str]) -> list[str]:
    """When the rerun does not improve on a run before that diagnose cut short (G010), the whole run before."""
    if outcome != "fixed" or not any(m.startswith("[G010 ") for m in gate_missing):
        return []
    if not unpatched_run_needed(workspace):
        return []
    records, _ = Ledger(workspace).read()
    wf = Evidence(records, Path(workspace)).workflow
    done = _run_unpatched(workspace, wf) if wf is not None else None
    return [done] if done else []


GATHERS_FOR = ("fixed", "objective_changed", "gradients_correct", "not_a_gradient_bug")


class FinishArgs(BaseModel):
    outcome: Outcome = Field(
        description="fixed (gradient bug patched and proven by before/after FD checks of the workflow, its "
                    "objective at iteration 0 unchanged, tracker and workflow rerun: finish runs the last two itself); "
                    "objective_changed (as fixed, but the patch changed the objective on purpose, e.g. a constant: "
                    "say why in the summary; the report shows both values); gradients_correct (full-horizon FD check passes on the unmodified program); "
                    "not_a_gradient_bug (gradients correct and the cause shown elsewhere, e.g. a smaller "
                    "learning rate converges); blocked (the program cannot run; the failed run is recorded); "
                    "diagnosis_only (the user only asked whether gradients can be trusted).")
    also: OtherCause | None = Field(None, description="With fixed: a second cause besides the gradient bug (the "
                                    "learning rate was too high too, the objective is ill-posed, the dynamics are "
                                    "chaotic). It needs its own evidence: a run after the patch with that cause changed "
                                    "(e.g. a smaller --lr) that improves on the workflow's rerun.")
    summary: str = Field(min_length=10,
                         description="The root cause and fix in your own words; the report marks it as yours.")


class FinishResult(BaseModel):
    accepted: bool = Field(description="Always true: a refusal is an error listing what is missing.")
    outcome: str = Field(description="The outcome recorded.")
    seq: int = Field(description="Ledger record of the finish.")
    evidence: dict[str, int] = Field(description="Role -> ledger record that satisfied the gate.")
    comparison: Comparison | None = Field(None, description="fixed: the workflow objective before -> after.")
    gathered: list[str] = Field(default_factory=list, description="Runs finish made itself before judging.")
    hyperparameter_changes: list[str] = Field(default_factory=list, description="Constants and arguments that differ "
                                              "from the workflow's.")
    report_path: str = Field(description="Workspace-relative path of the rendered Markdown report.")
    report_markdown: str = Field(description="The report itself (read_file cannot open .warpgrad/): show it to the "
                                 "user or quote from it; every number in it comes from the ledger.")


@tool(args=FinishArgs, result=FinishResult, read_only=False, forks=True)
def finish(args: FinishArgs, workspace: Path) -> FinishResult:
    """End the session with an outcome. Refused, with the missing evidence listed, unless the ledger proves it.

    The workflow (script, arguments, module constants) is fixed by the first run or `diagnose`; only checks
    of it count. `fixed` needs: a failing FD check (diagnose's counts); a patch after it; a passing FD check
    with the same harness on the files as they are now, agreeing in 3+ directions at iteration 0 and a later
    one; the objective at iteration 0 unchanged by the patch; a clean tracker run and a workflow rerun that
    improves on the run before (finish makes these two runs itself when they are missing, and reruns gradcheck
    with more directions when one stayed unresolved). So a right fix is: diagnose -> edit -> gradcheck -> finish. `gradients_correct` needs the same checks on the unmodified
    program and a workflow run. Each missing piece names the gate rule and the call that supplies it. On
    success the report's Markdown is returned.
    """
    gate = check_finish(workspace, args.outcome, args.also)
    gathered: list[str] = []
    if not gate.accepted and args.outcome in GATHERS_FOR:
        gathered = _gather(workspace, args.outcome)
        if gathered:
            gate = check_finish(workspace, args.outcome, args.also)
        before = _gather_before_run(workspace, args.outcome, gate.missing) if not gate.accepted else []
        if before:
            gathered += before
            gate = check_finish(workspace, args.outcome, args.also)
    if not gate.accepted:
        what = args.outcome + (f" + {args.also}" if args.also else "")
        ran = f" (finish ran {' and '.join(gathered)} itself first)" if gathered else ""
        raise ToolError(f"finish({what}) refused: the ledger does not prove it yet{ran}. Missing:\n"
                        + "\n".join(f"- {m}" for m in gate.missing))
    record = FinishPayload(outcome=args.outcome, also=args.also, summary=args.summary, evidence=gate.evidence,
                           comparison=gate.comparison, signed=gate.signed, objective_shift=gate.objective_shift,
                           hyperparameter_changes=gate.hyperparameter_changes, gathered=gathered)
    rec = Ledger(workspace).append("finish", record, tool="finish")
    md = write_report(workspace)
    return FinishResult(accepted=True, outcome=args.outcome, seq=rec.seq, evidence=gate.evidence,
                        comparison=gate.comparison, gathered=gathered,
                        hyperparameter_changes=gate.hyperparameter_changes, report_path=md.relative_to(Path(workspace)).as_posix(),
                        report_markdown=md.read_text(encoding="utf-8"))
