"""`inspect_tape`: list the tape recorded at the captured iteration and the gradient hazards it shows.

The script runs under the harness in capture mode (the same iteration numbering gradcheck uses) with
`TapeInspectListener`, which describes the tape at that iteration's `backward`; the hazards come from
`warpgrad.tools.tape_hazards`. Unlike Warp's overwrite tracker, the read/write sets come from each
kernel's source, so reads in the left operand of a binary op, `*=`/`/=` and arrays held in struct fields
are seen, and array identity is by memory, so `ptr=` aliases and rebound names are seen too.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from .child_process import ProcessResult, run_harness
from .harness.protocol import (
    LOCALIZE_LISTENER,
    TAPE_INSPECT_LISTENER,
    CaptureConfig,
    CaptureOptions,
    CaptureResult,
    GradcheckStatus,
    LaunchGradchecks,
    LocalizeOptions,
    RecordedLaunch,
    RecordedTape,
    TapeInspectOptions,
    TapeInspectReport,
    TapeLocalization,
)
from .registry import ToolError, tool
from .run_script import RunError, describe_run
from .tape_hazards import Hazard, hazards
from .workspace import rel_or_raw as _rel
from .workspace import rel_path, resolve_path

MAX_LAUNCHES_SHOWN = 300


class InspectTapeArgs(BaseModel):
    script: str = Field(description="Workspace-relative path of the training script.")
    args: list[str] = Field(default_factory=list, description="Command-line arguments passed to the script (sys.argv[1:]).")
    iteration: int | None = Field(None, ge=0, description="Training iteration whose tape to inspect (0-based, as in "
                                  "gradcheck). Default: the second where there is one.")
    launches: bool = Field(True, description="Include the launch list (set False for hazards only).")
    gradcheck_launches: bool = Field(False, description="Also run warp.autograd.gradcheck_tape on each distinct kernel "
                                     "launch of the tape (guarded: launches it cannot check are listed with the reason). "
                                     "Costs 2 launches per checked input element (capped at 16 per array).")
    nan_origin: bool = Field(True, description="If any adjoint on the tape is NaN/inf after backward, replay the backward "
                             "launch by launch and report the first launch whose adjoints turn non-finite.")
    timeout_s: float = Field(300.0, gt=0, le=3600, description="Wall-clock limit of the run.")
    device: Literal["cpu"] | None = Field(None, description="'cpu' forces Warp onto the CPU.")


class ArrayUse(BaseModel):
    """One array a launch passes (an argument, or a field of a struct argument)."""

    arg: str = Field(description="Kernel argument name.")
    field: str | None = Field(None, description="Struct field path when the array is held in a struct argument.")
    array: str = Field(description="Array id within this result (same id = same Python object).")
    name: str | None = Field(None, description="The user's variable name at the launch, where found.")
    shape: list[int] = []
    dtype: str = ""
    requires_grad: bool = False
    retain_grad: bool = False
    ptr: int | None = None
    read: bool = False
    written: bool = False
    accumulate_only: bool = False
    inplace: bool = False
    changed_since_launch: bool | None = Field(None, description="Its values differ at backward from those this launch "
                                              "read (None: not fingerprinted).")


class TapeLaunch(BaseModel):
    index: int
    type: Literal["kernel", "copy", "func"]
    kernel: str | None = None
    file: str | None = None
    line: int | None = None
    func: str | None = None
    dim: list[Any] = []
    kernel_def: str | None = None
    backward_enabled: bool = True
    backward_disabled_by: Literal["kernel", "module"] | None = None
    recorded_iteration: int | None = None
    access_source: str | None = Field(None, description="'ast' when reads/writes come from the kernel's source.")
    arrays: list[ArrayUse] = []


class UntapedWrite(BaseModel):
    kind: Literal["launch", "copy"]
    kernel: str | None = None
    file: str | None = None
    line: int | None = None
    arrays: list[str] = []
    why: str = ""
    after_launch: int | None = None


class GradcheckRow(BaseModel):
    input: str
    output: str
    max_abs_error: float
    max_rel_error: float
    ad: float = Field(description="Autodiff Jacobian entry at the max abs error.")
    fd: float = Field(description="Finite-difference Jacobian entry at the max abs error.")
    passed: str = Field(description="PASS, FAIL or NaN, as warp prints it.")


class LaunchCheck(BaseModel):
    """warp.autograd.gradcheck_tape on one recorded launch, in isolation, at the arrays' values after the forward."""

    index: int
    kernel: str
    file: str | None = None
    line: int | None = None
    status: GradcheckStatus = Field(
        description="nan: the adjoint is NaN/inf at finite inputs; nan_inputs: the inputs are already non-finite; "
                    "inconclusive: it failed only within float32 finite-difference noise.")
    fd_noise: float | None = Field(None, description="Estimated absolute FD rounding error (float32).")
    passed: bool | None = Field(None, description="True: passed; False: failed or NaN adjoint; None: could not "
                                "tell (vacuous, inconclusive, error).")
    reason: str = ""
    eps: float | None = None
    atol: float | None = None
    rtol: float | None = None
    method: Literal["jacobian", "directional"] = Field("jacobian", description="directional: checked by random "
                                                       "directional products w·J·v (rows: one per pair, its worst "
                                                       "direction), because the dense Jacobians exceed the memory "
                                                       "budget.")
    launches: int = Field(1, description="Launches of the tape this check stands for (the same kernel, argument "
                          "types and shapes, and launch dimension: the same adjoint code).")
    also_at: list[str] = Field(default_factory=list, description="file:line of the other launch sites this check "
                               "stands for (the same kernel on alike data, not checked again).")
    checked_at_iteration: int | None = Field(None, description="Set where the check was made on an earlier tape "
                                             "of the run, at that iteration's values.")
    rows: list[GradcheckRow] = []


class SkippedLaunch(BaseModel):
    index: int
    kernel: str | None = None
    file: str | None = None
    line: int | None = None
    reason: str


class NanOrigin(BaseModel):
    """Where non-finite values first appear."""

    nonfinite_adjoints: bool = Field(description="Some gradient on the tape was NaN/inf after backward.")
    index: int | None = Field(None, description="The first launch, in backward order, whose input adjoints turned "
                              "non-finite (None when none did on replay, or nothing was non-finite).")
    kernel: str | None = None
    file: str | None = Field(None, description="Its forward call site.")
    line: int | None = None
    arrays: list[str] = Field(default_factory=list, description="The arrays whose adjoints turned non-finite there.")
    output_adjoints_finite: bool | None = Field(None, description="True: the launch itself produced the non-finite "
                                                "adjoint from finite incoming ones.")
    forward_index: int | None = Field(None, description="The first forward launch that wrote a non-finite value.")
    forward_kernel: str | None = None
    forward_file: str | None = None
    forward_line: int | None = None
    forward_arrays: list[str] = []
    nonfinite_before_backward: list[str] = Field(default_factory=list, description="Arrays whose gradient was already "
                                                 "NaN/inf before this backward (accumulated, never zeroed).")
    unreadable: list[str] = Field(default_factory=list, description="Arrays whose values or adjoints could not be "
                                  "read: not checked for NaN/inf, so no claim is made about them.")


class TapeDescription(BaseModel):
    iteration: int | None = None
    backward_index: int | None = None
    n_launches: int = 0
    loss: list[str] = Field(default_factory=list, description="Names of the arrays seeded in backward.")
    seed: str = ""
    launches: list[TapeLaunch] = []
    untaped_writes: list[UntapedWrite] = []
    truncated: bool = False
    gradcheck: list[LaunchCheck] = Field(default_factory=list, description="Per-launch gradcheck_tape results.")
    gradcheck_skipped: list[SkippedLaunch] = Field(default_factory=list, description="Launches gradcheck_tape could "
                                                   "not check, with why (it would skip or crash on them silently).")
    gradcheck_not_run: str | None = Field(None, description="Why per-launch checks were not (all) made on this tape.")
    nan_origin: NanOrigin | None = None
    localize_error: str | None = None


class InspectTapeResult(BaseModel):
    ok: bool = Field(description="A tape was recorded and described (False: see `reason`/`error`).")
    reason: str = ""
    error: RunError | None = None
    hazards: list[Hazard] = Field(default_factory=list, description="Most severe first.")
    tapes: list[TapeDescription] = Field(default_factory=list, description="The tapes whose backward ran in the iteration.")
    iteration: int | None = None
    scheme: str | None = None
    notes: list[str] = []
    script: str = ""
    args: list[str] = []
    files: dict[str, str] = {}
    device: str = ""
    warp_version: str = ""
    wall_s: float = 0.0


def _relativize(workspace: Path, desc: RecordedTape) -> None:
    """Workspace-relative paths everywhere in a description (in place)."""
    for d in desc.launches:
        if d.site.file:
            d.site.file = _rel(workspace, d.site.file)
        if d.kernel_def:
            f, _, ln = d.kernel_def.rpartition(":")
            d.kernel_def = f"{_rel(workspace, f)}:{ln}"
    for u in desc.untaped_writes:
        if u.site.file:
            u.site.file = _rel(workspace, u.site.file)


def _array_use(desc: RecordedTape, d: RecordedLaunch) -> list[ArrayUse]:
    uses = []
    for e in d.arrays:
        a = desc.array(e.array)
        uses.append(ArrayUse(arg=e.arg, field=e.field, array=e.array, name=e.user_name or a.name, shape=a.shape,
                             dtype=a.dtype, requires_grad=a.requires_grad, retain_grad=a.retain_grad, ptr=a.ptr,
                             read=e.read, written=e.written, accumulate_only=e.accumulate_only, inplace=e.inplace,
                             changed_since_launch=e.changed_since_launch))
    return uses


def _tape_model(desc: RecordedTape, with_launches: bool) -> TapeDescription:
    names = {k: (a.name or k) for k, a in desc.arrays.items()}
    launches = [TapeLaunch(index=d.index, type=d.type, kernel=d.kernel, file=d.site.file, line=d.site.line,
                           func=d.site.func, dim=d.dim, kernel_def=d.kernel_def, backward_enabled=d.backward_enabled,
                           backward_disabled_by=d.backward_disabled_by, recorded_iteration=d.recorded_iteration,
                           access_source=d.access_source, arrays=_array_use(desc, d))
                for d in (desc.launches[:MAX_LAUNCHES_SHOWN] if with_launches else [])]
    untaped = [UntapedWrite(kind=u.kind, kernel=u.kernel, file=u.site.file, line=u.site.line,
                            arrays=[names.get(a, a) for a in u.arrays], why=u.why, after_launch=u.after_launch)
               for u in desc.untaped_writes[:50]]
    td = TapeDescription(iteration=desc.iteration, backward_index=desc.backward_index, n_launches=desc.n_launches,
                         loss=[names.get(a, a) for a in desc.loss], seed=desc.seed, launches=launches,
                         untaped_writes=untaped,
                         truncated=desc.truncated or len(desc.launches) > MAX_LAUNCHES_SHOWN)
    _localization(td, desc, names)
    return td


class _Sites:
    """Call sites of a description's launches, by tape index."""

    def __init__(self, desc: RecordedTape) -> None:
        self.by_index = {d.index: d for d in desc.launches}

    def __call__(self, j: int | None) -> tuple[str | None, int | None, str | None]:
        d = self.by_index.get(j) if j is not None else None
        if d is None:
            return None, None, None
        return d.site.file, d.site.line, d.kernel


def _localization(td: TapeDescription, desc: RecordedTape, names: dict[str, str]) -> None:
    loc = desc.localize or TapeLocalization()
    td.localize_error = loc.error
    site = _Sites(desc)
    _launch_checks(td, loc.gradcheck or LaunchGradchecks(), site)
    nan = loc.nan
    if nan is not None:
        o, f = nan.origin, nan.forward_origin
        file, line, kernel = site(o.index if o else None)
        ffile, fline, fkernel = site(f.index if f else None)
        td.nan_origin = NanOrigin(
            nonfinite_adjoints=nan.nonfinite_adjoints, index=o.index if o else None, kernel=kernel, file=file,
            line=line, arrays=[names.get(a, a) for a in (o.arrays if o else [])],
            output_adjoints_finite=o.output_adjoints_finite if o else None, forward_index=f.index if f else None,
            forward_kernel=fkernel, forward_file=ffile, forward_line=fline,
            forward_arrays=[names.get(a, a) for a in (f.arrays if f else [])],
            nonfinite_before_backward=[names.get(a, a) for a in nan.nonfinite_before_backward],
            unreadable=[names.get(a, a) for a in nan.unreadable])


def _launch_checks(td: TapeDescription, gc: LaunchGradchecks, site: _Sites) -> None:
    for c in gc.checked:
        file, line, _ = site(c.index)
        own = f"{file}:{line}"
        also = list(dict.fromkeys(f"{f}:{ln}" for f, ln, _ in map(site, c.others) if f and f"{f}:{ln}" != own))
        td.gradcheck.append(LaunchCheck(
            index=c.index, kernel=c.kernel, file=file, line=line, status=c.status, reason=c.reason, eps=c.eps,
            atol=c.atol, rtol=c.rtol, fd_noise=c.fd_noise, method=c.method, launches=c.launches, also_at=also,
            checked_at_iteration=c.checked_at_iteration,
            passed={"passed": True, "failed": False, "nan": False}.get(c.status),
            rows=[GradcheckRow(input=r.input, output=r.output, max_abs_error=r.max_abs_error,
                               max_rel_error=r.max_rel_error, ad=r.ad, fd=r.fd, passed=r.passed)
                  for r in c.rows]))
    td.gradcheck_not_run = gc.not_run
    for sk in gc.skipped:
        file, line, kernel = site(sk.index)
        td.gradcheck_skipped.append(SkippedLaunch(index=sk.index, kernel=sk.kernel or kernel, file=file, line=line,
                                                  reason=sk.reason))


def inspect(workspace: Path, script: Path | str, args: list[str] | None = None, iteration: int | None = None, *,
            timeout_s: float = 300.0, device: str | None = None, with_launches: bool = True, max_tapes: int = 4,
            gradcheck_launches: bool = False, nan_origin: bool = True,
            extra_listeners: list[str] | None = None) -> InspectTapeResult:
    """Run `script` in capture mode with the tape inspector and return the tape and its hazards.

    Args:
        workspace: Workspace root.
        script: The entry script (absolute, or relative to the workspace).
        args: sys.argv[1:] for the script.
        iteration: Training iteration to inspect (None: capture's default, the second where there is one).
        timeout_s: Wall-clock limit of the run.
        device: "cpu" to force the CPU.
        with_launches: Include the launch list in the result.
        max_tapes: Describe at most this many tapes of the iteration (a backward per step makes many).
        gradcheck_launches: Run guarded per-launch `gradcheck_tape` on each described tape.
        nan_origin: Locate the first launch whose adjoints turn non-finite, when any do.
        extra_listeners: More harness listeners for the same run (`module:Class`).

    Returns:
        An InspectTapeResult; a script that fails gives `ok=False` with a structured `error`, never an exception.
    """
    workspace = Path(workspace).resolve()
    script = Path(script)
    script = script if script.is_absolute() else workspace / script
    args = list(args or [])
    tmp = Path(tempfile.mkdtemp(prefix="warpgrad-tape-"))
    try:
        localize = LocalizeOptions(gradcheck=gradcheck_launches, nan=nan_origin) \
            if gradcheck_launches or nan_origin else None
        cfg = CaptureConfig(workspace=str(workspace), script=str(script), args=args, device=device, outdir=str(tmp),
                            capture=CaptureOptions(iteration=iteration),
                            listeners=[TAPE_INSPECT_LISTENER, *([LOCALIZE_LISTENER] if localize else []),
                                       *(extra_listeners or [])],
                            tape_inspect=TapeInspectOptions(max_tapes=max_tapes), localize=localize)
        out = run_harness(cfg, CaptureResult, cwd=workspace, timeout_s=timeout_s, device=device)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return describe_inspection(out.process, out.result, workspace, script, args, with_launches=with_launches)


def _tape_report(ti: TapeInspectReport | None) -> TapeInspectReport | str:
    """The tape inspector's section; why it is unusable otherwise."""
    ti = ti if ti is not None else TapeInspectReport()
    if ti.unreadable is not None:
        return (f"the tape inspector wrote a description this warpgrad cannot read (a bug in warpgrad, not in your "
                f"script): {ti.unreadable}")
    if ti.listener_error:
        return f"the tape inspector failed: {ti.listener_error}"
    return ti


def describe_inspection(proc: ProcessResult, data: CaptureResult | None, workspace: Path, script: Path,
                        args: list[str], *, with_launches: bool = True) -> InspectTapeResult:
    """Turn a harness outcome with the tape inspector into an InspectTapeResult."""
    run = describe_run(proc, data, workspace, script, args)
    try:
        rel = rel_path(workspace, script)
    except ValueError:
        rel = str(script)
    res = InspectTapeResult(ok=False, script=rel, args=args, files=dict(data.files) if data else {},
                            device=(data.device if data else None) or "",
                            warp_version=(data.warp_version if data else None) or "", wall_s=proc.wall_s,
                            error=run.error)
    ti = _tape_report(data.tape_inspect if data else None)
    if isinstance(ti, str):
        res.reason = ti
        return res
    res.iteration, res.scheme = ti.iteration, ti.scheme
    res.notes = list(ti.notes)
    loc = data.localize if data else None
    if loc is not None and (loc.broken or loc.listener_error):
        res.notes.append(f"localization stopped after an internal error ({loc.broken or loc.listener_error})")
    tapes = ti.tapes
    if run.error is not None and not tapes:
        res.reason = f"the script does not run: {run.error.message}"
        return res
    if run.error is not None:
        res.notes.append(f"the script failed after the inspected tape's backward: {run.error.message}")
    if not tapes:
        res.reason = ("no tape.backward() ran" + (f" in iteration {res.iteration}" if res.iteration is not None else "")
                      + ": nothing to inspect (is the backward pass behind a flag or in another script?)")
        return res
    all_h: list[Hazard] = []
    for k, desc in enumerate(tapes):
        _relativize(workspace, desc)
        hs = hazards(desc)
        for h in hs:
            h.tape = k
        all_h.extend(hs)
        res.tapes.append(_tape_model(desc, with_launches))
    if ti.tapes_in_iteration > len(tapes):
        res.notes.append(f"{ti.tapes_in_iteration} tapes ran backward in the iteration; the first {len(tapes)} are "
                         "described (backward per step: see WG004)")
    order = {"error": 0, "warning": 1, "info": 2}
    res.hazards = sorted(all_h, key=lambda h: order[h.severity])
    res.ok = True
    return res


@tool(args=InspectTapeArgs, result=InspectTapeResult, long_running=True, forks=True)
def inspect_tape(args: InspectTapeArgs, workspace: Path) -> InspectTapeResult:
    """List the tape recorded at a training iteration (every launch with kernel, call site, dim, and its
    arrays: shape, dtype, requires_grad, retain_grad, which the kernel reads and writes from its source) and
    the gradient hazards it shows, with evidence: write-after-read across launches (struct fields and
    memory aliases included, where Warp's tracker is blind), arrays changed between recording and backward,
    launches that do not feed the loss or are recorded twice, a gradient chain cut by requires_grad=False or
    enable_backward=False, retain_grad on an array written twice, copies on the tape."""
    script = resolve_path(workspace, args.script)
    if not script.is_file():
        raise ToolError(f"{args.script} does not exist: give a workspace-relative path of a .py file")
    return inspect(workspace, script, args.args, args.iteration, timeout_s=args.timeout_s, device=args.device,
                   with_launches=args.launches, gradcheck_launches=args.gradcheck_launches, nan_origin=args.nan_origin)
