"""The harness protocol: the config the parent writes and the result the child writes, as pydantic models.

The one module both processes import. The parent (`warpgrad.tools.*`) builds a `HarnessConfig`, writes it as
`config.json` and reads `result.json` back as a `HarnessResult` (or the subclass for its mode); the child
(`warpgrad.tools.harness.main`) parses the config with the same models and writes a result they validate.
Pure: pydantic only, no Warp, no numpy, nothing else of warpgrad, so the parent can import it without
loading what the child runs.

`PROTOCOL_VERSION` changes whenever a field changes meaning; the child refuses a config of another version
(a result with status "harness_error"), so a stale install fails loudly instead of reading keys it no
longer writes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

PROTOCOL_VERSION = 1

# The listeners the parent names in `SessionConfig.listeners` ("module:Class": the parent never imports them).
TAPE_INSPECT_LISTENER = "warpgrad.tools.harness.tape_listener:TapeInspectListener"
LOCALIZE_LISTENER = "warpgrad.tools.harness.localize:LocalizeListener"
TRACKER_LISTENER = "warpgrad.tools.harness.tracker_listener:TrackerListener"
# The tape inspector that also reports the first iteration's tape (diagnose, when the check leads with it).
TAPE_ITERATIONS_LISTENER = "warpgrad.tools.harness.tape_iterations:TapeIterationsListener"
# Ends a plain run once its printed loss trajectory shows its trend (diagnose, unless --full-run).
TREND_STOP_LISTENER = "warpgrad.tools.harness.trend_stop:TrendStopListener"


# ============================================================================================== config
class _Config(BaseModel):
    # A key the child does not know is a bug in the parent: fail where the config is built.
    model_config = ConfigDict(extra="forbid")


class CaptureOptions(_Config):
    """What capture records (mode "capture"); read by `CaptureListener`."""

    iteration: int | None = Field(None, description="The iteration to capture (None: the second where there is one).")
    params: list[str] = Field(default_factory=list, description="Restrict the parameters to these names.")
    objective: str | None = Field(None, description="A variable of the script to difference instead of the seeded loss.")
    scheme: Literal["consume", "backward"] = Field("consume", description="How iterations are counted: at each "
                                                   "consumption of the gradient, or at each backward call.")


class Perturbation(_Config):
    role: str = Field(description="The parameter's role (its first taped use), as capture reported it.")
    delta: str = Field(description="Path of a .npy file holding the perturbation to add.")


class ServeOptions(_Config):
    """An FD hub: the run goes as far as the first use of any of `roles` in the evaluated iteration, then serves the
    evaluations the parent sends over the unix socket at `socket`, one forked process each (`harness.serve`)."""

    socket: str = Field(description="Path of the unix socket the hub listens on (in a folder only the parent and "
                        "the run can reach).")
    roles: list[str] = Field(min_length=1, description="Every role a served evaluation may perturb: the hub forks "
                             "before the first of them is used.")
    jobs: int = Field(1, ge=1, description="Evaluations run at the same time.")
    idle_s: float = Field(120.0, gt=0, description="The hub ends when the parent sends nothing for this long.")


class FdOptions(CaptureOptions):
    """One FD evaluation (mode "fd"): perturb the parameters at their first use in `iteration`, stop at its end.

    With `serve`, a hub instead: no perturbation of its own (`perturb` empty), many evaluations forked from it."""

    iteration: int = Field(description="The iteration whose objective is evaluated.")
    perturb: list[Perturbation] = Field(default_factory=list)
    serve: ServeOptions | None = None

    @model_validator(mode="after")
    def _a_hub_perturbs_nothing_itself(self) -> FdOptions:
        if self.serve is not None and self.perturb:
            raise ValueError("an FD hub (serve) perturbs nothing itself: its evaluations bring their perturbations")
        return self


class ProbeOptions(_Config):
    """The probe file and the FD check it drives (mode "probe"); read by `ProbeListener`."""

    path: str
    params: list[str] = Field(default_factory=list)
    directions: int = 3
    seed: int = 0
    elements: int = 0


class TapeInspectOptions(_Config):
    """Options of `TapeInspectListener`."""

    max_tapes: int = 4


class LocalizeOptions(_Config):
    """Options of `LocalizeListener`."""

    nan: bool = True
    gradcheck: bool = False
    max_launches: int = 24
    max_per_var: int = 16
    budget_s: float = 60.0
    jacobian_budget_bytes: int = Field(64 << 20, description="Largest dense Jacobian pair (AD + FD) a per-launch "
                                       "check may allocate; larger launches are checked by directional products.")
    stop_file: str | None = Field(None, description="A file the parent may write while the run goes on (inside the "
                                  "run's outdir): once it exists, no further per-launch check starts, and its text "
                                  "is the reason the result gives (diagnose writes it when the FD check finds the "
                                  "gradient correct: a correct program needs no localization).")


class SessionConfig(_Config):
    """What every session (one run of the user's script or probe) is told."""

    version: int = PROTOCOL_VERSION
    workspace: str
    script: str | None = None
    args: list[str] = Field(default_factory=list, description="sys.argv[1:] of the script.")
    device: str | None = Field(None, description="Passed to wp.set_device (None: Warp's default).")
    seed: int = Field(0, description="Seed of Python's and numpy's global RNGs.")
    extra_files: list[str] = Field(default_factory=list, description="Files whose sha256 the result lists too.")
    listeners: list[str] = Field(default_factory=list, description="More listeners, as 'module:Class'.")
    outdir: str | None = Field(None, description="Where listeners write their .npy files.")
    tracker: bool = Field(False, description="Turn Warp's overwrite tracker on before any module is built.")
    tracker_cache: bool = Field(True, description="Reuse tracker builds from the kernel cache.")
    log_level: Literal["debug"] | None = None
    tape_inspect: TapeInspectOptions | None = None
    localize: LocalizeOptions | None = None
    # Batch items only: where the forked session writes its result and its stderr, and its time limit.
    result: str | None = None
    stderr: str | None = None
    timeout_s: float = 300.0


class RunConfig(SessionConfig):
    mode: Literal["run"] = "run"


class CaptureConfig(SessionConfig):
    mode: Literal["capture"] = "capture"
    capture: CaptureOptions = Field(default_factory=CaptureOptions)


class FdConfig(SessionConfig):
    mode: Literal["fd"] = "fd"
    capture: FdOptions


class ProbeConfig(SessionConfig):
    mode: Literal["probe"] = "probe"
    probe: ProbeOptions


SessionMode = Annotated[RunConfig | CaptureConfig | FdConfig | ProbeConfig, Field(discriminator="mode")]


class BatchConfig(_Config):
    """Many sessions forked from one booted process (FD evaluations on the CPU); each needs `result` and `stderr`."""

    version: int = PROTOCOL_VERSION
    mode: Literal["batch"] = "batch"
    batch: list[SessionMode] = Field(min_length=1)

    @model_validator(mode="after")
    def _each_item_says_where_it_writes(self) -> BatchConfig:
        for i, item in enumerate(self.batch):
            if item.result is None or item.stderr is None:
                raise ValueError(f"batch item {i} needs `result` and `stderr` (its session writes there)")
        return self


HarnessConfig = Annotated[RunConfig | CaptureConfig | FdConfig | ProbeConfig | BatchConfig, Field(discriminator="mode")]
HARNESS_CONFIG: TypeAdapter[HarnessConfig] = TypeAdapter(HarnessConfig)


# ============================================================================================== result
class CallSite(BaseModel):
    """A call in the user's code (file, line, enclosing function); all None when none was found."""

    file: str | None = None
    line: int | None = None
    func: str | None = None


class LogSite(CallSite):
    """The launch or copy that was executing when Warp logged a message."""

    kernel: str | None = None
    op: Literal["launch", "copy"] | None = None


class WarpLogRecord(BaseModel):
    level: str
    message: str
    category: str | None = None
    site: LogSite | None = None


class TracebackFrame(BaseModel):
    file: str
    line: int | None = None
    func: str
    code: str | None = None


ChildErrorKind = Literal[
    "syntax_error", "missing_import", "import_error", "out_of_memory", "file_not_found", "script_raised",
    "exit_code", "interrupted", "bad_probe", "config", "harness_failed",
]


class ChildError(BaseModel):
    """Why the session did not complete: the user's failure, or ours (kind "harness_failed")."""

    kind: ChildErrorKind
    message: str
    type: str | None = Field(None, description="The exception's class name.")
    traceback: list[TracebackFrame] = Field(default_factory=list, description="The user's frames only.")
    file: str | None = None
    line: int | None = None
    exit_code: int | None = None
    cause: Literal["unsupported_warp", "warp_start"] | None = Field(
        None, description="Why the harness itself could not start (kind harness_failed, from boot()).")
    harness_traceback: str | None = Field(None, description="Our own traceback, when the failure is ours.")


class Section(BaseModel):
    """A listener's part of the result; a listener whose `result()` raised leaves only `listener_error`."""

    listener_error: str | None = None


class RunCounts(Section):
    """What a plain run did with Warp (`RunListener`)."""

    launches: int = 0
    taped_launches: int = 0
    tapes: int = 0
    backward_calls: int = 0
    optimizer_steps: int = 0

    def counts(self) -> dict[str, int]:
        return self.model_dump(exclude={"listener_error"})


class CapturedParam(BaseModel):
    name: str
    role: str | None = Field(None, description="Its first taped use (where FD perturbs it); None when no taped launch "
                             "read it.")
    how: str = Field(description="How the script consumed its gradient.")
    shape: list[int] = Field(default_factory=list)
    dtype: str = ""
    numpy_shape: list[int] = Field(default_factory=list)
    grad_file: str = Field(description=".npy of the consumed gradient.")
    value_file: str = Field(description=".npy of the parameter's value at the iteration.")
    requires_grad: bool = True
    stale_read: bool = False
    crosscheck: str | None = None
    tape_grad_file: str | None = Field(None, description=".npy of the gradient this iteration's backward left in its "
                                       ".grad, where the update applies another one (a stale read, a re-summed never-zeroed .grad): FD judges both.")
    untied: bool = Field(False, description="Several reads of its .grad feed the update and the parameter change "
                         "ties the update to none of them: the gradient it applies is unknown (no verdict).")


class CapturedIteration(Section):
    """One recorded training iteration."""

    iteration: int | None = None
    objective: float | None = Field(None, description="The seeded (or named) objective; NaN/inf stay as they are.")
    objective_seeds: list[str] = Field(default_factory=list)
    backward_calls: int | None = None
    nonfinite_loss: bool = False
    stale_grads: dict[str, float] = Field(default_factory=dict)
    params: list[CapturedParam] = Field(default_factory=list)
    handoff_backward_calls: int = Field(0, description="Backward passes of this iteration seeded only by adjoints "
                                        "handed over from another backward (hand-written checkpointing); their "
                                        "seeded values are not in `objective`.")
    handoff_seeds: list[str] = Field(default_factory=list)


class CaptureReport(CapturedIteration):
    """`CaptureListener` in mode "capture": the target iteration and what was seen around it."""

    scheme: Literal["consume", "backward"] = "consume"
    iterations_seen: list[int] = Field(default_factory=list)
    other_iterations: list[CapturedIteration] = Field(default_factory=list)
    boundary_seeds: list[str] = Field(default_factory=list)
    unseeded_backward: bool = False
    graph_events: list[str] = Field(default_factory=list)
    seeded_trajectory: list[float] = Field(default_factory=list)
    seeded_loss_read: bool = Field(False, description="The script read an array seeded into backward back to the "
                                   "host after that backward (what it prints may well be that very loss).")
    leaf_candidates: list[str] = Field(default_factory=list)
    stopped_at: str | None = None
    notes: list[str] = Field(default_factory=list)


class FdReport(Section):
    """`CaptureListener` in mode "fd": the objective of one perturbed run."""

    objective: float | None = None
    stopped_at: str | None = None
    reached: bool = Field(False, description="The run reached the end of the evaluated iteration.")
    applied: dict[str, str] = Field(default_factory=dict, description="role -> .npy of the perturbation applied.")
    unapplied: list[str] = Field(default_factory=list, description="Roles never reached.")
    backward_calls: int = 0
    notes: list[str] = Field(default_factory=list)


class ProbeParam(BaseModel):
    name: str
    shape: list[int] = Field(default_factory=list)
    dtype: str = ""
    grad: list[Any] | None = Field(None, description="grad() as nested lists (None when large).")
    ad_norm: float
    nonfinite: int = 0


class ProbeReport(Section):
    """`ProbeListener`: the probe's objectives and its FD report."""

    base_objective: float | None = None
    rerun_objective: float | None = None
    after_grad_objective: float | None = None
    params: list[ProbeParam] = Field(default_factory=list)
    nondeterministic: bool = False
    report: dict[str, Any] | None = Field(None, description="A `warpgrad.tools.fd.FDReport` (validated by the "
                                          "parent, which owns that model).")
    grads_nonfinite: int = 0
    all_zero: bool = False


TrackerKind = Literal["within_kernel", "across_launches", "copy"]


class Site(BaseModel):
    file: str | None = None
    line: int | None = None
    func: str | None = None
    kernel: str | None = None


class TrackerRecord(BaseModel):
    """One distinct overwrite the tracker reported, with how often it fired."""

    kind: TrackerKind = Field(description="within_kernel: an argument written after being read in the same kernel "
                              "(found at codegen, no tape needed); across_launches: a launch on the tape writes an "
                              "array an earlier taped launch read; copy: a wp.copy onto an array read earlier on the tape.")
    kernel: str | None = Field(None, description="The kernel that writes (None for a copy).")
    argument: str | None = Field(None, description="The kernel argument written.")
    array: str | None = Field(None, description="The user's variable name of the array written, where it could be found.")
    file: str | None = Field(None, description="Where to look: the user's launch or copy call (across launches, copy), "
                             "or the offending write statement in the kernel (within a kernel).")
    line: int | None = None
    func: str | None = Field(None, description="The Python function containing the call site.")
    kernel_def: str | None = Field(None, description="file:line Warp printed (the kernel's def line, across launches).")
    read_by: Site | None = Field(None, description="The earlier taped launch that read the array (its call site).")
    triggered_at: Site | None = Field(None, description="For within_kernel: the launch whose module build emitted it.")
    count: int = Field(1, description="How many times Warp printed it (Warp does not deduplicate).")
    first_iteration: int | None = Field(None, description="Training iteration of the first occurrence.")
    values: str | None = Field(None, description="The array contents Warp printed on the first occurrence (truncated).")
    message: str = Field("", description="Warp's first message, truncated.")


class OtherWarning(BaseModel):
    message: str
    count: int = 1


class TrackerReport(Section):
    """`TrackerListener`: the overwrite tracker's records, attributed to the user's call sites."""

    records: list[TrackerRecord] = Field(default_factory=list)
    other_warnings: list[OtherWarning] = Field(default_factory=list)
    taped_launches: int = 0
    taped_kernels: list[str] = Field(default_factory=list)
    taped_copies: int = 0
    backward_calls: int = 0
    dropped: int = 0
    modules_launched: list[str] = Field(default_factory=list)
    log_level_lowered: bool = False
    broken: str | None = None
    modules_tracked: list[str] = Field(default_factory=list)
    modules_reused: list[str] = Field(default_factory=list)


class LocalizeReport(Section):
    """`LocalizeListener`'s own state (its findings are in each tape description's `localize`)."""

    broken: str | None = None
    notes: list[str] = Field(default_factory=list)


class BatchEntry(BaseModel):
    """How one forked session of a batch ended (its result is in its own `result` file)."""

    wall_s: float = 0.0
    timed_out: bool = False
    signal: str | None = None
    returncode: int | None = None


class ServeEvaluation(_Config):
    """One evaluation the parent asks an FD hub for: what to perturb and where the forked process writes."""

    perturb: list[Perturbation] = Field(default_factory=list)
    outdir: str = Field(description="Where its .npy files go (one folder per evaluation: they run side by side).")
    result: str
    stderr: str
    timeout_s: float = Field(gt=0)


class ServeRequest(_Config):
    """One line the parent writes to the hub's socket: evaluations to run (the hub answers with a `ServeReply`)."""

    version: int = PROTOCOL_VERSION
    evaluations: list[ServeEvaluation] = Field(min_length=1)


class ServeReply(BaseModel):
    """The hub's answer to a `ServeRequest`: how each forked evaluation ended, in the request's order."""

    version: int = PROTOCOL_VERSION
    entries: list[BatchEntry]


class ServeReport(Section):
    """An FD hub's own section: where it forked, how many evaluations it served, or why it served none."""

    forked_at: str | None = Field(None, description="The role (or the stop) at which the run was forked.")
    served: int = 0
    requests: int = 0
    refused: str | None = Field(None, description="Why the hub could not fork (another thread alive, a CUDA "
                                "context); the parent then runs each evaluation from the start.")


ResultStatus = Literal["completed", "error", "no_script", "harness_error"]


class TrendStop(Section):
    """What the plain run's trend watcher (`trend_stop`) saw: whether it ended the run early, and where."""

    stopped: bool = False
    points: int = 0
    iteration: int | None = None
    trend: str | None = None


class HarnessResult(BaseModel):
    """The document the child writes to `$WARPGRAD_RESULT`: how the session ended, plus one section per listener.

    A listener the protocol does not know (a test's, an experiment's) keeps its section as an extra field.
    """

    model_config = ConfigDict(extra="allow")

    version: int = PROTOCOL_VERSION
    status: ResultStatus
    error: ChildError | None = None
    warp_version: str | None = None
    device: str | None = None
    wall_s: float | None = None
    files: dict[str, str] = Field(default_factory=dict, description="sha256 of every workspace file the run imported.")
    files_changed: list[str] = Field(default_factory=list, description="Workspace files whose bytes changed on disk "
                                     "during the run: `files` holds the bytes that ran, not these.")
    warp_log: list[WarpLogRecord] = Field(default_factory=list, description="Warp's warnings and errors.")
    compiled_modules: list[str] = Field(default_factory=list)
    listener_errors: dict[str, str] = Field(default_factory=dict, description="Listener key -> its first failure.")
    run: RunCounts | None = None
    probe: ProbeReport | None = None
    tracker: TrackerReport | None = None
    localize: LocalizeReport | None = None
    trend_stop: TrendStop | None = None
    tape_inspect: TapeInspectReport | None = None
    batch: list[BatchEntry] | None = None
    fd_serve: ServeReport | None = None

    @field_validator("tape_inspect", mode="before")
    @classmethod
    def _tape_inspect(cls, v: Any) -> Any:
        # A description the parent cannot read fails the tape inspection (`TapeInspectReport.unreadable`), not the
        # whole run.
        return None if v is None else TapeInspectReport.read(v)

    def listener_failure(self, key: str, section: Section | None) -> str | None:
        """The failure of listener `key`: its `result()` raised, or one of its hooks did."""
        return (section.listener_error if section is not None else None) or self.listener_errors.get(key)


class CaptureResult(HarnessResult):
    """The result of a session in mode "capture"."""

    capture: CaptureReport | None = None


class FdResult(HarnessResult):
    """The result of a session in mode "fd"."""

    capture: FdReport | None = None


def result_type(mode: str) -> type[HarnessResult]:
    """The result model of a session in `mode`."""
    by_mode: dict[str, type[HarnessResult]] = {"capture": CaptureResult, "fd": FdResult}
    return by_mode.get(mode, HarnessResult)


def harness_error(message: str) -> dict[str, Any]:
    """The result of a session that failed in warpgrad's own code, before or after the user's script ran."""
    doc = HarnessResult(status="harness_error", error=ChildError(kind="harness_failed", message=message))
    return doc.model_dump(mode="json", exclude_none=True)


# ============================================================================================== the tape
class LaunchArg(BaseModel):
    """One argument of a kernel launch."""

    index: int
    name: str
    io: Literal["input", "output"]
    kind: Literal["array", "struct", "value"]
    value: str | None = Field(None, description="repr() of a plain value (truncated).")


class LaunchArray(BaseModel):
    """One array a launch passes (an argument, or a field of a struct argument), with what the kernel does to it."""

    arg: str
    arg_index: int = 0
    field: str | None = None
    array: str = Field(description="Array id within the description (a key of `RecordedTape.arrays`).")
    user_name: str | None = None
    read: bool = False
    written: bool = False
    accumulate_only: bool = False
    inplace: bool = False
    write_after_read: bool = False
    tracker_sees_read: bool = True
    # Absent where the access is not from the kernel's source (copies, the inputs/outputs fallback): then a
    # read is taken as a value read.
    value_read: bool = True
    conservative: bool = False
    read_lines: list[int] = Field(default_factory=list)
    write_lines: list[int] = Field(default_factory=list)
    changed_since_launch: bool | None = None


class RecordedLaunch(BaseModel):
    """One entry of the tape: a kernel launch, a recorded copy, or a recorded function."""

    index: int
    type: Literal["kernel", "copy", "func"]
    kernel: str | None = None
    module: str | None = None
    kernel_def: str | None = Field(None, description="file:line of the kernel's def.")
    site: CallSite = Field(default_factory=CallSite)
    dim: list[Any] = Field(default_factory=list)
    backward_enabled: bool = True
    backward_disabled_by: Literal["kernel", "module"] | None = None
    n_outputs: int = 0
    args: list[LaunchArg] = Field(default_factory=list)
    access_source: str | None = None
    count: int | None = None
    src_offset: int | None = None
    dest_offset: int | None = None
    recorded_iteration: int | None = None
    recorded_backward_index: int | None = None
    arrays: list[LaunchArray] = Field(default_factory=list)
    signature: str | None = None


class RecordedArray(BaseModel):
    id: str
    name: str | None = None
    shape: list[int] = Field(default_factory=list)
    dtype: str = ""
    device: str = ""
    requires_grad: bool = False
    retain_grad: bool = False
    ptr: int | None = None
    nbytes: int = 0
    grad_ptr: int | None = None


class UntapedWriteRecord(BaseModel):
    """A launch or copy that wrote arrays while the tape was open but was not recorded on it."""

    kind: Literal["launch", "copy"]
    kernel: str | None = None
    site: CallSite = Field(default_factory=CallSite)
    arrays: list[str] = Field(default_factory=list)
    why: str = ""
    after_launch: int = -1
    src_requires_grad: bool = False


class NanStep(BaseModel):
    index: int
    arrays: list[str] = Field(default_factory=list)
    output_adjoints_finite: bool | None = None


class NanReplay(BaseModel):
    checked: bool = True
    nonfinite_adjoints: bool = False
    origin: NanStep | None = None
    forward_origin: NanStep | None = None
    nonfinite_before_backward: list[str] = Field(default_factory=list)
    unreadable: list[str] = Field(default_factory=list, description="Arrays whose values or adjoints could not be "
                                  "read, so were not checked for NaN/inf (never counted as finite).")


class GradcheckTableRow(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    input: str
    output: str
    max_abs_error: float
    max_rel_error: float
    ad: float
    fd: float
    passed: str = Field(alias="pass", description="PASS, FAIL or NaN, as warp prints it.")


GradcheckStatus = Literal["passed", "failed", "nan", "nan_inputs", "vacuous", "inconclusive", "error"]


class GradcheckRun(BaseModel):
    index: int
    kernel: str
    status: GradcheckStatus = "error"
    reason: str = ""
    eps: float | None = None
    atol: float | None = None
    rtol: float | None = None
    fd_noise: float | None = None
    eps_retry: float | None = None
    passed_at_larger_eps: bool | None = None
    method: Literal["jacobian", "directional"] = "jacobian"
    dense_jacobian_bytes: int | None = Field(None, description="What gradcheck_tape would have allocated, where the "
                                             "launch was checked by directional products instead.")
    launches: int = Field(1, description="Launches of this tape the check stands for: every launch of the same kernel "
                          "with the same argument types, shapes and launch dimension runs the same adjoint code.")
    others: list[int] = Field(default_factory=list, description="Tape indices of the other launches of its class "
                              "this check stands for (their sites are named with the failure).")
    checked_at_iteration: int | None = Field(None, description="Set where the check was made on an earlier tape of "
                                             "the run (that iteration's values) and stands for this tape's launches.")
    rows: list[GradcheckTableRow] = Field(default_factory=list)


class GradcheckSkip(BaseModel):
    index: int
    kernel: str | None = None
    reason: str


class LaunchGradchecks(BaseModel):
    checked: list[GradcheckRun] = Field(default_factory=list)
    skipped: list[GradcheckSkip] = Field(default_factory=list)
    not_run: str | None = Field(None, description="Why (some) launches were not checked: the parent stopped the "
                                "checks (`LocalizeOptions.stop_file`).")


class TapeLocalization(BaseModel):
    """What `LocalizeListener` found on one tape."""

    nan: NanReplay | None = None
    gradcheck: LaunchGradchecks | None = None
    error: str | None = None


class RecordedTape(BaseModel):
    """One tape at its backward, as `TapeInspectListener.describe` writes it."""

    iteration: int | None = None
    backward_index: int | None = None
    n_launches: int = 0
    truncated: bool = False
    loss: list[str] = Field(default_factory=list, description="Ids of the arrays seeded in backward.")
    seed: str = ""
    launches: list[RecordedLaunch] = Field(default_factory=list)
    arrays: dict[str, RecordedArray] = Field(default_factory=dict)
    untaped_writes: list[UntapedWriteRecord] = Field(default_factory=list)
    warp_version: str | None = None
    localize: TapeLocalization | None = None

    def array(self, array_id: str) -> RecordedArray:
        """The array with this id (a blank record for an id the description does not list)."""
        return self.arrays.get(array_id) or RecordedArray(id=array_id)


class TapeInspectReport(Section):
    """`TapeInspectListener`: the tapes whose backward ran in the inspected iteration."""

    scheme: str | None = None
    iteration: int | None = None
    tapes: list[RecordedTape] = Field(default_factory=list)
    tapes_in_iteration: int = 0
    notes: list[str] = Field(default_factory=list)
    by_iteration: dict[str, TapeInspectReport] | None = Field(None, description="`TapeIterationsListener`: the same "
                                                               "report for every iteration described, by iteration.")
    unreadable: str | None = Field(None, description="Set by the parent where the child's section does not match "
                                   "this model: why (the rest of the report is then empty).")

    @classmethod
    def read(cls, raw: Any) -> TapeInspectReport:
        """`raw` as a report; one the protocol cannot read becomes a report saying why, so that a description the
        parent cannot read fails the tape inspection, not the whole run."""
        if isinstance(raw, cls):
            return raw
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            return cls(unreadable=str(e))

