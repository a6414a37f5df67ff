"""The final report, rendered from the evidence ledger alone.

Every number in the report is copied from a ledger record (serialised exactly as the ledger stores it,
so `0.4837` stays `0.4837`); the report computes no statistics, counts or roundings of its own. The
agent's explanation appears only in the "root cause" section, marked as the agent's words.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .gate import localization
from .ledger import Ledger, LedgerRecord
from .records import (
    Comparison,
    FileEvent,
    FinishEvent,
    FinishPayload,
    GradcheckEvent,
    GradcheckPayload,
    ObjectiveAtStart,
    PatchEvent,
    RunEvent,
    ShrinkEvent,
    SymptomGoneEvent,
    UndoEvent,
    WorkflowPayload,
)
from .state_files import STATE_DIR, StateDir
from .workflow import the_workflow

_FINDING_KEYS = ("warnings", "findings", "hypotheses", "issues", "divergences", "suspects")
_TEXT_KEYS = ("summary", "conclusion", "message", "verdict", "first_divergence", "localization")
_REF_KEYS = ("reference", "references", "docs", "doc_section", "docs_section")
_CHECK_FIELDS = ("objective", "gradient", "signature", "explanation", "max_rel_error", "max_abs_error", "factor",
                 "ratio_mean", "eps", "noise_band", "objective_value", "iteration", "full_horizon", "mode", "script",
                 "probe", "device", "warp_version", "reason", "notes")
_PARAM_FIELDS = ("name", "size", "max_abs_err", "max_rel_err", "ratio")


class CheckEntry(BaseModel):
    seq: int
    role: str = Field(description="before (the failing check the fix answers), after (its passing rerun), or check.")
    passed: bool | None
    harness_id: str | None
    fields: dict[str, Any] = Field(description="Numbers and labels copied from the record's payload.")
    params: list[dict[str, Any]] = Field(default_factory=list)
    localization: str | None = Field(None, description="Why this check is localization evidence, not a check of "
                                     "the workflow (None: it checked the workflow).")


class FindingEntry(BaseModel):
    seq: int
    kind: str
    tool: str | None
    lines: list[str] = Field(description="Findings as text, copied from the record.")


class PatchEntry(BaseModel):
    seq: int
    paths: list[str]
    diff: str
    reason: str = ""
    undone: bool = False


class RunEntry(BaseModel):
    seq: int
    role: str
    fields: dict[str, Any]


class FileEntry(BaseModel):
    seq: int
    path: str
    purpose: str = ""
    sha256: str | None = None


class Report(BaseModel):
    """Everything `warpgrad report` shows, taken from the ledger."""

    ledger_ok: bool
    ledger_problems: list[str] = Field(default_factory=list)
    records: int = 0
    signed: bool = Field(False, description="Every record carries a valid signature under this machine's key.")
    unsigned: list[int] = Field(default_factory=list, description="Records without a valid signature.")
    key_id: str | None = None
    bound: bool = Field(False, description="Every record names this workspace and the ledger ends where the head "
                        "kept outside the workspace says (re-verified when the report is built).")
    finish_verified: bool = Field(False, description="The finish record is signed and the whole ledger verified "
                                  "(chain, workspace, outside head) when the report was built.")
    comparison: Comparison | None = Field(None, description="The workflow objective before -> after (fixed).")
    outcome: str | None = None
    finish_seq: int | None = None
    root_cause: str | None = Field(None, description="The agent's own words from the finish record.")
    checks: list[CheckEntry] = Field(default_factory=list)
    findings: list[FindingEntry] = Field(default_factory=list)
    patches: list[PatchEntry] = Field(default_factory=list)
    runs: list[RunEntry] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    clean: list[str] = Field(default_factory=list)
    diagnostic_files: list[FileEntry] = Field(default_factory=list)
    workflow: WorkflowPayload | None = Field(None, description="The workflow the gate guards (the first run fixed it).")
    objective_shift: ObjectiveAtStart | None = Field(None, description="The objective at iteration 0 before -> after.")
    hyperparameter_changes: list[str] = Field(default_factory=list)
    gathered: list[str] = Field(default_factory=list, description="Runs finish made itself.")


def _num(v: Any) -> str:
    """A value exactly as the ledger serialises it (None as a dash)."""
    if v is None:
        return "-"
    if isinstance(v, list) and len(v) > 12:  # long trajectories: ends only, still the ledger's own numbers
        return "[" + ", ".join(map(_num, v[:6])) + ", ..., " + ", ".join(map(_num, v[-6:])) + "]"
    if isinstance(v, list):
        return "[" + ", ".join(map(_num, v)) + "]"
    return json.dumps(v, allow_nan=True, ensure_ascii=False) if not isinstance(v, str) else v


def _shown(v: Any) -> bool:
    """Worth a line in the report: not missing, not an empty string, list or mapping."""
    return v is not None and v != "" and v != [] and v != {}


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        head = next((str(item[k]) for k in ("message", "text", "description", "hypothesis", "title", "name")
                     if item.get(k)), "")
        where = ""
        if item.get("path") or item.get("file"):
            where = str(item.get("path") or item.get("file"))
            if item.get("line") is not None:
                where += f":{_num(item['line'])}"
        code = str(item.get("code") or item.get("rule") or "")
        bits = [b for b in (code, where, head) if b]
        extra = {k: v for k, v in item.items()
                 if k in ("kind", "kernel", "argument", "array", "func", "launch", "score", "signature")
                 and v is not None and not isinstance(v, (dict, list))}
        if extra:
            bits.append("(" + ", ".join(f"{k} {_num(v)}" for k, v in extra.items()) + ")")
        return " ".join(bits) if bits else _num(item)
    return _num(item)


def _collect_refs(obj: Any, out: list[str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _REF_KEYS:
                for s in v if isinstance(v, list) else [v]:
                    if isinstance(s, str) and s and s not in out:
                        out.append(s)
            else:
                _collect_refs(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _collect_refs(v, out)


def build_report(workspace: Path) -> Report:
    """Assemble the report from `<workspace>/.warpgrad/ledger.jsonl`."""
    records, check = Ledger(workspace).read()
    rep = Report(ledger_ok=check.ok, ledger_problems=check.problems, records=len(records), signed=check.signed,
                 unsigned=check.unsigned, key_id=check.key_id, bound=check.bound)
    finish = next((r for r in reversed(records) if r.kind == "finish"), None)
    roles: dict[int, str] = {}
    if finish is not None:
        fv = finish.event.payload if isinstance(finish.event, FinishEvent) else FinishPayload()
        rep.outcome = f"{fv.outcome} + {fv.also}" if fv.outcome and fv.also else fv.outcome  # both parts, one outcome
        rep.finish_seq = finish.seq
        # Headlined as accepted only when what the gate requires of the ledger holds right now.
        rep.finish_verified = check.ok and finish.seq not in check.unsigned and isinstance(finish.event, FinishEvent)
        rep.root_cause = fv.summary
        rep.comparison = fv.comparison
        rep.objective_shift, rep.hyperparameter_changes = fv.objective_shift, fv.hyperparameter_changes
        rep.gathered = fv.gathered
        ev = fv.evidence
        for key, role in (("failing_check", "before"), ("passing_check", "after"), ("check", "check"),
                          ("run_before", "before the patch"), ("run_after", "after the patch"),
                          ("baseline_run", "baseline"), ("variant_run", "variant"), ("failed_run", "failed")):
            if isinstance(ev.get(key), int):
                roles[ev[key]] = role
    undone = {e.payload.backup_op for r in records if isinstance(e := r.event, UndoEvent)}
    for r in records:
        _collect_refs(r.payload, rep.references)
        _add_record(rep, r, roles, undone)
    found = the_workflow(records)
    rep.workflow = found[0] if found else None
    local = localization(records, Path(workspace))
    for c in rep.checks:
        c.localization = local.get(c.seq)
    return rep


def _add_record(rep: Report, r: LedgerRecord, roles: dict[int, str], undone: set[str | None]) -> None:
    """One record's part of the report. The numbers shown (`fields`) are copied from the stored payload as
    it is, never through a model, so they read exactly as the ledger has them."""
    e = r.event
    if isinstance(e, GradcheckEvent):
        _add_check(rep, r, e.payload, roles)
    elif isinstance(e, PatchEvent):
        p = e.payload
        rep.patches.append(PatchEntry(seq=r.seq, paths=list(p.paths or r.files), diff=p.diff or "",
                                      reason=p.reason or "", undone=p.backup_op in undone))
    elif isinstance(e, RunEvent):
        fields = {k: r.payload[k] for k in ("script", "args", "changed", "final_loss", "loss_trajectory",
                                             "returncode", "ok", "wall_s", "error") if _shown(r.payload.get(k))}
        rep.runs.append(RunEntry(seq=r.seq, role=roles.get(r.seq, ""), fields=fields))
    elif isinstance(e, FileEvent | ShrinkEvent):
        _add_diagnostic_file(rep, r.seq, e)
    elif isinstance(e, SymptomGoneEvent):
        said = e.payload.model_dump(include={"statement", "user_confirmed"}, exclude_unset=True)
        rep.runs.append(RunEntry(seq=r.seq, role="user statement",
                                 fields={k: v for k, v in said.items() if v is not None}))
    elif not isinstance(e, FinishEvent | UndoEvent):
        _add_finding(rep, r)


def _add_diagnostic_file(rep: Report, seq: int, e: FileEvent | ShrinkEvent) -> None:
    if isinstance(e, FileEvent):
        path, purpose = e.payload.path, e.payload.purpose or ""
    else:
        path, purpose = e.payload.output, f"shrunk copy of {e.payload.script}"
    if path and path not in [f.path for f in rep.diagnostic_files]:
        rep.diagnostic_files.append(FileEntry(seq=seq, path=path, purpose=purpose, sha256=e.payload.sha256))


def _add_check(rep: Report, r: LedgerRecord, p: GradcheckPayload, roles: dict[int, str]) -> None:
    raw = r.payload
    fields = {k: raw[k] for k in _CHECK_FIELDS if _shown(raw.get(k))}
    params = [{k: q[k] for k in _PARAM_FIELDS if k in q} for q in raw.get("params") or [] if isinstance(q, dict)]
    rep.checks.append(CheckEntry(seq=r.seq, role=roles.get(r.seq, "check"), passed=p.passed,
                                 harness_id=p.harness_id, fields=fields, params=params))
    if p.ok and p.passed is True:
        rep.clean.append(f"FD check (record {r.seq}): passed, signature {p.signature or 'not given'}")


def _add_finding(rep: Report, r: LedgerRecord) -> None:
    p = r.payload
    lines = [str(p[k]) for k in _TEXT_KEYS if isinstance(p.get(k), str) and p[k]]
    keys = _FINDING_KEYS + (("records", "other_warnings") if r.kind == "tracker" else ())
    lists = [(k, p[k]) for k in keys if isinstance(p.get(k), list)]
    for _, items in lists:
        lines += [_item_text(it) for it in items]
    if r.kind == "tracker" and (p.get("clean") is True or (lists and not any(items for _, items in lists))):
        rep.clean.append(f"overwrite tracker (record {r.seq}): no warnings")
    elif lists and not any(items for _, items in lists):
        rep.clean.append(f"{r.kind} (record {r.seq}): no findings")
    if lines:
        rep.findings.append(FindingEntry(seq=r.seq, kind=r.kind, tool=r.tool, lines=lines))


def render_markdown(rep: Report) -> str:
    """The report as Markdown (no number appears that is not copied from the ledger)."""
    out = ["# warpgrad report", ""]
    if rep.outcome and rep.finish_verified:
        out.append(f"**Outcome: {rep.outcome}** (finish record {rep.finish_seq}, accepted by the evidence gate).")
    elif rep.outcome:
        out.append(f"**Outcome NOT verified**: finish record {rep.finish_seq} claims `{rep.outcome}`, but it is not "
                   "signed under this machine's key or the ledger failed verification, so the evidence gate does "
                   "not stand behind it.")
    else:
        out.append("No outcome recorded yet: this is an interim report of the evidence so far.")
    if not rep.ledger_ok:
        out += ["", ("**Warning: the ledger failed verification** (edited, truncated or damaged). What follows is "
                     "its readable part and cannot be trusted; run `warpgrad gate` to see the problems.")]
    out += ["", _signature_line(rep)]
    out.append("")
    if rep.root_cause:
        out += ["## Root cause (the agent's words, not a measurement)", ""]
        out += [f"> {line}" if line else ">" for line in rep.root_cause.splitlines()]
        out.append("")
    if rep.comparison is not None:
        cmp = rep.comparison
        out += ["## Workflow objective", "",
                (f"Workflow objective before -> after (records {cmp.before_seq} -> {cmp.after_seq}): {cmp.quantity} "
                f"{_num(cmp.before)} -> {_num(cmp.after)} ({cmp.verdict})."), ""]
    out += _workflow_lines(rep)
    if rep.checks:
        out += ["## Finite-difference evidence", ""]
        before = next((c for c in rep.checks if c.role == "before"), None)
        after = next((c for c in rep.checks if c.role == "after"), None)
        if before and after:
            pairs = [f"{k} {_num(before.fields[k])} -> {_num(after.fields[k])}"
                     for k in ("signature", "max_rel_error", "factor") if k in before.fields and k in after.fields]
            out += [f"Before -> after, same harness (records {before.seq} -> {after.seq}): " + "; ".join(pairs), ""]
        for c in rep.checks:
            verdict = {True: "passed", False: "FAILED", None: "inconclusive"}[c.passed]
            title = {"before": "Before the fix", "after": "After the fix"}.get(c.role, "FD check")
            out.append(f"### {title}: record {c.seq}, {verdict}")
            out.append("")
            if c.localization:
                out += [f"- localization evidence, not a check of the workflow: {c.localization}"]
            if c.harness_id:
                out.append(f"- harness: `{c.harness_id}`")
            out += [f"- {k}: {_num(v)}" for k, v in c.fields.items()]
            if c.params:
                cols = [k for k in _PARAM_FIELDS if any(k in q for q in c.params)]
                out += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                out += ["| " + " | ".join(_num(q.get(k, "")) for k in cols) + " |" for q in c.params]
            out.append("")
    if rep.findings:
        out += ["## What the instruments found", ""]
        for f in rep.findings:
            out.append(f"- **{f.kind}** (record {f.seq}{', ' + f.tool if f.tool and f.tool != f.kind else ''}):")
            out += [f"  - {line}" for line in f.lines]
        out.append("")
    if rep.patches:
        out += ["## The fix", ""]
        for p in rep.patches:
            state = " (undone later)" if p.undone else ""
            out.append(f"Patch record {p.seq}: {', '.join(p.paths)}{state}" + (f". Reason given: {p.reason}"
                                                                                if p.reason else ""))
            out += ["", "```diff", p.diff.rstrip("\n"), "```", ""]
    if rep.runs:
        out += ["## Workflow runs", ""]
        for r in rep.runs:
            role = f" ({r.role})" if r.role else ""
            out.append(f"- record {r.seq}{role}: " + ", ".join(f"{k} {_num(v)}" for k, v in r.fields.items()))
        out.append("")
    if rep.references:
        out += ["## Warp documentation", ""] + [f"- {s}" for s in rep.references] + [""]
    if rep.clean:
        out += ["## Checked and clean", ""] + [f"- {s}" for s in rep.clean] + [""]
    if rep.diagnostic_files:
        out += ["## Diagnostic scripts kept in the workspace", ""]
        for df in rep.diagnostic_files:
            out.append(f"- `{df.path}`" + (f": {df.purpose}" if df.purpose else "") + f" (record {df.seq})")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _workflow_lines(rep: Report) -> list[str]:
    """The workflow the gate guarded, the objective at iteration 0 before -> after, and every change of a
    hyper-parameter (constant or argument), whatever the outcome."""
    if rep.workflow is None:
        return []
    wf = rep.workflow
    out = ["## Workflow", "", f"- script: `{' '.join([wf.script, *wf.args])}` (objective: {wf.objective})"]
    if wf.constants:
        out.append("- module constants: " + ", ".join(f"{k} = {v}" for k, v in wf.constants.items()))
    sh = rep.objective_shift
    if sh is not None:
        state = {True: "MOVED", False: "unchanged", None: "not measured on both sides"}[sh.moved]
        out.append(f"- objective at iteration 0 before -> after the patch (records {sh.before_seq} -> "
                   f"{sh.after_seq}): {_num(sh.before)} -> {_num(sh.after)} ({state})")
    if (rep.outcome or "").startswith("objective_changed"):
        out.append("- **the agent declared that the patch changed the objective**; its reason is the root cause "
                   "above: the run before and the run after measure different objectives")
    if rep.hyperparameter_changes:
        out.append("- hyper-parameters changed from the workflow's: " + "; ".join(rep.hyperparameter_changes))
    if rep.gathered:
        out.append("- finish ran itself: " + "; ".join(rep.gathered))
    return [*out, ""]


def _signature_line(rep: Report) -> str:
    if rep.records and rep.signed and rep.ledger_ok:
        where = ("bound to this workspace, ending where the head kept outside it says" if rep.bound else
                 "written before ledgers named their workspace (unbound): its end is checked only against "
                 "the head inside the workspace")
        return (f"Ledger: hash chain intact, every record signed with this machine's warpgrad key "
                f"(key id `{rep.key_id}`), {where}.")
    if rep.records and rep.signed:
        return ("Ledger: every record carries a signature, but the ledger FAILED verification (see the warning "
                "above): it is not this workspace's whole history.")
    if not rep.records:
        return "Ledger: empty."
    shown = ", ".join(map(str, rep.unsigned[:20])) + (", ..." if len(rep.unsigned) > 20 else "")
    return (f"**Ledger NOT signed**: record(s) {shown} carry no valid signature under this "
            f"machine's key ({'key id `' + rep.key_id + '`' if rep.key_id else 'no key exists here'}): they were "
            "written by something that cannot read the key, or on another machine. The gate refuses every outcome.")


def report_json(rep: Report) -> str:
    """The report as JSON; NaN and inf stay NaN and inf (as in the ledger), not null."""
    return json.dumps(rep.model_dump(), indent=1, allow_nan=True, ensure_ascii=False)


def write_report(workspace: Path) -> Path:
    """Render the report to `.warpgrad/report.md` (and `report.json` beside it); return the Markdown path.

    Written like every state file (`state_files.py`): a link planted at either name is replaced, never
    followed."""
    rep = build_report(workspace)
    with StateDir.of_workspace(Path(workspace)) as d:
        d.write_atomic("report.md", render_markdown(rep).encode("utf-8"))
        d.write_atomic("report.json", report_json(rep).encode("utf-8"))
    return Path(workspace) / STATE_DIR / "report.md"
