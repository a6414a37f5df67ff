"""The ledger read once for one gate decision: typed views of the records, the gate's judgement of what each
check measured, and the files on disk (each hashed once).

Ledger records are read as their typed kinds (`warpgrad.tools.records`: `GradcheckEvent`, `RunEvent`, ...);
a payload that does not have its kind's shape is not evidence.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from ..ledger import LedgerRecord, disk_hashes
from ..records import (
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
    WorkflowPayload,
)
from ..workflow import departures, program_constants, the_workflow


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
    """Zero objective, zero AD and zero FD: numbers that agree because nothing was measured."""
    if v.objective_value is None or v.objective_value != 0.0:
        return False
    if v.directions:
        return all(d.ad == 0.0 and d.fd == 0.0 for d in v.directions)
    known = [p for p in v.params if p.ad_norm is not None or p.ad is not None or p.fd is not None]
    return bool(known) and all((p.ad_norm or 0.0) == 0.0 and (p.ad or 0.0) == 0.0 and (p.fd or 0.0) == 0.0
                               for p in known)


def patch_payload(r: LedgerRecord) -> PatchPayload:
    """A patch record's payload (an empty one when the record's payload does not have the shape of a patch:
    the record still counts as a patch of its `files`)."""
    return r.event.payload if isinstance(r.event, PatchEvent) else PatchPayload()


def patched_paths(r: LedgerRecord) -> set[str]:
    """The user's files a patch changed (warpgrad's own diagnostic files do not count as the program)."""
    p = patch_payload(r)
    paths = set(p.paths) | set(p.after) or set(r.files)
    return paths - set(p.diagnostic)


def same_harness(failing: GradcheckPayload, passing: GradcheckPayload) -> bool:
    """Like-for-like checks: the same harness, or the same one with more directions after (a check that asks more
    directions is stricter, and it is what resolves a direction FD left unresolved)."""
    if failing.harness_id and failing.harness_id == passing.harness_id:
        return True
    a = failing.harness.spec_without_directions(failing.harness_id)
    b = passing.harness.spec_without_directions(passing.harness_id)
    return a is not None and a == b and (passing.harness.directions or 0) >= (failing.harness.directions or 0)


def short(h: str | None) -> str:
    return (h or "?")[:12]


def same_workflow(a: RunPayload, b: RunPayload, *, same_args: bool = False) -> bool:
    """Runs of the same script (and, with same_args, the same arguments: a rerun at a smaller learning
    rate does not show that a patch fixed anything)."""
    if not (a.script is None or b.script is None or a.script == b.script):
        return False
    return not same_args or a.args == b.args


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


class Findings(BaseModel):
    """What one rule (or one outcome's rules together) found: the missing pieces, each tagged with its rule,
    and the records that satisfied it."""

    missing: list[str] = Field(default_factory=list)
    evidence: dict[str, int] = Field(default_factory=dict)
    comparison: Comparison | None = None
    shift: ObjectiveAtStart | None = None


class Check:
    """A gradcheck record with its view and the gate's judgement of what it measured."""

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
    """The ledger's records with typed views, the workflow they are judged against, and the files on disk."""

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
            kind, why = self._judge_kind(v)
            self.checks.append(Check(r, v, kind, why))

    def originals(self) -> dict[str, tuple[str | None, str]]:
        """Each patched user file -> (the backup id, its sha256 before the first patch that changed it): the program
        as it was before any patch."""
        out: dict[str, tuple[str | None, str]] = {}
        for r in self.patches():
            p = patch_payload(r)
            for rel, sha in p.before.items():
                if sha is not None and rel not in p.diagnostic:
                    out.setdefault(rel, (p.backup_op, sha))
        return out

    def unpatched_run(self, r: LedgerRecord) -> bool:
        """A run of the program as it was before any patch, whenever it was made (finish runs it in a scratch copy
        when diagnose's run was cut short): it imported a patched file, and every patched file it imported has the
        bytes that file had before its first patch."""
        orig = self.originals()
        seen = [rel for rel in r.files if rel in orig]
        return bool(seen) and all(r.files[rel] == orig[rel][1] for rel in seen)

    def patches(self) -> list[LedgerRecord]:
        """Every patch record, a malformed one too (its `files` then stand for the paths it changed)."""
        return [r for r in self.records if r.kind == "patch"]

    def stale(self, r: LedgerRecord) -> list[str]:
        """The record's files whose bytes on disk differ now (each file hashed once per gate decision)."""
        todo = [rel for rel in r.files if rel not in self._disk]
        self._disk.update(disk_hashes(self.workspace, todo))
        return [rel for rel, sha in r.files.items() if self._disk[rel] != sha]

    def current(self, r: LedgerRecord) -> bool:
        return bool(r.files) and not self.stale(r)

    @staticmethod
    def _judge_kind(v: GradcheckPayload) -> tuple[ObjectiveKind, str]:
        kind = objective_kind(v)
        if kind == "partial":
            what = f"the named variable {v.harness.objective!r}" if v.harness.objective else "a partial objective"
            return kind, f"it differenced {what}, not the objective the script reports"
        if kind in ("probe", "probe_declared"):
            # Agreement of loss() with a printed line ties nothing to the gradient the update applies.
            return "probe", (f"it checked the probe {v.probe or '?'}, whose grad() was never compared with the gradient "
                             "the script's update applies at the same parameters")
        return kind, ""

    def departures(self, c: Check, *, constants: bool = True) -> list[str]:
        """How a check departs from the workflow (empty: it checked the workflow). Constants are read from the
        files on disk, so they are compared only for a check on the files as they are now."""
        if self.workflow is None:
            return []  # nothing to depart from: the workflow run is asked for by its own rules
        program = [p for p in c.files if p != c.v.probe]
        consts = program_constants(self.workspace, program) if constants and self.current(c.rec) else None
        return departures(self.workflow, c.v.script, c.v.harness.args, consts)

    def run_departures(self, r: LedgerRecord, v: RunPayload) -> list[str]:
        """How a run departs from the workflow (script and arguments; constants when it is current)."""
        if self.workflow is None:
            return []
        consts = program_constants(self.workspace, r.files) if self.current(r) else None
        return departures(self.workflow, v.script, v.args, consts)
