"""The kinds of ledger record: each kind's payload as a pydantic model, read back through one union.

A ledger record (`warpgrad.tools.ledger.LedgerRecord`) stores its payload as the JSON its writer produced
(that JSON is hashed and signed, so it is never rewritten). Readers do not pick fields out of it by
string key: `LedgerRecord.event` is the record validated as `Event`, a union discriminated on the record's
`kind` (`GradcheckEvent`, `RunEvent`, `PatchEvent`, ...; any other kind is an `OtherEvent` holding the
plain payload). A payload that does not have its kind's shape becomes an `InvalidEvent`: it stays in the
ledger (the chain and signatures are checked separately) but is no evidence of anything.

The payload models describe what the writers have put in records so far: fields missing from older
records have defaults, fields a reader does not use are ignored, and the record format itself is
unchanged (no version field is needed).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError

from .metric import MetricSpec
from .signatures import Signature


class Payload(BaseModel):
    """A payload as a reader sees it: unknown fields are ignored, missing ones take their defaults."""

    model_config = ConfigDict(extra="ignore")


# -- gradcheck ------------------------------------------------------------------------------------------


class CheckedParam(Payload):
    name: str = ""
    ad_norm: float | None = None
    ad: float | None = None
    fd: float | None = None


class CheckedDirection(Payload):
    ad: float = 0.0
    fd: float = 0.0
    agree: bool | None = None
    status: str | None = Field(None, description="agree / disagree / unresolved (newer engines); None on older "
                               "records, which say only `agree`.")

    def agrees(self) -> bool:
        """Resolved agreement: the engine's status where it gives one, else its `agree` flag."""
        return self.status == "agree" if self.status is not None else self.agree is True


class IterationCheck(Payload):
    """One checked iteration of a gradcheck (the combined result keeps the lead iteration's details only)."""

    iteration: int
    passed: bool | None = None
    objective_value: float | None = None
    agreeing_directions: int = 0


class CheckHarness(Payload):
    """The harness spec a check ran with (its `harness_id` is the hash of it); the fields the gate reads are typed,
    the others kept as they were written so the spec can be matched against its hash."""

    model_config = ConfigDict(extra="allow")

    objective: str | None = Field(None, description="A named objective variable (capture `--objective NAME`).")
    declared_objective: bool = False
    args: list[str] = Field(default_factory=list, description="The arguments the checked script ran with.")
    directions: int | None = Field(None, description="Random directions asked for per iteration.")
    iteration: int | None = Field(None, description="The iteration asked for (None: gradcheck's default).")
    seed: int | None = Field(None, description="The seed of the random directions.")

    def spec_without_directions(self, harness_id: str | None) -> dict[str, Any] | None:
        """The spec as written, less the number of directions, when it is the one `harness_id` hashes (None
        otherwise: a record that kept only part of its spec cannot show what else its harness was)."""
        spec = self.model_dump(mode="json", exclude_unset=True)
        digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
        if not harness_id or digest != harness_id:
            return None
        return {k: v for k, v in spec.items() if k != "directions"}


ObjectiveKind = Literal["script", "partial", "probe", "probe_declared"]


class GradcheckPayload(Payload):
    """A gradcheck result (`warpgrad.tools.gradcheck.GradcheckResult`)."""

    ok: bool = False
    passed: bool | None = None
    signature: Signature | None = None
    harness_id: str | None = None
    harness: CheckHarness = Field(default_factory=CheckHarness)
    files: dict[str, str] = Field(default_factory=dict)
    objective_kind: ObjectiveKind | None = Field(None, description="None on records written before the field.")
    iterations: list[int] = Field(default_factory=list)
    iteration: int | None = None
    full_horizon: bool = True
    objective_value: float | None = None
    max_rel_error: float | None = None
    params: list[CheckedParam] = Field(default_factory=list)
    directions: list[CheckedDirection] = Field(default_factory=list)
    mode: str = "capture"
    script: str | None = None
    probe: str | None = None
    unreliable_reason: str | None = Field(None, description="Set by the engine when the check cannot be trusted.")
    nondeterministic: bool = Field(False, description="An unperturbed rerun did not reproduce the objective.")
    supersedes: list[int] = Field(default_factory=list, description="Seqs of failing checks this one explains.")
    reported_factor: float | None = Field(None, description="The loss the script prints is this x the one seeded "
                                          "into backward (None: the same, or not printed).")
    per_iteration: list[IterationCheck] = Field(default_factory=list, description="Each checked iteration's "
                                                "verdict, objective and agreeing directions (newer records).")

    def covered_iterations(self) -> list[int]:
        """Training iterations the check covered; old records name only `iteration` (a probe: its params())."""
        if self.iterations:
            return sorted(set(self.iterations))
        return [self.iteration if self.iteration is not None else 0]


# -- run_script -----------------------------------------------------------------------------------------


class RunPayload(Payload):
    """A workflow run (`warpgrad.tools.run_script.RunScriptResult`)."""

    ok: bool | None = None
    script: str | None = None
    args: list[str] = Field(default_factory=list)
    returncode: int | None = None
    signal: str | None = None
    timed_out: bool = False
    changed: str | None = None
    final_loss: float | None = None
    loss_trajectory: list[float | None] = Field(default_factory=list)
    objective_direction: str | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    error: Any = None
    reason: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    metric: MetricSpec | None = None
    metric_values: list[float] = Field(default_factory=list)
    cut_short_at: int | None = Field(None, description="The run was stopped after this many printed losses once "
                                     "its trend was read (diagnose); compare it at that point only.")

    def failed(self) -> bool:
        return self.ok is False or self.timed_out or bool(self.signal) or (
            self.returncode is not None and self.returncode != 0)

    def trajectory(self) -> list[float]:
        """The loss trajectory with the points that could not be read (NaN/inf stored as null) as NaN."""
        return [math.nan if v is None else float(v) for v in self.loss_trajectory]

    def says_why(self) -> bool:
        return bool(self.error or self.stderr_tail or self.reason or self.stdout_tail)


# -- the workflow ----------------------------------------------------------------------------------------


class WorkflowPayload(Payload):
    """The user's workflow, fixed by the first completed run (or `diagnose`): what the gate guards.

    Only checks and runs of this script, with these arguments and these module constants, are evidence
    for an outcome; anything else is localization (`warpgrad.tools.workflow`).
    """

    script: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str | None] = Field(default_factory=dict, description="Environment variables the program "
                                       "reads (found statically) and their values when the workflow was fixed.")
    objective: str = Field("final loss", description="The quantity the workflow reports: its loss or the named metric.")
    metric: MetricSpec | None = None
    constants: dict[str, str] = Field(default_factory=dict, description="'path:NAME' -> repr of each module-level "
                                      "constant of the program's files (read with ast, never executed).")
    run_seq: int | None = Field(None, description="The run record that fixed it.")


# -- files: patch, undo, file, shrink -------------------------------------------------------------------


class PatchPayload(Payload):
    """An edit of workspace files (edit_file, apply_patch, ...)."""

    paths: list[str] = Field(default_factory=list)
    after: dict[str, Any] = Field(default_factory=dict)
    before: dict[str, str | None] = Field(default_factory=dict)
    diagnostic: list[str] = Field(default_factory=list, description="warpgrad's own files among `paths`.")
    diff: str | None = None
    reason: str | None = None
    backup_op: str | None = None


class UndoPayload(Payload):
    backup_op: str | None = None
    paths: list[str] = Field(default_factory=list)


class FilePayload(Payload):
    """A diagnostic file warpgrad created (a probe, a driver)."""

    path: str | None = None
    sha256: str | None = None
    purpose: str | None = None


class ShrinkPayload(Payload):
    """A shrunk copy of a script (`shrink`)."""

    output: str | None = None
    sha256: str | None = None
    script: str | None = None
    source_sha256: str | None = None


# -- tracker, the user's word, finish -------------------------------------------------------------------


class TrackerPayload(Payload):
    """An overwrite-tracker run (`warpgrad.tools.tracker.InstrumentResult`; older records count warnings)."""

    ok: bool | None = None
    clean: bool | None = None
    warnings: list[Any] | None = None
    n_warnings: int | None = None
    warning_count: int | None = None

    def is_clean(self) -> bool:
        if self.ok is False:
            return False
        if self.clean is not None:
            return self.clean
        if self.warnings is not None:
            return not self.warnings
        n = self.n_warnings if self.n_warnings is not None else self.warning_count
        return n == 0


class SymptomPayload(Payload):
    """The user's statement that the symptom is gone (`warpgrad symptom-gone`)."""

    user_confirmed: bool = False
    statement: str | None = None


class Comparison(BaseModel):
    """The workflow objective before -> after a patch, as the gate compared it (numbers from the ledger)."""

    quantity: str = Field(description="'final loss' or the named metric, with its direction.")
    before_seq: int
    after_seq: int
    before: float | None
    after: float | None
    verdict: str = Field(description="Why it counts as an improvement, in words.")


class ObjectiveAtStart(BaseModel):
    """The workflow's objective at iteration 0 before and after the patch, as the gate compared it (G012)."""

    before_seq: int
    after_seq: int
    before: float | None
    after: float | None
    moved: bool | None


class FinishPayload(Payload):
    """The accepted outcome of a session (`finish`)."""

    outcome: str | None = None
    also: str | None = Field(None, description="A second cause named beside a fix, with its own evidence.")
    summary: str | None = None
    evidence: dict[str, int] = Field(default_factory=dict)
    comparison: Comparison | None = None
    signed: bool | None = None
    objective_shift: ObjectiveAtStart | None = None
    hyperparameter_changes: list[str] = Field(default_factory=list)
    gathered: list[str] = Field(default_factory=list, description="Runs finish made itself before judging.")


# -- the union ------------------------------------------------------------------------------------------


class GradcheckEvent(BaseModel):
    kind: Literal["gradcheck"]
    payload: GradcheckPayload


class RunEvent(BaseModel):
    kind: Literal["run"]
    payload: RunPayload


class PatchEvent(BaseModel):
    kind: Literal["patch"]
    payload: PatchPayload


class UndoEvent(BaseModel):
    kind: Literal["undo"]
    payload: UndoPayload


class FileEvent(BaseModel):
    kind: Literal["file"]
    payload: FilePayload


class ShrinkEvent(BaseModel):
    kind: Literal["shrink"]
    payload: ShrinkPayload


class TrackerEvent(BaseModel):
    kind: Literal["tracker"]
    payload: TrackerPayload


class SymptomGoneEvent(BaseModel):
    kind: Literal["symptom_gone"]
    payload: SymptomPayload


class FinishEvent(BaseModel):
    kind: Literal["finish"]
    payload: FinishPayload


class WorkflowEvent(BaseModel):
    kind: Literal["workflow"]
    payload: WorkflowPayload


class OtherEvent(BaseModel):
    """A kind no reader interprets field by field (bisect, diagnose, notes): its payload as written."""

    kind: str
    payload: dict[str, Any]


class InvalidEvent(BaseModel):
    """A record whose payload does not have its kind's shape: kept in the ledger, evidence of nothing."""

    kind: str
    payload: dict[str, Any]
    problem: str


_TYPED: dict[str, type[BaseModel]] = {
    "gradcheck": GradcheckEvent, "run": RunEvent, "patch": PatchEvent, "undo": UndoEvent, "file": FileEvent,
    "shrink": ShrinkEvent, "tracker": TrackerEvent, "symptom_gone": SymptomGoneEvent, "finish": FinishEvent,
    "workflow": WorkflowEvent,
}


def _tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if isinstance(kind, str) and kind in _TYPED else "other"


Event = Annotated[
    Annotated[GradcheckEvent, Tag("gradcheck")]
    | Annotated[RunEvent, Tag("run")]
    | Annotated[PatchEvent, Tag("patch")]
    | Annotated[UndoEvent, Tag("undo")]
    | Annotated[FileEvent, Tag("file")]
    | Annotated[ShrinkEvent, Tag("shrink")]
    | Annotated[TrackerEvent, Tag("tracker")]
    | Annotated[SymptomGoneEvent, Tag("symptom_gone")]
    | Annotated[FinishEvent, Tag("finish")]
    | Annotated[WorkflowEvent, Tag("workflow")]
    | Annotated[OtherEvent, Tag("other")],
    Discriminator(_tag),
]
_EVENT: TypeAdapter[Event] = TypeAdapter(Event)


def read_event(kind: str, payload: dict[str, Any]) -> Event | InvalidEvent:
    """A record's kind and payload as its typed event (`InvalidEvent` when the payload has another shape)."""
    try:
        return _EVENT.validate_python({"kind": kind, "payload": payload})
    except ValidationError as e:
        return InvalidEvent(kind=kind, payload=payload, problem=str(e))
