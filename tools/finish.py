"""`finish`: the only way to end a session with an outcome, gated by the evidence in the ledger."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from .gate import Outcome, check_finish
from .ledger import Ledger
from .records import Comparison, FinishPayload
from .registry import ToolError, tool
from .report import write_report


class FinishArgs(BaseModel):
    outcome: Outcome = Field(
        description="fixed (gradient bug patched and proven by before/after FD checks, tracker and workflow "
                    "rerun); gradients_correct (full-horizon FD check passes on the unmodified program); "
                    "not_a_gradient_bug (gradients correct and the cause shown elsewhere, e.g. a smaller "
                    "learning rate converges); blocked (the program cannot run; the failed run is recorded); "
                    "diagnosis_only (the user only asked whether gradients can be trusted).")
    summary: str = Field(min_length=10,
                         description="The root cause and fix in your own words; the report marks it as yours.")


class FinishResult(BaseModel):
    accepted: bool = Field(description="Always true: a refusal is an error listing what is missing.")
    outcome: str = Field(description="The outcome recorded.")
    seq: int = Field(description="Ledger record of the finish.")
    evidence: dict[str, int] = Field(description="Role -> ledger record that satisfied the gate.")
    comparison: Comparison | None = Field(None, description="fixed: the workflow objective before -> after.")
    report_path: str = Field(description="Workspace-relative path of the rendered Markdown report.")
    report_markdown: str = Field(description="The report itself (read_file cannot open .warpgrad/): show it to the "
                                 "user or quote from it; every number in it comes from the ledger.")


@tool(args=FinishArgs, result=FinishResult, read_only=False)
def finish(args: FinishArgs, workspace: Path) -> FinishResult:
    """End the session with an outcome. Refused, with the missing evidence listed, unless the ledger proves it.

    `fixed` needs: a failing FD check; a patch after it; a passing FD check with the same harness on the
    files as they are now that imported a patched file; a clean tracker rerun; a workflow rerun whose
    objective improves (the report states it before -> after). `gradients_correct` needs passing checks of
    the script's own objective at the first and a later iteration, no failing check on the current files,
    and a workflow run. Each missing piece names the gate rule it comes from. Do what the refusal lists,
    then call finish again. On success the report's Markdown is returned.
    """
    gate = check_finish(workspace, args.outcome)
    if not gate.accepted:
        raise ToolError(f"finish({args.outcome}) refused: the ledger does not prove it yet. Missing:\n"
                        + "\n".join(f"- {m}" for m in gate.missing))
    record = FinishPayload(outcome=args.outcome, summary=args.summary, evidence=gate.evidence,
                           comparison=gate.comparison, signed=gate.signed)
    rec = Ledger(workspace).append("finish", record, tool="finish")
    md = write_report(workspace)
    return FinishResult(accepted=True, outcome=args.outcome, seq=rec.seq, evidence=gate.evidence,
                        comparison=gate.comparison, report_path=md.relative_to(Path(workspace)).as_posix(),
                        report_markdown=md.read_text(encoding="utf-8"))
