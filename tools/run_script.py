"""`run_script`: run the user's workflow as `python script.py args...` would, in a sandboxed subprocess."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from .child_process import DEFAULT_MEMORY_MB, ProcessResult, run_harness, strip_warp_chatter
from .harness.protocol import HarnessResult, RunConfig
from .ledger import Ledger
from .losses import JsonFloat, LossPoint, parse_progress, summarize
from .metric import Direction, MetricSpec
from .paths import rel_path, resolve_path
from .registry import CliCommand, tool
from .workflow import fix_workflow

ErrorKind = Literal[
    "timeout", "crashed", "out_of_memory", "syntax_error", "missing_import", "import_error", "file_not_found",
    "script_raised", "exit_code", "harness_failed", "interrupted", "bad_probe", "config",
]


class RunScriptArgs(BaseModel):
    script: str = Field(description="Workspace-relative path of the Python script to run.")
    args: list[str] = Field(default_factory=list, description="Command-line arguments passed to the script (sys.argv[1:]).")
    timeout_s: float = Field(300.0, gt=0, le=3600, description="Wall-clock limit; the whole process group is killed past it.")
    memory_mb: int = Field(DEFAULT_MEMORY_MB, gt=64, description="Address-space cap of the process, in MiB (CPU runs).")
    device: Literal["cpu"] | None = Field(None, description="'cpu' forces Warp onto the CPU even where CUDA exists.")
    record: bool = Field(True, description="Append the run (with its loss trajectory) to the evidence ledger.")
    metric: str | None = Field(None, description="Name of the printed quantity the run is judged by when the script "
                               "prints a metric rather than a loss (e.g. 'x_T' for `x_T = 0.98`). The finish gate "
                               "compares the runs before and after a patch by it.")
    metric_regex: str | None = Field(None, description="Instead of `metric`: a regex over stdout whose first group is "
                                     "the value.")
    metric_direction: Direction = Field("lower", description="Which way the metric is better: lower, higher, or "
                                        "closer (to metric_target).")
    metric_target: float | None = Field(None, description="With metric_direction='closer': the value to approach.")

    @model_validator(mode="after")
    def _metric_is_whole(self) -> RunScriptArgs:
        if self.metric is None and self.metric_regex is None:
            if self.metric_target is not None or self.metric_direction != "lower":
                raise ValueError("metric_direction and metric_target need `metric` or `metric_regex`")
            return self
        self.metric_spec()  # raises with the reason when the spec is incomplete or the regex is bad
        return self

    def metric_spec(self) -> MetricSpec | None:
        if self.metric is None and self.metric_regex is None:
            return None
        return MetricSpec(name=self.metric, regex=self.metric_regex, direction=self.metric_direction,
                          target=self.metric_target)


class RunError(BaseModel):
    kind: ErrorKind
    message: str
    file: str | None = None
    line: int | None = None
    traceback: list[dict[str, Any]] = []


class RunScriptResult(BaseModel):
    ok: bool = Field(description="The script ran to completion with exit code 0.")
    script: str
    args: list[str]
    returncode: int | None
    signal: str | None = None
    timed_out: bool = False
    wall_s: float
    stdout_tail: str = Field(description="The end of the script's own stdout (Warp's chatter removed).")
    stderr_tail: str = ""
    output_truncated: bool = False
    error: RunError | None = None
    warp_version: str | None = None
    device: str | None = None
    loss_trajectory: list[JsonFloat] = []
    loss_points: list[LossPoint] = []
    final_loss: JsonFloat | None = None
    trend: str | None = None
    warp_warnings: list[str] = []
    files: dict[str, str] = Field(default_factory=dict, description="sha256 of every workspace file the run imported "
                                  "(of the bytes that ran).")
    files_changed: list[str] = Field(default_factory=list, description="Files that changed on disk while the run ran: "
                                     "the code on disk now is not the code this run exercised.")
    counts: dict[str, int] = {}
    metric: MetricSpec | None = Field(None, description="The named metric the run is judged by, if one was given.")
    metric_values: list[JsonFloat] = Field(default_factory=list, description="Every value of the metric in stdout.")
    metric_final: JsonFloat | None = Field(None, description="The last value of the metric (None: not printed).")
    metric_error: str | None = Field(None, description="Why the metric was not read (its regex ran out of time on "
                                     "this output); then there are no metric values.")


def run_script_in(workspace: Path, script: Path, args: list[str], *, timeout_s: float = 300.0,
                  memory_mb: int = DEFAULT_MEMORY_MB, device: str | None = None,
                  metric: MetricSpec | None = None) -> RunScriptResult:
    """Run `script` under the harness in "run" mode and describe what happened."""
    workspace = Path(workspace).resolve()
    cfg = RunConfig(workspace=str(workspace), script=str(script), args=list(args), device=device)
    out = run_harness(cfg, HarnessResult, cwd=workspace, timeout_s=timeout_s, memory_mb=memory_mb, device=device)
    return describe_run(out.process, out.result, workspace, script, args, metric=metric)


def describe_run(proc: ProcessResult, data: HarnessResult | None, workspace: Path, script: Path, args: list[str],
                 metric: MetricSpec | None = None) -> RunScriptResult:
    """What a harness run did, for people and the ledger: its error, output, losses and Warp's warnings."""
    stdout = strip_warp_chatter(proc.stdout_tail)
    metric_values, metric_error = metric.scan(stdout) if metric is not None else ([], None)
    stderr = strip_warp_chatter(proc.stderr_tail)
    error = _error_of(proc, data, stderr)
    points = parse_progress(stdout)
    summary = summarize(points)
    try:
        rel = rel_path(workspace, script)
    except ValueError:
        rel = str(script)
    return RunScriptResult(
        ok=error is None, script=rel, args=list(args), returncode=proc.returncode, signal=proc.signal,
        timed_out=proc.timed_out, wall_s=proc.wall_s, stdout_tail=stdout[-8000:], stderr_tail=stderr[-4000:],
        output_truncated=proc.stdout_bytes > len(proc.stdout_tail.encode()) or proc.stderr_bytes > len(proc.stderr_tail.encode()),
        error=error, warp_version=data.warp_version if data else None, device=data.device if data else None,
        loss_trajectory=[p.value for p in points], loss_points=points[-200:], final_loss=summary.get("last"),
        trend=summary.get("trend"),
        warp_warnings=[r.message[:400] for r in (data.warp_log if data else []) if r.level == "warning"][:50],
        files=dict(data.files) if data else {}, files_changed=list(data.files_changed) if data else [],
        counts=_counts(data),
        metric=metric, metric_values=metric_values, metric_final=metric_values[-1] if metric_values else None,
        metric_error=metric_error,
    )


def _counts(data: HarnessResult | None) -> dict[str, int]:
    run = data.run if data is not None else None
    return run.counts() if run is not None and run.listener_error is None else {}


def _error_of(proc: ProcessResult, data: HarnessResult | None, stderr: str) -> RunError | None:
    if proc.timed_out:
        return RunError(kind="timeout", message=f"the script ran past {proc.wall_s:.0f} s and was killed (a hang, or "
                        "too large for a check: shrink it)")
    if proc.signal:
        hint = " (a segmentation fault: often an out-of-bounds index in a kernel; rerun with wp.config.mode = 'debug')" \
            if proc.signal == "SIGSEGV" else ""
        return RunError(kind="crashed", message=f"the script crashed with {proc.signal}{hint}")
    if data is None:
        tail = "\n".join(stderr.strip().splitlines()[-10:])
        if "MemoryError" in stderr or "std::bad_alloc" in stderr:
            return RunError(kind="out_of_memory", message=f"the script ran out of memory (cap {proc.memory_limit_mb} MiB)")
        return RunError(kind="harness_failed", message=f"the run {proc.describe()} without a report:\n{tail}")
    err = data.error
    if err:
        tb = err.traceback
        last = tb[-1] if tb else None
        msg = f"{err.type or ''}: {err.message}".strip(": ")
        if err.kind == "out_of_memory":
            msg = f"the script ran out of memory (cap {proc.memory_limit_mb} MiB): {msg}"
        return RunError(kind=err.kind, message=msg, file=err.file or (last.file if last else None),
                        line=err.line or (last.line if last else None),
                        traceback=[f.model_dump() for f in tb])
    if proc.returncode not in (0, None):
        return RunError(kind="exit_code", message=f"exit code {proc.returncode}")
    return None


@tool(args=RunScriptArgs, result=RunScriptResult, long_running=True, forks=True,
      cli=CliCommand(name="run", help="Run a script in the sandbox and report its exit, time, Warp warnings and loss "
                                     "trajectory. Arguments after `--` go to the script.",
                     rename={"timeout_s": "timeout"}, exit_code=lambda r: 0 if r.ok else 1,
                     render="warpgrad.cli.core:render_run"))
def run_script(args: RunScriptArgs, workspace: Path) -> RunScriptResult:
    """Run a workspace script as `python script.py args...` would (its folder on sys.path) in a sandboxed
    subprocess with a timeout and memory cap, and report exit status, wall time, the end of its output,
    Warp's warnings, and the loss trajectory parsed from what it prints. Use it to reproduce the user's
    symptom and, after a fix, to rerun their workflow (the finish gate needs that rerun). When the script
    prints a metric rather than a loss, name it (`metric`, or `metric_regex`, with `metric_direction`) so
    the gate can compare the runs before and after a patch without editing the user's print lines."""
    path = resolve_path(workspace, args.script)
    result = run_script_in(workspace, path, args.args, timeout_s=args.timeout_s, memory_mb=args.memory_mb,
                           device=args.device, metric=args.metric_spec())
    if args.record:
        rec = Ledger(workspace).append("run", result, tool="run_script")
        fix_workflow(workspace, rec, dict(os.environ))  # the first completed run fixes the workflow
    return result
