"""`instrument`: run the script with Warp's overwrite tracker on and return its warnings as records.

The tracker flag (`wp.config.verify_autograd_array_access`) is set by the harness before Warp builds any
module, so every module of the run goes through codegen with tracking. Warp itself never serves such a
module from the kernel cache (warp-facts §2.4); the harness's `tracker_cache` reruns only the codegen
(which sets the flags and logs the within-kernel warnings) and reuses the tracker binary a previous run
built, so only the first tracker run of a module pays the native compile. Warnings are captured through
Warp's logger and attributed to the user's launch and copy call sites by
`warpgrad.tools.harness.tracker_listener`.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from . import tracker_parse as tracker
from .child_process import ProcessResult, run_harness
from .harness.protocol import (
    TRACKER_LISTENER,
    CaptureConfig,
    CaptureOptions,
    HarnessResult,
    RunConfig,
    TrackerReport,
)
from .ledger import Ledger
from .registry import ToolError, tool
from .run_script import RunError, describe_run
from .workspace import rel_or_raw as _rel
from .workspace import rel_path, resolve_path

BLIND_SPOTS = [
    "arrays held in wp.struct fields are not tracked",
    "a read that only happens in the left operand of a binary operator (y[i] = x[i] * 2.0) is not recorded",
    "in-place a[i] *= b[i] / a[i] /= b[i] counts as a pure write (its wrong d/db is not reported)",
    "across-launch and copy tracking only run while a wp.Tape is recording",
    "wp.copy is tracked only when both arrays have a .grad",
]


class InstrumentArgs(BaseModel):
    script: str = Field(description="Workspace-relative path of the script to run with the tracker on.")
    args: list[str] = Field(default_factory=list, description="Command-line arguments passed to the script (sys.argv[1:]).")
    iterations: int | None = Field(None, ge=1, description="Stop after this many training iterations (an iteration ends "
                                   "when the gradient is consumed after backward). Default: run the whole script.")
    timeout_s: float = Field(300.0, gt=0, le=3600, description="Wall-clock limit of the run.")
    device: Literal["cpu"] | None = Field(None, description="'cpu' forces Warp onto the CPU.")
    record: bool = Field(True, description="Append the result to the evidence ledger (kind 'tracker').")


class InstrumentResult(BaseModel):
    ok: bool = Field(description="The script ran under the tracker (False: see `error`).")
    clean: bool = Field(description="ok and the tracker reported no overwrite.")
    records: list[tracker.TrackerRecord] = Field(default_factory=list, description="Distinct overwrites, deduplicated.")
    n_warnings: int = Field(0, description="Total tracker messages (repeats included).")
    other_warnings: list[str] = Field(default_factory=list, description="Other Warp warnings seen (e.g. disabled backward).")
    modules_compiled: list[str] = Field(default_factory=list, description="Modules built with the tracker flag on "
                                        "during the run (codegen with tracking ran; the native binary may be a cached "
                                        "tracker build), from Warp's log and the codegen access flags of launched "
                                        "kernels.")
    compiled_with_tracker: bool = Field(False, description="At least one module was compiled while the flag was on, "
                                        "so in-kernel (codegen) checks ran.")
    taped_launches: int = Field(0, description="Launches recorded on a tape: across-launch tracking only covers these.")
    backward_calls: int = 0
    blind_spots: list[str] = Field(default_factory=lambda: list(BLIND_SPOTS),
                                   description="What the tracker cannot see; inspect_tape covers these.")
    notes: list[str] = []
    error: RunError | None = None
    script: str = ""
    args: list[str] = []
    files: dict[str, str] = Field(default_factory=dict, description="sha256 of every workspace file the run imported.")
    device: str = ""
    warp_version: str = ""
    wall_s: float = 0.0


def run_tracker(workspace: Path, script: Path | str, args: list[str] | None = None, *, iterations: int | None = None,
                timeout_s: float = 300.0, device: str | None = None,
                cancel: threading.Event | None = None) -> InstrumentResult:
    """Run `script` under the harness with the overwrite tracker on and parse what it reported.

    Args:
        workspace: Workspace root.
        script: The entry script (absolute, or relative to the workspace).
        args: sys.argv[1:] for the script.
        iterations: Stop after this many training iterations; None runs the whole script.
        timeout_s: Wall-clock limit of the run.
        device: "cpu" to force the CPU.
        cancel: Once set, the run is killed (diagnose stops it when the evidence no longer needs its records).

    Returns:
        An InstrumentResult; a script that fails gives `ok=False` with a structured `error`, never an exception.
    """
    workspace = Path(workspace).resolve()
    script = Path(script)
    script = script if script.is_absolute() else workspace / script
    args = list(args or [])
    tmp = Path(tempfile.mkdtemp(prefix="warpgrad-tracker-"))
    try:
        run = RunConfig(workspace=str(workspace), script=str(script), args=args, device=device, tracker=True,
                        listeners=[TRACKER_LISTENER], outdir=str(tmp))
        # Stopping after N iterations needs capture's iteration numbering.
        cfg: RunConfig | CaptureConfig = run if iterations is None else CaptureConfig(
            **run.model_dump(exclude={"mode"}), capture=CaptureOptions(iteration=iterations - 1))
        out = run_harness(cfg, HarnessResult, cwd=workspace, timeout_s=timeout_s, device=device, cancel=cancel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return describe_tracker(out.process, out.result, workspace, script, args)


def describe_tracker(proc: ProcessResult, data: HarnessResult | None, workspace: Path, script: Path,
                     args: list[str]) -> InstrumentResult:
    """Turn a harness outcome of a tracker run into an InstrumentResult."""
    run = describe_run(proc, data, workspace, script, args)
    # None: the listener never reported (the run died first); a failed listener keeps only its error.
    lst = data.tracker if data is not None else None
    failed = lst.listener_error if lst is not None else None
    if lst is None or failed:
        records = tracker.parse_log(data.warp_log if data is not None else [])
        notes = [f"the tracker listener failed ({failed}); records parsed from the Warp log"] if failed else []
    else:
        records = [r.model_copy(deep=True) for r in lst.records]
        notes = []
    for r in records:
        r.file = _rel(workspace, r.file)
        for s in (r.read_by, r.triggered_at):
            if s is not None:
                s.file = _rel(workspace, s.file)
        if r.kernel_def:
            f, _, ln = r.kernel_def.rpartition(":")
            r.kernel_def = f"{_rel(workspace, f)}:{ln}"
    # A codegen (within-kernel) warning fires for every kernel of a module when it is built, launched or not.
    # It only corrupts gradients when that kernel's backward replays: a kernel launched on a tape. Warp's own
    # kernels (the optimizers' in-place updates, outside any tape) are not the user's overwrite either.
    taped_kernels = set(lst.taped_kernels) if lst is not None and not failed else None
    kept, dropped_kernels = [], []
    for r in records:
        foreign = r.kind == "within_kernel" and r.file is not None and Path(r.file).is_absolute()
        untaped = r.kind == "within_kernel" and taped_kernels is not None and r.kernel not in taped_kernels
        if foreign or untaped:
            dropped_kernels.append(r.kernel or "?")
        else:
            kept.append(r)
    if dropped_kernels:
        notes.append("ignored in-kernel overwrite warnings of kernels never launched on a tape (their backward never "
                     f"runs) or outside the workspace: {', '.join(sorted(set(dropped_kernels)))}")
    records = kept
    notes += _listener_notes(run.error is None, lst or TrackerReport(), data.compiled_modules if data else [])
    other = [o.message + (f" (×{o.count})" if o.count > 1 else "") for o in (lst.other_warnings if lst else [])]
    if lst is None:
        other = [r.message[:300] for r in (data.warp_log if data else [])
                 if r.level == "warning" and not tracker.is_tracker_message(r.message)][:20]
    compiled = _compiled(lst or TrackerReport(), data.compiled_modules if data else [])
    try:
        rel = rel_path(workspace, script)
    except ValueError:
        rel = str(script)
    ok = run.error is None
    return InstrumentResult(
        ok=ok, clean=ok and not records, records=records, n_warnings=sum(r.count for r in records),
        other_warnings=other, modules_compiled=compiled, compiled_with_tracker=bool(compiled),
        taped_launches=lst.taped_launches if lst else 0, backward_calls=lst.backward_calls if lst else 0,
        notes=notes, error=run.error, script=rel, args=args, files=dict(data.files) if data else {},
        device=(data.device if data else None) or "", warp_version=(data.warp_version if data else None) or "",
        wall_s=proc.wall_s,
    )


def _compiled(lst: TrackerReport, compiled_modules: list[str]) -> list[str]:
    """Modules built with the tracker on: from Warp's log and from the listener's codegen flags."""
    return list(dict.fromkeys([*compiled_modules, *lst.modules_tracked]))


def _listener_notes(ran: bool, lst: TrackerReport, compiled_modules: list[str]) -> list[str]:
    """What the tracker listener says about its own coverage (a `clean` run is only as good as this)."""
    notes = []
    if lst.dropped:
        notes.append(f"{lst.dropped} further distinct warnings were dropped (limit reached)")
    compiled = _compiled(lst, compiled_modules)
    taped = lst.taped_launches
    if ran and taped == 0:
        notes.append("no launch was recorded on a tape: across-launch and copy tracking never ran, so 'clean' only "
                     "covers in-kernel overwrites")
    if lst.broken:
        notes.append(f"the tracker listener stopped after an internal error ({lst.broken}); records after it may be "
                     "missing")
    if lst.log_level_lowered:
        notes.append("the script set wp.config.log_level above LOG_WARNING, which hides tracker warnings; warpgrad "
                     "lowered it to LOG_WARNING for this run")
    reused = lst.modules_reused
    if reused:
        notes.append(f"tracker builds reused from the kernel cache (codegen and its checks ran again, the native "
                     f"compile did not): {', '.join(reused)}")
    untracked = sorted(set(lst.modules_launched) - set(compiled))
    if ran and not compiled:
        notes.append("no module was compiled during the run, so in-kernel (codegen) checks did not run")
    elif untracked:
        notes.append(f"no evidence that these launched modules were built with the tracker: {', '.join(untracked)} "
                     "(their kernels may touch no array, or they were loaded before the flag was set)")
    return notes


@tool(args=InstrumentArgs, result=InstrumentResult, long_running=True, forks=True)
def instrument(args: InstrumentArgs, workspace: Path) -> InstrumentResult:
    """Run the script with Warp's overwrite tracker on (verify_autograd_array_access, set before any module
    loads) and return each distinct overwrite it reports: kind (within_kernel, across_launches, copy), the
    kernel and argument written, the user's call site, the earlier launch that read the array, and how often
    it fired. `clean` is what the finish gate needs after a patch. The tracker is blind to arrays in structs,
    reads in the left operand of a binary op and `*=`/`/=`: use inspect_tape for those."""
    script = resolve_path(workspace, args.script)
    if not script.is_file():
        raise ToolError(f"{args.script} does not exist: give a workspace-relative path of a .py file")
    result = run_tracker(workspace, script, args.args, iterations=args.iterations, timeout_s=args.timeout_s,
                         device=args.device)
    if args.record:
        Ledger(workspace).append("tracker", result, tool="instrument")
    return result
