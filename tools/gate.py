"""The finish gate: does the evidence in the ledger say what an outcome claims?

`check_finish(workspace, outcome)` is the one gate every front end calls (the `finish` tool, `warpgrad
gate`, hooks, the eval runner). It reads the ledger (`warpgrad.tools.ledger`, the append-only log) and
the files on disk, and lists what is missing, each item tagged with the validity rule it comes from.

The rules are named like linter rules (`RULES`: id, name, summary, why, what satisfies it). The gate
does not only check that evidence of the right kinds exists in the right order; it checks that each
piece *says* what the outcome claims: a check of a sub-array is not a check of the objective, a check
that found all zeros is not a pass, a run whose loss could not be read proves no improvement, and a
failing check on the files as they are now is not outweighed by an older pass with another harness.

Ledger records are read as their typed kinds (`warpgrad.tools.records`: `GradcheckEvent`, `RunEvent`,
...); a payload that does not have its kind's shape is not evidence.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .ledger import Ledger, LedgerRecord, disk_hashes
from .metric import MetricSpec
from .records import (
    Comparison,
    GradcheckEvent,
    GradcheckPayload,
    ObjectiveAtStart,
    ObjectiveKind,
    PatchEvent,
    PatchPayload,
    RunEvent,
    RunPayload,
    ShrinkEvent,
    SymptomGoneEvent,
    TrackerEvent,
    WorkflowPayload,
)
from .workflow import constant_changes, departures, program_constants, the_workflow

Outcome = Literal["fixed", "objective_changed", "gradients_correct", "not_a_gradient_bug", "blocked",
                  "diagnosis_only"]
OUTCOMES: tuple[str, ...] = ("fixed", "objective_changed", "gradients_correct", "not_a_gradient_bug", "blocked",
                             "diagnosis_only")
CORRECT_CLAIMS = ("fixed", "objective_changed", "gradients_correct", "not_a_gradient_bug")
OtherCause = Literal["learning_rate_too_high", "ill_posed_objective", "chaos"]
MIN_DIRECTIONS = 3  # resolved agreeing directions per checked iteration (G006)
# A gradient fix leaves the forward as it was; float32 sums reordered by a fix move it by ~1e-7 relative per
# term, far below this. A horizon cut or a removed code path moves it by orders of magnitude more.
OBJECTIVE_RTOL = 1e-4


# ---------------------------------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------------------------------


class Rule(BaseModel):
    """One validity rule of the gate, documented like a linter rule."""

    id: str
    name: str
    summary: str = Field(description="One line: what the rule requires.")
    why: str = Field(description="The false outcome it prevents.")
    satisfied_by: str = Field(description="What evidence satisfies it.")


RULES: dict[str, Rule] = {r.id: r for r in (
    Rule(id="G001", name="intact-signed-ledger",
         summary="The ledger's hash chain verifies and every record is signed with this machine's key.",
         why="Records appended or rewritten by something that cannot read the key (a script in the workspace, a "
             "collaborator, a copied ledger) would otherwise prove anything.",
         satisfied_by="A ledger written only through warpgrad's tools on this machine."),
    Rule(id="G002", name="no-current-failure",
         summary="No outcome that claims correct gradients stands while a check on the current files fails.",
         why="An older pass with another harness or iteration outweighed the latest failing check.",
         satisfied_by="Every conclusive check on the files as they are now passes, or a later check explains the "
                      "failure: the failing check is marked unreliable by the engine (`nondeterministic`, or "
                      "`unreliable_reason`) and a "
                      "later passing check of the full objective on the same files names it in `supersedes`."),
    Rule(id="G003", name="full-objective",
         summary="A check of a partial objective (a named variable, a sub-array, an intermediate, an undeclared "
                 "probe) never satisfies gradients_correct or fixed.",
         why="A check that the per-element array's gradient is right says nothing about the mean the script "
             "optimizes.",
         satisfied_by="A check with objective_kind 'script', or 'probe_declared' that passes G004."),
    Rule(id="G004", name="probe-tied-to-script",
         summary="A probe's check counts only when its grad() was compared, at the same parameters, with the "
                 "gradient the script's update applies.",
         why="A probe whose loss() matched an edited print line counted as the objective while its grad() was "
             "never compared with what the script's optimizer consumes.",
         satisfied_by="Nothing yet: warpgrad makes no probe-vs-update comparison, so a probe check is localization "
                      "evidence; check the workflow itself (gradcheck with the workflow's script and arguments)."),
    Rule(id="G005", name="nonzero-pass",
         summary="A check that found a zero objective, zero AD and zero FD is not a pass.",
         why="All-zero numbers agree trivially: nothing depended on the parameters (a stale or disconnected read).",
         satisfied_by="A check where the objective, AD or FD is nonzero."),
    Rule(id="G006", name="first-and-later-iteration",
         summary=f"gradients_correct and fixed need resolved agreement in at least {MIN_DIRECTIONS} directions at "
                 "the first training iteration and at a later one, on the workflow.",
         why="A check at iteration 0 (where a stale or accumulated gradient is invisible) plus one direction at a "
             "later iteration was accepted for a broken program.",
         satisfied_by=f"Passing checks of the workflow whose per-iteration results show {MIN_DIRECTIONS}+ agreeing "
                      "directions at iteration 0 and at some iteration > 0 (gradcheck's default does both)."),
    Rule(id="G007", name="workflow-run",
         summary="gradients_correct needs a completed run of the workflow (its script and arguments) on the files "
                 "as they are now.",
         why="Without it nothing ties the checked program to what the user runs.",
         satisfied_by="A run_script record that completed and imported the checked program files unchanged."),
    Rule(id="G008", name="fix-evidence-chain",
         summary="fixed needs a failing check, a patch after it, and a passing check with the same harness on the "
                 "patched files as they are now.",
         why="Before/after with the same harness is the only like-for-like proof that the patch changed the "
             "gradient.",
         satisfied_by="gradcheck before the patch (fails) and again after it with the same arguments (passes)."),
    Rule(id="G009", name="clean-tracker",
         summary="fixed needs a clean overwrite-tracker run on the patched files.",
         why="A passing FD check can hide an overwrite the tracker sees.",
         satisfied_by="instrument (the tracker) after the last patch, with no warnings."),
    Rule(id="G010", name="objective-before-after",
         summary="fixed needs the workflow run before the patch and a rerun after it, both showing the objective "
                 "or the named metric, and the rerun improving on it; the report states before -> after.",
         why="A run whose loss could not be read (nothing parsed) compared nothing.",
         satisfied_by="The workflow run before the patch (diagnose's run counts, compared where it was cut short) "
                      "and a rerun after it, with a parsed loss or a `metric`; finish makes the rerun itself."),
    Rule(id="G011", name="checks-the-workflow",
         summary="Only checks of the workflow (its script, arguments and module constants, fixed by the first run "
                 "or diagnose) satisfy gradients_correct or fixed; anything else is localization evidence.",
         why="A wrapper that ran the program with T=1, a --small run, or a module constant edited from 60 to 1 "
             "passed where the program the user runs is broken.",
         satisfied_by="A check with the workflow's script and arguments on files whose module constants equal the "
                      "workflow's (finish(outcome='objective_changed', summary=why) when a constant changed on "
                      "purpose)."),
    Rule(id="G012", name="objective-invariant",
         summary="fixed needs the workflow's objective at the initial parameters (iteration 0) unchanged by the "
                 f"patch, within a relative {OBJECTIVE_RTOL:g}.",
         why="Cutting the horizon or raising a threshold past the buggy code path makes the gradient match by "
             "changing what is optimized, not by fixing its gradient.",
         satisfied_by="The failing check before the patch and the passing one after it both checked iteration 0 of "
                      "the workflow and report the same objective there; otherwise declare the change: "
                      "finish(outcome='objective_changed', summary=why)."),
    Rule(id="G013", name="second-cause-evidence",
         summary="A fix that names a second cause besides the gradient bug (learning rate too high, an ill-posed "
                 "objective, chaos) needs that cause's own evidence.",
         why="A partial fix plus a learning-rate change was accepted as a gradient fix, the improvement coming "
             "from the learning rate; one outcome must say both parts and show each.",
         satisfied_by="The fix chain for the gradient bug, and after the last patch a run with the cause changed "
                      "(its arguments differ from the workflow's, e.g. a smaller --lr) that improves on the "
                      "workflow's own rerun after the patch."),
)}


def tagged(rule_id: str, text: str) -> str:
    """A missing piece, prefixed with the rule it comes from."""
    return f"[{rule_id} {RULES[rule_id].name}] {text}"


# ---------------------------------------------------------------------------------------------------
# Policy on the typed payloads (`warpgrad.tools.records`)
# ---------------------------------------------------------------------------------------------------


def objective_kind(v: GradcheckPayload) -> ObjectiveKind:
    """The objective kind; records from before the field get it inferred the way capture now sets it.

    Whatever a record says, a probe's loss() is never "script" and a capture of a named variable
    (`--objective NAME`) is never more than "partial" (the contract with capture).
    """
    if v.mode == "probe":
        if v.objective_kind in ("probe", "probe_declared"):
            return v.objective_kind
        return "probe_declared" if v.harness.declared_objective else "probe"
    if v.harness.objective:
        return "partial"
    return v.objective_kind or "script"


def all_zero(v: GradcheckPayload) -> bool:
    """Zero objective, zero AD and zero FD (G005): numbers that agree because nothing was measured."""
    if v.objective_value is None or v.objective_value != 0.0:
        return False
    if v.directions:
        return all(d.ad == 0.0 and d.fd == 0.0 for d in v.directions)
    known = [p for p in v.params if p.ad_norm is not None or p.ad is not None or p.fd is not None]
    return bool(known) and all((p.ad_norm or 0.0) == 0.0 and (p.ad or 0.0) == 0.0 and (p.fd or 0.0) == 0.0
                               for p in known)


def _patch(r: LedgerRecord) -> PatchPayload:
    """A patch record's payload (an empty one when the record's payload does not have the shape of a patch:
    the record still counts as a patch of its `files`)."""
    return r.event.payload if isinstance(r.event, PatchEvent) else PatchPayload()


# ---------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------


ObjectiveShift = ObjectiveAtStart  # the gate's name for the record model


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


# ---------------------------------------------------------------------------------------------------
# Evidence: the ledger read once, with typed views and the files on disk
# ---------------------------------------------------------------------------------------------------


class Check:
    """A gradcheck record with its view and the gate's judgement of it."""

    def __init__(self, rec: LedgerRecord, view: GradcheckPayload, kind: ObjectiveKind, kind_why: str) -> None:
        self.rec, self.v, self.kind, self.kind_why = rec, view, kind, kind_why

    @property
    def seq(self) -> int:
        return self.rec.seq

    @property
    def files(self) -> dict[str, str]:
        return self.rec.files

    def full_objective(self) -> bool:
        return self.kind in ("script", "probe_declared")

    def real_pass(self) -> bool:
        return self.v.passed is True and not all_zero(self.v)

    def unreliable(self) -> str | None:
        """Why the engine marked this check unreliable (None: it did not)."""
        if self.v.unreliable_reason:
            return self.v.unreliable_reason
        return "the objective is not deterministic" if self.v.nondeterministic else None


class Evidence:
    def __init__(self, records: list[LedgerRecord], workspace: Path) -> None:
        self.records = with_provenance(records)
        self.workspace = workspace
        found = the_workflow(self.records)
        self.workflow: WorkflowPayload | None = found[0] if found else None
        self.workflow_seq: int | None = found[1] if found else None
        self._disk: dict[str, str | None] = {}
        self.runs = [(r, e.payload) for r in self.records if isinstance(e := r.event, RunEvent)]
        self.checks: list[Check] = []
        for r in self.records:
            if not isinstance(e := r.event, GradcheckEvent) or not e.payload.ok:
                continue
            v = e.payload
            kind, why = self._judge_kind(r, v)
            self.checks.append(Check(r, v, kind, why))

    def stale(self, r: LedgerRecord) -> list[str]:
        """The record's files whose bytes on disk differ now (each file hashed once per gate decision)."""
        todo = [rel for rel in r.files if rel not in self._disk]
        self._disk.update(disk_hashes(self.workspace, todo))
        return [rel for rel, sha in r.files.items() if self._disk[rel] != sha]

    def current(self, r: LedgerRecord) -> bool:
        return bool(r.files) and not self.stale(r)

    def _judge_kind(self, r: LedgerRecord, v: GradcheckPayload) -> tuple[ObjectiveKind, str]:
        kind = objective_kind(v)
        if kind == "partial":
            what = f"the named variable {v.harness.objective!r}" if v.harness.objective else "a partial objective"
            return kind, f"it differenced {what}, not the objective the script reports"
        if kind in ("probe", "probe_declared"):
            # G004: agreement of loss() with a printed line ties nothing to the gradient the update applies.
            return "probe", (f"it checked the probe {v.probe or '?'}, whose grad() was never compared with the gradient "
                             "the script's update applies at the same parameters")
        return kind, ""

    def departures(self, c: Check, *, constants: bool = True) -> list[str]:
        """G011: how a check departs from the workflow (empty: it checked the workflow). Constants are read from
        the files on disk, so they are compared only for a check on the files as they are now."""
        if self.workflow is None:
            return []  # nothing to depart from: G007/G010 ask for the run that fixes the workflow
        program = [p for p in c.files if p != c.v.probe]
        consts = program_constants(self.workspace, program) if constants and self.current(c.rec) else None
        return departures(self.workflow, c.v.script, c.v.harness.args, consts)

    def run_departures(self, r: LedgerRecord, v: RunPayload) -> list[str]:
        """How a run departs from the workflow (script and arguments; constants when it is current)."""
        if self.workflow is None:
            return []
        consts = program_constants(self.workspace, r.files) if self.current(r) else None
        return departures(self.workflow, v.script, v.args, consts)


# ---------------------------------------------------------------------------------------------------
# Helpers shared by the outcomes
# ---------------------------------------------------------------------------------------------------


def _short(h: str | None) -> str:
    return (h or "?")[:12]


def _patched_paths(r: LedgerRecord) -> set[str]:
    """The user's files a patch changed (warpgrad's own diagnostic files do not count as the program)."""
    p = _patch(r)
    paths = set(p.paths) | set(p.after) or set(r.files)
    return paths - set(p.diagnostic)


def with_provenance(records: list[LedgerRecord]) -> list[LedgerRecord]:
    """Records whose `files` also name the program a shrunk copy was cut from.

    A check that ran `sim_shrunk.py` exercised `sim.py` as it was when `shrink` copied it (only values
    differ, and shrink proves that). So when a record's file is a shrink output with the same hash, the
    source path and its hash at shrink time are added: patching `sim.py` afterwards makes the check stale
    until the copy is cut again, and a check on a fresh copy counts as exercising the patched `sim.py`.
    """
    copies: dict[tuple[str, str], tuple[str, str]] = {}
    out = []
    for r in records:
        sv = r.event.payload if isinstance(r.event, ShrinkEvent) else None
        if sv is not None and sv.source_sha256 and sv.output and sv.sha256 and sv.script:
            copies[(sv.output, sv.sha256)] = (sv.script, sv.source_sha256)
        extra = {copies[(k, v)][0]: copies[(k, v)][1] for k, v in r.files.items() if (k, v) in copies}
        extra = {k: v for k, v in extra.items() if k not in r.files}
        out.append(r.model_copy(update={"files": {**r.files, **extra}}) if extra and r.kind != "shrink" else r)
    return out


def _same_workflow(a: RunPayload, b: RunPayload, *, same_args: bool = False) -> bool:
    """Runs of the same script (and, with same_args, the same arguments: a rerun at a smaller learning
    rate does not show that a patch fixed anything)."""
    if not (a.script is None or b.script is None or a.script == b.script):
        return False
    return not same_args or a.args == b.args


class _Quantity(BaseModel):
    label: str
    values: list[float]
    badness_sign: float = 1.0
    metric: MetricSpec | None = None

    def bad(self, v: float) -> float:
        return self.metric.badness(v) if self.metric is not None else self.badness_sign * v


def _quantity(rv: RunPayload, metric: MetricSpec | None) -> _Quantity:
    """The values a run is judged by: the named metric (re-read from the recorded output when the run was
    made before the metric was named), else its loss trajectory (or final loss)."""
    if metric is not None:
        vals = rv.metric_values if rv.metric == metric else metric.values(rv.stdout_tail)
        return _Quantity(label=metric.label(), values=vals, metric=metric)
    traj = rv.trajectory()
    if rv.final_loss is not None:  # the run's own final value wins over the last parsed point
        traj = [*traj[:-1], rv.final_loss]
    sign = -1.0 if rv.objective_direction == "max" else 1.0
    return _Quantity(label="final loss" + (" (higher is better)" if sign < 0 else ""), values=traj,
                     badness_sign=sign)


def objective_improves(before: LedgerRecord, after: LedgerRecord) -> tuple[bool, str, Comparison | None]:
    """Does the workflow run `after` improve on `before`? The verdict, why in words, and the comparison.

    The quantity is the metric `after` names (`run_script(metric=...)`), else the loss. Lower is better
    unless the metric says otherwise (or the run says `objective_direction: "max"`). The run before must
    show the quantity at all (G010: a run with nothing parsed compares nothing). A finite final value
    improves on a non-finite one only when the later run's own trajectory also improves (the skill's rule:
    an exploding optimisation must now improve, not merely avoid NaN).
    """
    if not isinstance(before.event, RunEvent) or not isinstance(after.event, RunEvent):
        return False, "a run record does not have the shape of a run_script result", None
    bv, av = before.event.payload, after.event.payload
    if av.failed():
        return False, f"the rerun (record {after.seq}) failed", None
    q_after = _quantity(av, av.metric)
    q_before = _quantity(bv, av.metric)
    if not q_after.values:
        what = f"no value of the {q_after.label}" if av.metric else "no final_loss or loss_trajectory"
        return False, (f"the rerun (record {after.seq}) reports {what}; if the script prints a metric rather than a "
                       "loss, rerun it with run_script(metric=NAME or metric_regex=..., metric_direction=...)"), None
    if not q_before.values:
        what = f"no value of the {q_before.label}" if av.metric else "no loss that could be parsed"
        return False, (f"the run before the patch (record {before.seq}) shows {what}, so there is nothing to compare "
                       "the rerun with: name the quantity the script prints (run_script metric=...) or run the "
                       "unpatched workflow again (undo, run, redo)"), None
    where = ""
    if bv.cut_short_at is not None and len(q_after.values) > len(q_before.values):
        # The run before was stopped once its trend was read (diagnose): compare at the same printed point.
        q_after = q_after.model_copy(update={"values": q_after.values[:len(q_before.values)]})
        where = f" at printed point {len(q_before.values)} (where the run before was cut short)"
    a, b = q_after.values[-1], q_before.values[-1]
    cmp = Comparison(quantity=q_after.label + where, before_seq=before.seq, after_seq=after.seq, before=b, after=a,
                     verdict="")
    if not math.isfinite(a):
        return False, f"the rerun (record {after.seq}) still ends at a non-finite objective ({q_after.label})", None
    if not any(math.isfinite(x) for x in q_before.values):
        return False, (f"every value of the {q_before.label} in the run before the patch (record {before.seq}) is "
                       "non-finite: nothing was measured to compare with; run the unpatched workflow so it "
                       "prints at least one finite value (fewer iterations), or name a metric it does print"), None
    if not math.isfinite(b) or bv.failed():
        traj = q_after.values
        if len(traj) >= 2 and all(math.isfinite(v) for v in traj) and q_after.bad(traj[-1]) < q_after.bad(traj[0]):
            cmp.verdict = "finite and improving where the run before ended non-finite or failed"
            return True, cmp.verdict, cmp
        return False, (f"the run before (record {before.seq}) was non-finite or failed, but the rerun "
                       f"(record {after.seq}) does not show its objective improving over its own trajectory"), None
    if q_after.bad(a) < q_after.bad(b):
        cmp.verdict = f"{q_after.label} improved"
        return True, cmp.verdict, cmp
    return False, (f"the rerun (record {after.seq}) ends at {a!r}, which does not improve on {b!r} "
                   f"(record {before.seq}) by the {q_after.label}"), None


def _current_failures(ev: Evidence, *, after_seq: int = -1) -> list[str]:
    """G002: conclusive failing checks on the files as they are now, not explained by a later check."""
    out = []
    for f in ev.checks:
        if f.v.passed is not False or f.seq <= after_seq or not ev.current(f.rec):
            continue
        explainer = next((c for c in ev.checks if c.seq > f.seq and f.seq in c.v.supersedes and c.real_pass()
                          and c.full_objective() and ev.current(c.rec) and c.files == f.files), None)
        if explainer is not None and f.unreliable():
            continue
        hint = ""
        if explainer is not None:
            hint = (f"; check {explainer.seq} claims to supersede it but the engine did not mark the failing check "
                    "unreliable")
        elif f.unreliable():
            hint = (f"; the engine marked it unreliable ({f.unreliable()}) but no later passing check of the "
                    "full objective on these files supersedes it")
        out.append(tagged("G002", (
            f"the check at record {f.seq} (harness {_short(f.v.harness_id)}, iterations "
            f"{f.v.covered_iterations()}) FAILED on the files as they are now{hint}: a failing check on the current "
            "files outweighs any pass; find out why it fails (or fix it) and check again")))
    return out


def _not_a_pass(ev: Evidence, c: Check, *, constants: bool = True) -> tuple[str, str] | None:
    """(rule, why) when a passing check is no pass of the workflow's objective; None when it is one.
    `constants=False` (objective_changed: the model declared a changed constant) compares script and args only."""
    if c.kind == "probe":
        return "G004", f"localization evidence ({c.kind_why})"
    if not c.full_objective():
        return "G003", f"partial evidence ({c.kind_why})"
    away = ev.departures(c, constants=constants)
    if away:
        return "G011", "localization evidence, not a check of the workflow: " + "; ".join(away)
    if all_zero(c.v):
        return "G005", "it found a zero objective, zero AD and zero FD (nothing was measured)"
    return None


def _strength(c: Check) -> dict[int, int]:
    """Iteration -> resolved agreeing directions, for the iterations the check passed (G006). Records from
    before `per_iteration` show only their lead iteration's directions."""
    if c.v.per_iteration:
        return {p.iteration: p.agreeing_directions for p in c.v.per_iteration if p.passed is True}
    if c.v.passed is True and c.v.directions:
        return {c.v.iteration if c.v.iteration is not None else 0: sum(d.agrees() for d in c.v.directions)}
    return {}


def _strength_missing(checks: list[Check], call: str) -> list[str]:
    """G006: resolved agreement in MIN_DIRECTIONS directions at iteration 0 and at a later iteration."""
    best: dict[int, int] = {}
    for c in checks:
        for it, n in _strength(c).items():
            best[it] = max(best.get(it, 0), n)
    first = best.get(0, 0)
    later = max((n for it, n in best.items() if it > 0), default=0)
    if first >= MIN_DIRECTIONS and later >= MIN_DIRECTIONS:
        return []
    shown = ", ".join(f"iteration {it}: {n}" for it, n in sorted(best.items())) or "no passing iteration with directions"
    return [tagged("G006", (
        f"resolved agreement in {MIN_DIRECTIONS}+ directions at iteration 0 and at a later iteration of the "
        f"workflow: the passing checks show {shown} agreeing direction(s); call {call}"))]


def _objective_at_start(c: Check) -> float | None:
    """The objective the check measured at iteration 0 (the script's initial parameters), if it checked it."""
    for p in c.v.per_iteration:
        if p.iteration == 0:
            return p.objective_value
    if not c.v.per_iteration and c.v.iteration == 0:
        return c.v.objective_value
    return None


def objective_shift(f: Check, a: Check) -> ObjectiveShift:
    b, v = _objective_at_start(f), _objective_at_start(a)
    moved = None
    if b is not None and v is not None and math.isfinite(b) and math.isfinite(v):
        moved = not math.isclose(b, v, rel_tol=OBJECTIVE_RTOL, abs_tol=1e-30)
    return ObjectiveAtStart(before_seq=f.seq, after_seq=a.seq, before=b, after=v, moved=moved)


def _invariance_missing(shift: ObjectiveShift) -> list[str]:
    """G012: the patch left the objective at the initial parameters where it was."""
    if shift.moved is False:
        return []
    if shift.moved is None:
        return [tagged("G012", (
            f"the workflow's objective at iteration 0 before and after the patch: the failing check (record "
            f"{shift.before_seq}) shows {shift.before!r} and the passing one (record {shift.after_seq}) {shift.after!r}; "
            "both must have checked iteration 0 (gradcheck without --iteration checks it)"))]
    return [tagged("G012", (
        f"an objective the patch left unchanged: at iteration 0 it was {shift.before!r} before the patch (record "
        f"{shift.before_seq}) and is {shift.after!r} after it (record {shift.after_seq}): the patch changed what is "
        "optimized, not only its gradient. Undo it (undo) and fix the gradient, or, if the change is intended, call "
        "finish(outcome='objective_changed', summary=<why the objective had to change>)"))]


# ---------------------------------------------------------------------------------------------------
# The outcomes
# ---------------------------------------------------------------------------------------------------


class _Out(BaseModel):
    missing: list[str] = Field(default_factory=list)
    evidence: dict[str, int] = Field(default_factory=dict)
    comparison: Comparison | None = None
    shift: ObjectiveShift | None = None


def _fixed(ev: Evidence, *, declared: bool = False) -> _Out:
    failing = [c for c in ev.checks if c.v.passed is False]
    if not failing:
        return _Out(missing=[tagged("G008", (
            "a failing FD check (a gradcheck record with ok=true and passed=false): run gradcheck on the program "
            "before patching so the wrong gradient is on record"))])
    # Every patch record counts, a malformed one too (its `files` then stand for the paths it changed).
    patches = [r for r in ev.records if r.kind == "patch"]
    best: _Out | None = None
    for f in reversed(failing):
        cand = _fixed_from(ev, f, patches, declared)
        if best is None or len(cand.missing) < len(best.missing):
            best = cand
        if not best.missing:
            break
    assert best is not None
    best.missing = _current_failures(ev) + best.missing
    return best


def _fixed_from(ev: Evidence, f: Check, patches: list[LedgerRecord], declared: bool) -> _Out:
    out = _Out(evidence={"failing_check": f.seq})
    after_f = [p for p in patches if p.seq > f.seq and _patched_paths(p)]
    if not after_f:
        msg = (f"a patch (edit_file or apply_patch) of the user's program recorded after the failing check (record "
               f"{f.seq})")
        if any(p.seq > f.seq for p in patches):
            msg += "; the patches since only changed warpgrad's own diagnostic files (probe, shrunk copy)"
        out.missing.append(tagged("G008", msg))
        return out
    first_patch = after_f[0]
    hid = f.v.harness_id
    passing = [c for c in ev.checks if c.v.passed is True and c.seq > first_patch.seq]
    same = [c for c in passing if hid and c.v.harness_id == hid]
    if not same:
        msg = (f"a passing FD check after the patch with the same harness as the failing check (record {f.seq}, "
               f"harness_id {_short(hid)}): rerun gradcheck with the same script or probe, eps policy, seed and "
               "iteration")
        if passing:
            msg += (f"; the passing check (record {passing[-1].seq}) used a different harness "
                    f"({_short(passing[-1].v.harness_id)}), so it does not compare like with like")
        more = _after_patch_needs(ev, after_f[-1], first_patch, set(), improve=not declared)
        out.missing = [tagged("G008", msg), *more.missing]
        return out
    best: _Out | None = None
    for a in reversed(same):
        cand = _Out(evidence=dict(out.evidence, passing_check=a.seq))
        in_fix = [p for p in after_f if p.seq < a.seq]
        cand.evidence["patch"] = in_fix[-1].seq
        patched = set().union(*(_patched_paths(p) for p in in_fix))
        stale = ev.stale(a.rec)
        bad = _not_a_pass(ev, a, constants=not declared)
        if bad:
            cand.missing.append(tagged(bad[0], (
                f"the passing check (record {a.seq}) is not a pass of the workflow's objective: {bad[1]}; call "
                "gradcheck with the workflow's script and arguments")))
        else:
            sound = [c for c in same if ev.current(c.rec) and not _not_a_pass(ev, c, constants=not declared)]
            cand.missing += _strength_missing(sound, "gradcheck with the workflow's script and arguments, without "
                                              "--iteration (it checks iteration 0 and a later one)")
        cand.shift = objective_shift(f, a)
        if not declared:
            cand.missing += _invariance_missing(cand.shift)
        if not a.files:
            cand.missing.append(tagged("G008", (
                f"the passing check (record {a.seq}) lists no files it imported, so it cannot be tied to the program "
                "on disk: rerun gradcheck through the shipped program")))
        elif stale:
            cand.missing.append(tagged("G008", (
                f"the passing check (record {a.seq}) is stale: {', '.join(sorted(stale))} changed on disk after it "
                "ran; rerun gradcheck on the files as they are now")))
        if a.files and not (patched & set(a.files)):
            cand.missing.append(tagged("G008", (
                f"the passing check (record {a.seq}) never imported a patched file ({', '.join(sorted(patched))}); "
                "verify the patched program itself, not a re-implementation of it")))
        elif a.files and all(a.files[p] == f.files.get(p) for p in patched & set(a.files)):
            cand.missing.append(tagged("G008", (
                f"the passing check (record {a.seq}) ran the same bytes of the patched files as the failing check "
                f"(record {f.seq}): the patch was undone or changed nothing, so the pass is noise or a flaky "
                "harness, not a fix")))
        more = _after_patch_needs(ev, in_fix[-1], first_patch, patched, improve=not declared)
        cand.missing += more.missing
        cand.evidence.update(more.evidence)
        cand.comparison = more.comparison
        if best is None or len(cand.missing) < len(best.missing):
            best = cand
        if not cand.missing:
            break
    assert best is not None
    return best


def _after_patch_needs(ev: Evidence, last_patch: LedgerRecord, first_patch: LedgerRecord, patched: set[str], *,
                       improve: bool = True) -> _Out:
    """Tracker and workflow-rerun requirements after the fix's last patch (`improve=False`: objective_changed,
    where before and after measure different objectives, needs no improvement)."""
    out = _Out()
    trackers = [(r, e.payload) for r in ev.records
                if isinstance(e := r.event, TrackerEvent) and r.seq > last_patch.seq]
    clean = [r for r, v in trackers if v.is_clean()]
    good = [t for t in clean if ev.current(t) and (not patched or patched & set(t.files))]
    if good:
        out.evidence["tracker"] = good[-1].seq
    elif clean:
        t = clean[-1]
        why = ("lists no files" if not t.files else "is stale (files changed since)" if ev.stale(t)
               else "never imported a patched file")
        out.missing.append(tagged("G009", (
            f"a clean overwrite-tracker run on the patched files as they are now: the clean tracker run (record "
            f"{t.seq}) {why}; rerun the tracker")))
    elif trackers:
        out.missing.append(tagged("G009", (
            f"a clean overwrite-tracker run after the patch: the tracker run (record {trackers[-1][0].seq}) reported "
            "warnings or failed; fix them or explain them, then rerun the tracker")))
    else:
        out.missing.append(tagged("G009", (
            f"a clean overwrite-tracker run after the patch (record {last_patch.seq}): run the tracker (instrument) "
            "on the patched program")))

    confirmed = [r for r in ev.records if isinstance(e := r.event, SymptomGoneEvent) and r.seq > last_patch.seq
                 and e.payload.user_confirmed]
    if confirmed:
        out.evidence["symptom_gone"] = confirmed[-1].seq
        return out
    if not improve:
        return out
    reruns = [(r, v) for r, v in ev.runs if r.seq > last_patch.seq and not v.changed]
    befores = [(r, v) for r, v in ev.runs if r.seq < first_patch.seq]
    if not reruns:
        out.missing.append(tagged("G010", (
            f"a rerun of the user's workflow after the patch (record {last_patch.seq}) whose objective improves on "
            "the run before it: finish makes this rerun itself; from the command line, run_script the workflow "
            "(or the user confirms the symptom is gone)")))
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
        before = next((b for b, bv in reversed(befores) if _same_workflow(bv, av, same_args=True)), None)
        if before is None:
            reasons.append(f"there is no run of the same workflow ({av.script}, same script and arguments) before the "
                           "patch to compare with (diagnose's run counts); have the user confirm the symptom is gone "
                           "(symptom-gone), or undo, run_script, and patch again")
            continue
        ok, reason, cmp = objective_improves(before, after)
        if ok:
            out.evidence["run_before"], out.evidence["run_after"] = before.seq, after.seq
            out.comparison = cmp
            return out
        reasons.append(reason)
    why = reasons[0]
    out.missing.append(tagged("G010", f"a workflow rerun whose objective improves on the run before the patch: {why}"))
    return out


def _unmodified_check(ev: Evidence, *, need_iterations: bool = True, need_run: bool = True) -> _Out:
    """Passing full-objective checks on the program as it was before any patch (first and later iteration),
    no failing check on the current files, and a workflow run on them."""
    originals: dict[str, str | None] = {}
    for r in ev.records:
        if r.kind == "patch":
            for rel, sha in _patch(r).before.items():
                originals.setdefault(rel, sha)
    now = disk_hashes(ev.workspace, list(originals))
    modified = [rel for rel, sha in originals.items() if now[rel] != sha]
    out = _Out()
    if modified:
        out.missing.append(tagged("G008", (
            f"the program is modified ({', '.join(sorted(modified))} differ from their originals): this outcome is "
            "about the unmodified program; undo the patches (warpgrad undo --all) or finish with another outcome")))
    passing = [c for c in ev.checks if c.v.passed is True and c.v.full_horizon]
    current = [c for c in passing if ev.current(c.rec)]
    good = [c for c in current if not _not_a_pass(ev, c)]
    if not good:
        if current:
            c = current[-1]
            rule, why = _not_a_pass(ev, c) or ("G005", "")
            out.missing.append(tagged(rule, (
                f"a passing full-horizon FD check of the workflow's objective: the passing check (record {c.seq}) is "
                f"{why}; call gradcheck with the workflow's script and arguments")))
        elif passing:
            c = passing[-1]
            what = "lists no files it imported" if not c.files else (
                f"is stale ({', '.join(sorted(ev.stale(c.rec)))} changed since)")
            out.missing.append(tagged("G008", (
                f"a passing full-horizon FD check on the files as they are now: the passing check (record {c.seq}) "
                f"{what}; rerun gradcheck")))
        else:
            out.missing.append(tagged("G008", (
                "a passing full-horizon FD check (gradcheck over the user's full objective and horizon, ok=true, "
                "passed=true) on the unmodified program")))
    else:
        out.evidence["passing_check"] = good[-1].seq
        covered = sorted(set().union(*(c.v.covered_iterations() for c in good)))
        if need_iterations and (0 not in covered or not any(i > 0 for i in covered)):
            have = ", ".join(map(str, covered))
            out.missing.append(tagged("G006", (
                f"passing checks at the first training iteration and at a later one: the passing checks on these "
                f"files cover iteration(s) {have} only; run gradcheck at "
                f"{'iteration 0' if 0 not in covered else 'a later iteration (e.g. --iteration 2)'}")))
        elif need_iterations:
            out.missing += _strength_missing(good, "gradcheck with the workflow's script and arguments, without "
                                                   "--iteration (it checks iteration 0 and a later one)")
        if need_run:
            program = set().union(*(set(c.files) - {c.v.probe} for c in good))
            runs = [r for r, v in ev.runs if not v.failed() and ev.current(r) and program & set(r.files)
                    and not ev.run_departures(r, v)]
            if runs:
                out.evidence["workflow_run"] = runs[-1].seq
            else:
                out.missing.append(tagged("G007", (
                    "a completed run of the workflow (its script and arguments) on the files as they are now "
                    "(run_script), so the checked program is tied to what the user runs")))
    out.missing = _current_failures(ev) + out.missing
    return out


def _gradients_correct(ev: Evidence) -> _Out:
    return _unmodified_check(ev)


def _not_a_gradient_bug(ev: Evidence) -> _Out:
    out = _unmodified_check(ev, need_run=False)
    found = None
    why = ("a workflow run with the suspected non-gradient cause changed (its payload's `changed` names what, e.g. a "
           "smaller learning rate, or it ran with different args) whose objective improves on the baseline run of "
           "the same script")
    for v, vv in reversed(ev.runs):
        base = next((b for b, bv in reversed(ev.runs) if b.seq < v.seq and _same_workflow(bv, vv) and not bv.changed
                     and (vv.changed or bv.args != vv.args)), None)
        if base is None:
            continue
        ok, reason, _ = objective_improves(base, v)
        if ok:
            found = (base, v)
            break
        if "(the variant run" not in why:
            why += f" (the variant run, record {v.seq}, does not: {reason})"
    if found:
        out.evidence["baseline_run"], out.evidence["variant_run"] = found[0].seq, found[1].seq
    else:
        out.missing.append(tagged("G010", why))
    return out


def _blocked(ev: Evidence) -> _Out:
    why = [r for r, v in ev.runs if v.failed() and v.says_why()]
    if not why:
        return _Out(missing=[("a recorded failed run that shows why the program cannot run (a run record with "
                             "ok=false and its error or stderr): run_script the program so the failure is on record")])
    current = [r for r in why if not ev.stale(r)]
    if not current:
        return _Out(missing=[(f"the failed run (record {why[-1].seq}) is stale: the files changed since; run it again "
                             "to show it still fails")])
    return _Out(evidence={"failed_run": current[-1].seq})


def _diagnosis_only(ev: Evidence) -> _Out:
    checks = [c for c in ev.checks if c.v.passed is not None and c.v.full_horizon]
    good = [c for c in checks if ev.current(c.rec)]
    if good:
        return _Out(evidence={"check": good[-1].seq})
    if checks:
        return _Out(missing=[(f"a full-horizon FD check on the files as they are now: the check (record "
                             f"{checks[-1].seq}) lists no files or is stale; rerun gradcheck")])
    return _Out(missing=["a full-horizon FD check (gradcheck with ok=true over the user's objective and horizon)"])


def _second_cause(ev: Evidence, also: str) -> _Out:
    """G013: after the last patch, a variant run with the cause changed improves on the workflow's rerun."""
    patches = [r.seq for r in ev.records if r.kind == "patch"]
    last = patches[-1] if patches else -1
    after = [(r, v) for r, v in ev.runs if r.seq > last and not v.failed() and ev.current(r)]
    bases = [r for r, v in after if not v.changed and not ev.run_departures(r, v)]
    variants = [r for r, v in after if v.changed or (ev.workflow is not None and v.args != ev.workflow.args)]
    why = "no run with the cause changed after the last patch"
    for variant in reversed(variants):
        for base in reversed(bases):
            ok, reason, _ = objective_improves(base, variant)
            if ok:
                return _Out(evidence={"baseline_run": base.seq, "variant_run": variant.seq})
            why = reason
    if not bases:
        why = "no rerun of the workflow after the last patch to compare a variant with (finish makes it)"
    return _Out(missing=[tagged("G013", (
        f"evidence for the second cause ({also}): a run after the last patch with that cause changed (run_script "
        f"with the workflow's script and the changed argument, e.g. a smaller learning rate) that improves on the "
        f"workflow's own rerun after the patch; {why}"))])


def _objective_changed(ev: Evidence) -> _Out:
    """fixed's evidence chain with the objective's change declared instead of proven absent (G012 waived, and
    constants may differ from the workflow's); the report shows both objective values and the changes."""
    return _fixed(ev, declared=True)


def hyperparameter_changes(ev: Evidence) -> list[str]:
    """Module constants that differ between the workflow and the files now, and arguments of the runs and
    checks after the first patch that differ from the workflow's: listed in the report whatever the outcome."""
    wf = ev.workflow
    if wf is None:
        return []
    files = {k.split(":", 1)[0] for k in wf.constants}
    out = [f"module constant {c}" for c in constant_changes(wf.constants, program_constants(ev.workspace, files))]
    first_patch = next((r.seq for r in ev.records if r.kind == "patch"), None)
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


_OUTCOME_RULES = {
    "fixed": _fixed,
    "objective_changed": _objective_changed,
    "gradients_correct": _gradients_correct,
    "not_a_gradient_bug": _not_a_gradient_bug,
    "blocked": _blocked,
    "diagnosis_only": _diagnosis_only,
}


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


class GatherPlan(BaseModel):
    """What finish can gather itself before judging a fix: a tracker run and a rerun of the workflow after the
    last patch, when the ledger lacks them (refusing for their absence would only cost the model calls)."""

    workflow: WorkflowPayload
    tracker: bool = False
    rerun: bool = False


def gather_plan(workspace: Path) -> GatherPlan | None:
    """The runs finish should make before judging `fixed` (None: no workflow, no patch, or no passing check of
    the patched files yet, which only the model can supply)."""
    records, _ = Ledger(workspace).read()
    ev = Evidence(records, Path(workspace))
    patches = [r for r in ev.records if r.kind == "patch" and _patched_paths(r)]
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


def _unbound_evidence(evidence: dict[str, int], unbound: list[int]) -> list[str]:
    """G001 for evidence written before ledgers named their workspace: such a record verifies, but nothing ties it
    to this workspace (a signed old-format ledger copied from another workspace reads the same), so it cannot
    prove an outcome here. The user's old history stays readable; the checks are rerun."""
    stale = sorted(seq for seq in set(evidence.values()) if seq in set(unbound))
    if not stale:
        return []
    return [tagged("G001", (f"evidence bound to this workspace: record(s) {', '.join(map(str, stale))} were written "
                            "before ledgers named their workspace, so nothing shows they were made here; rerun the "
                            "check and the runs (gradcheck, run_script) so the evidence is this workspace's own"))]


def check_finish(workspace: Path, outcome: str, also: str | None = None) -> GateResult:
    """Decide whether the ledger of `workspace` proves `outcome`; list what is missing if not.

    Every outcome needs an intact, signed ledger (G001). Then:
    - `fixed`: a failing FD check; a patch after it; a passing check of the full objective after the patch
      with the same `harness_id` whose `files` match disk and include a patched file (G003, G005, G008);
      no failing check on the current files (G002); a clean tracker run after the patch on those files
      (G009); a workflow rerun after the patch that imported the patched files and improves on the same
      workflow's run before the patch by its loss or named metric, both parsed (G010), or a `symptom_gone`
      record the user confirmed.
    - `gradients_correct`: passing full-objective, full-horizon checks on the unmodified program covering
      the first and a later iteration (G003, G005, G006), no failing check on the current files (G002), and
      a completed workflow run on those files (G007).
    - `not_a_gradient_bug`: as `gradients_correct` without G007, plus a workflow run with the suspected
      cause changed that improves on the baseline run.
    - `blocked`: a failed run that records why.
    - `diagnosis_only`: a full-horizon check (passing or failing) on the files as they are.

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
    records, check = Ledger(workspace).read()
    missing: list[str] = [
        tagged("G001", f"an intact ledger: {p}; the evidence cannot be trusted until a person resolves this")
        for p in check.problems
    ]
    if check.unsigned:
        shown = ", ".join(map(str, check.unsigned[:10])) + (", ..." if len(check.unsigned) > 10 else "")
        missing.append(tagged("G001", (
            f"records signed with this machine's warpgrad key: record(s) {shown} carry no valid signature "
            f"(key {check.key_id or 'missing'}), so they were written by something that cannot read the key "
            "(forged, or copied from another machine); a person must inspect the ledger and start a fresh one")))
    ev = Evidence(records, Path(workspace))
    out = _OUTCOME_RULES[outcome](ev)
    if also is not None:
        if outcome not in ("fixed", "objective_changed"):
            out.missing.append(f"a second cause ({also}) is named only beside a fix: finish with outcome 'fixed'")
        else:
            second = _second_cause(ev, also)
            out.missing += second.missing
            out.evidence.update(second.evidence)
    missing += out.missing
    missing += _unbound_evidence(out.evidence, check.unbound)
    return GateResult(outcome=outcome, accepted=not missing, missing=missing, evidence=out.evidence,
                      comparison=out.comparison, signed=check.signed, objective_shift=out.shift,
                      hyperparameter_changes=hyperparameter_changes(ev), workflow_seq=ev.workflow_seq)
