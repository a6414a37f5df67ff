"""`gradcheck`: does the gradient the optimizer consumes match finite differences of the objective?

Two drivers share one FD engine (`warpgrad.tools.fd`):

* capture (zero-config): the user's own script runs under hooks; at training iteration T the seeded
  loss, the parameters and the consumed gradient are recorded; each FD evaluation is a fresh run of
  the script with the perturbation added at the parameters' first use in iteration T, stopped at T's
  update. A baseline rerun must reproduce the captured objective (else the forward is not deterministic).
* probe: a small file with `params()`, `loss()`, `grad()` that imports the shipped program.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field

from . import fd, progress
from .child_process import (
    HarnessOutcome,
    ProcessResult,
    _cuda_possible,
    read_forked_session,
    run_harness,
    strip_warp_chatter,
)
from .fd_hub import FdHub
from .harness.protocol import (
    BatchConfig,
    BatchEntry,
    CaptureConfig,
    CapturedIteration,
    CapturedParam,
    CaptureOptions,
    CaptureReport,
    CaptureResult,
    FdConfig,
    FdOptions,
    FdResult,
    HarnessResult,
    LocalizeOptions,
    Perturbation,
    ProbeConfig,
    ProbeOptions,
    ProbeReport,
    ServeEvaluation,
    ServeOptions,
    TapeInspectOptions,
)
from .ledger import Ledger
from .losses import parse_losses, parse_progress
from .registry import CliCommand, ToolError, tool
from .run_script import RunError, RunScriptResult, describe_run
from .signatures import Signature
from .workspace import rel_path, resolve_path

PrintedRelation = Literal["same", "factor", "different", "not_printed"]
EPS_POLICY = "central differences along seeded Gaussian directions scaled by the RMS of each parameter lane; " \
             f"step sweep {', '.join(f'{s:g}' for s in fd.STEPS)}; noise band from the sweep"


class GradcheckArgs(BaseModel):
    script: str | None = Field(None, description="Workspace-relative path of the training script to check (zero-config capture). "
                               "Optional with a probe (then it only sets the folder the probe imports from).")
    probe: str | None = Field(None, description="Workspace-relative probe file defining params(), loss(), grad() (see "
                              "references/verification.md). Use when capture cannot follow the script.")
    args: list[str] = Field(default_factory=list, description="Arguments passed to the script (sys.argv[1:]).")
    params: list[str] = Field(default_factory=list, description="Restrict the check to these parameters (names as the "
                              "script spells them, e.g. 'v' or 'model.k'), or name them when no update is seen.")
    iteration: int | None = Field(None, ge=0, description="Training iteration to check (0-based). Default: the second "
                                  "where there is one, since accumulation bugs only show from the second on.")
    objective: str | None = Field(None, description="Name of a variable in the script (e.g. 'mean_loss') to difference "
                                  "instead of the loss seeded into backward.")
    directions: int = Field(3, ge=1, le=16, description="Number of random directions (each costs 2 evaluations).")
    elements: int = Field(0, ge=0, le=64, description="On failure, also check up to this many single elements "
                          "(2 evaluations each) to locate a sparse mismatch.")
    seed: int = Field(0, description="Seed of the random directions (and of Python's and numpy's global RNGs).")
    device: Literal["cpu"] | None = Field(None, description="'cpu' forces Warp onto the CPU.")
    timeout_s: float = Field(300.0, gt=0, le=3600, description="Wall-clock limit of each run of the script.")
    jobs: int = Field(0, ge=0, le=16, description="Parallel evaluations (0: one per CPU core, at most 4).")
    record: bool = Field(True, description="Append the result to the evidence ledger.")
    declared_objective: bool = Field(False, description="With a probe: its loss() is declared to be the objective the "
                                     "script reports. It then counts as the user's objective only if it agrees with "
                                     "what the script reports at the same parameters.")


class ParamCheck(BaseModel):
    name: str
    role: str | None = Field(None, description="How capture identifies it across runs (first taped use).")
    how: str | None = Field(None, description="How the script consumed its gradient.")
    shape: list[int] = []
    size: int = 0
    ad_norm: float | None = None
    nonfinite: int = 0
    ad: float | None = Field(None, description="AD·v along this parameter's own direction (when checked alone).")
    fd: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    ratio: float | None = None
    agree: bool | None = None


class IterationCheck(BaseModel):
    iteration: int
    passed: bool | None = None
    objective_value: float | None = None
    agreeing_directions: int = 0


class GradcheckResult(BaseModel):
    ok: bool = Field(description="The check could be made (False: see `reason` and `error`).")
    passed: bool | None = Field(None, description="AD matched FD within the noise band (None when inconclusive).")
    signature: Signature = Signature.INCONCLUSIVE
    factor: float | None = None
    explanation: str = ""
    reason: str = ""
    error: RunError | None = None
    objective: str = Field("", description="Exactly which quantity was differenced.")
    objective_value: float | None = None
    gradient: str = Field("", description="Exactly which gradient was compared.")
    params: list[ParamCheck] = []
    directions: list[fd.DirectionCheck] = []
    sweep: list[fd.SweepPoint] = []
    elements: list[fd.ElementCheck] = []
    eps: float | None = None
    noise_band: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    ratio_mean: float | None = None
    ratio_spread: float | None = None
    iteration: int | None = None
    backward_calls: int | None = None
    evaluations: int = 0
    evaluations_from_hub: int = Field(0, description="How many of the perturbed runs were forked at the checked "
                                      "iteration from one run of the script (an FD hub) rather than run from the "
                                      "start; both give the same objective.")
    mode: Literal["capture", "probe"] = "capture"
    script: str | None = None
    probe: str | None = None
    harness_id: str = ""
    harness: dict[str, Any] = {}
    files: dict[str, str] = {}
    full_horizon: bool = True
    objective_kind: Literal["script", "partial", "probe", "probe_declared"] = Field(
        "script", description="script: the scalar the script seeds or reports; partial: a named variable, a sub-array "
        "or an intermediate not shown to be that objective (partial evidence); probe: a probe's loss(); "
        "probe_declared: a probe loss() declared to be, and agreeing with, the script's reported objective.")
    iterations: list[int] = Field(default_factory=list, description="Training iterations checked (first and a later "
                                  "one by default).")
    nondeterministic: bool = Field(False, description="An unperturbed rerun did not reproduce the objective.")
    rerun_mismatch: bool = Field(False, description="An unperturbed rerun failed or differed from the first run at "
                                 "all (`nondeterministic`: beyond the tolerance), here or at the other iteration.")
    fd_unresolvable: bool = Field(False, description="The objective's float rounding swamps its change at every step.")
    fd_unconverged: bool = Field(False, description="The FD step sweep does not converge (chaos, a long horizon, "
                                 "kinks): FD has no value to compare AD with, so the check gives no verdict.")
    next_steps: list[str] = Field(default_factory=list, description="Concrete checks that can resolve a verdict this "
                                  "one could not give (a shorter horizon, a float64 reference), each runnable as "
                                  "written.")
    perturbation_unreached: bool = Field(False, description="The objective never moved under any perturbation.")
    stale_read: bool = Field(False, description="An update applies a gradient read before this iteration's backward.")
    tape_gradient_passed: bool | None = Field(None, description="Where the update applies another gradient than the "
                                              "one this iteration's tapes left in .grad (a stale read; a host sum "
                                              "that counts a never-zeroed .grad again): whether the tapes' own "
                                              "gradient matches FD (True), does not (False), or was not judged "
                                              "(None; also when the update applies the tapes' gradient).")
    printed_vs_seeded: PrintedRelation = Field("not_printed", description="How the loss the script prints relates "
                                               "to the one seeded into backward.")
    reported_factor: float | None = Field(None, description="The printed loss is this × the seeded one (FD is of "
                                          "the printed one).")
    forward_nonfinite: bool = Field(False, description="The objective itself is NaN/inf before any update: a forward bug.")
    device: str = ""
    warp_version: str = ""
    notes: list[str] = []
    wall_s: float = 0.0
    per_iteration: list[IterationCheck] = Field(default_factory=list, description="Each checked iteration: its "
                                                "verdict, objective value and how many directions agreed.")


HUB_ENV = "WARPGRAD_FD_HUB"
"""Set to 0 to run every FD evaluation from the script's start (no hub): for comparisons, or to rule the hub out."""


def _harness_id(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _jobs(n: int) -> int:
    return n or max(1, min(4, os.cpu_count() or 1))


def _fail(base: GradcheckResult, reason: str, error: RunError | None = None) -> GradcheckResult:
    base.ok = False
    base.passed = None
    base.signature = Signature.INCONCLUSIVE
    base.reason = reason
    base.error = error
    return base


def check(args: GradcheckArgs, workspace: Path) -> GradcheckResult:
    workspace = Path(workspace).resolve()
    if not args.script and not args.probe:
        raise ToolError("give a script (zero-config capture) or a probe file")
    script = resolve_path(workspace, args.script) if args.script else None
    probe = resolve_path(workspace, args.probe) if args.probe else None
    for p in (script, probe):
        if p is not None and not p.is_file():
            raise ToolError(f"{rel_path(workspace, p)} does not exist: give a workspace-relative path of a .py file")
    if probe is not None:
        return check_probe(args, workspace, probe, script)
    assert script is not None  # neither a script nor a probe was refused above
    return check_capture(args, workspace, script)


# ------------------------------------------------------------------------------------------ capture
class _Evaluator:
    """Runs FD evaluations of one captured script: each evaluation is the script rerun with perturbations
    added at the parameters' first use in the checked iteration, stopped at that iteration's update.

    On the CPU the evaluations of an iteration fork from one FD hub (`fd_hub`), which runs the script's start
    once; where a hub cannot serve (a thread alive at its fork point, a failure of ours), each evaluation runs
    from the start, forked from a booted harness (`_chunk`), or as a process of its own where CUDA is in play."""

    # What every evaluation shares with the capture run.
    INHERITED: ClassVar[set[str]] = {"workspace", "script", "args", "device", "seed"}

    def __init__(self, args: GradcheckArgs, workspace: Path, script: Path, base: CaptureConfig, tmp: Path,
                 scheme: Literal["consume", "backward"]) -> None:
        self.args, self.workspace, self.script, self.base, self.tmp = args, workspace, script, base, tmp
        self.scheme = scheme
        self.counter = 0
        self._counter_lock = threading.Lock()
        self.jobs = _jobs(args.jobs)
        self.forkable = args.device == "cpu" or not _cuda_possible()
        self.hubs: dict[int, FdHub] = {}  # iteration -> its hub
        self.hub_unusable = not self.forkable or os.environ.get(HUB_ENV) == "0"
        self.from_hub: dict[int, int] = {}  # iteration -> evaluations a hub served

    def _config(self, iteration: int, pert: dict[str, np.ndarray]) -> tuple[FdConfig, Path]:
        with self._counter_lock:  # the two iterations' checks may ask at once (`_EarlyFirst`)
            k = self.counter = self.counter + 1
        items: list[Perturbation] = []
        for role, delta in pert.items():
            path = self.tmp / f"delta_{k}_{len(items)}.npy"
            np.save(path, delta)
            items.append(Perturbation(role=role, delta=str(path)))
        outdir = self.tmp / f"eval_{k}"
        outdir.mkdir()
        cfg = FdConfig(**self.base.model_dump(include=self.INHERITED), outdir=str(outdir),
                       timeout_s=self.args.timeout_s, result=str(outdir / "result.json"),
                       stderr=str(outdir / "stderr.txt"),
                       capture=FdOptions(iteration=iteration, scheme=self.scheme, objective=self.args.objective,
                                         params=self.args.params, perturb=items))
        return cfg, outdir

    def _result(self, iteration: int, o: HarnessOutcome[FdResult]) -> fd.Evaluation:
        data = o.result
        d = data.capture if data is not None else None
        internal = data.listener_failure("capture", d) if data is not None else None
        if internal:
            return fd.Evaluation(None, error=f"warpgrad's capture failed inside a perturbed run (an internal error, "
                                             f"not your script): {internal.splitlines()[0]}")
        reached = d is not None and d.reached
        if data is None or (data.error and not reached):
            r = describe_run(o.process, data, self.workspace, self.script, self.args.args)
            return fd.Evaluation(None, error=f"a perturbed run failed before iteration {iteration}'s update: "
                                             f"{r.error.message if r.error else o.error}")
        if d is None or not d.reached:
            return fd.Evaluation(None, error=f"a perturbed run ended ({d.stopped_at if d else None}) without reaching "
                                             f"iteration {iteration}'s update: the script's control flow depends "
                                             "on the parameters or on run-to-run state")
        if d.unapplied:
            return fd.Evaluation(None, error=f"parameters not reached in the perturbed run: {d.unapplied}")
        applied = {role: np.load(path) for role, path in d.applied.items()}
        return fd.Evaluation(d.objective, applied=applied)

    def _one(self, iteration: int, pert: dict[str, np.ndarray]) -> fd.Evaluation:
        cfg, _ = self._config(iteration, pert)
        out = run_harness(cfg, FdResult, cwd=self.workspace, timeout_s=self.args.timeout_s, device=self.args.device)
        return self._result(iteration, out)

    def _forked(self, iteration: int, cfg: FdConfig, entry: BatchEntry, parent: ProcessResult) -> fd.Evaluation:
        """The evaluation of a session forked from a batch or a hub (`parent` is that process's own ending)."""
        data, err_tail = read_forked_session(Path(cfg.result or ""), Path(cfg.stderr or ""), FdResult)
        # A session killed or timed out has no exit code of its own: the parent process's stands in.
        proc = ProcessResult(argv=parent.argv,
                             returncode=entry.returncode if entry.returncode is not None else parent.returncode,
                             signal=entry.signal, timed_out=entry.timed_out, wall_s=entry.wall_s,
                             stderr_tail=err_tail if err_tail is not None else parent.stderr_tail,
                             memory_limit_mb=parent.memory_limit_mb)
        return self._result(iteration, HarnessOutcome(process=proc, result=data))

    def _chunk(self, iteration: int, perts: list[dict[str, np.ndarray]]) -> list[fd.Evaluation]:
        """Evaluations forked from one booted harness (Warp imported once), each run from the script's start."""
        subs = [self._config(iteration, p) for p in perts]
        o = run_harness(BatchConfig(batch=[c for c, _ in subs]), HarnessResult, cwd=self.workspace,
                        timeout_s=self.args.timeout_s * len(subs) + 30, device=self.args.device)
        info = (o.result.batch if o.result is not None else None) or []
        return [self._forked(iteration, cfg, info[i] if i < len(info) else BatchEntry(), o.process)
                for i, (cfg, _) in enumerate(subs)]

    def evaluate(self, iteration: int, batch: list[dict[str, np.ndarray]]) -> list[fd.Evaluation]:
        if not self.forkable:
            with ThreadPoolExecutor(self.jobs) as pool:
                return list(pool.map(lambda p: self._one(iteration, p), batch))
        served = self._served(iteration, batch)
        if served is not None:
            return served
        jobs = self.jobs
        parts = [batch[i::jobs] for i in range(jobs) if batch[i::jobs]]
        with ThreadPoolExecutor(len(parts)) as pool:
            done = list(pool.map(lambda part: self._chunk(iteration, part), parts))
        ordered: list[fd.Evaluation | None] = [None] * len(batch)
        for i, part in enumerate(done):
            for j, ev in enumerate(part):
                ordered[i + j * jobs] = ev
        return ordered  # type: ignore[return-value]

    def prestart(self, cap: CapturedIteration) -> None:
        """Start the hub of a captured iteration now, so that its run to the fork point overlaps other work."""
        if cap.iteration is not None:
            self._hub_for(cap.iteration, {p.role for p in cap.params if p.role})

    def _hub_for(self, iteration: int, roles: set[str]) -> FdHub | None:
        """The hub of `iteration` (started on first use), or None when the evaluations cannot fork from one: the
        hubs are unusable, or they perturb a role the hub was not told of."""
        if self.hub_unusable or not roles:
            return None
        hub = self.hubs.get(iteration)
        if hub is not None:
            return hub if roles <= hub.roles else None
        # The hub's own limit covers its start, its wait for the parent (another iteration's check may come
        # first) and the evaluations it serves; past it the hub is killed and the evaluations still to come run
        # from the start, each under its own limit.
        budget = self.args.timeout_s * 4 + 60
        cfg = FdConfig(**self.base.model_dump(include=self.INHERITED), outdir=str(self.tmp),
                       capture=FdOptions(iteration=iteration, scheme=self.scheme, objective=self.args.objective,
                                         params=self.args.params,
                                         serve=ServeOptions(socket=str(self.tmp / f"hub{iteration}.sock"),
                                                            roles=sorted(roles), jobs=self.jobs, idle_s=budget)))
        hub = self.hubs[iteration] = FdHub(cfg, cwd=self.workspace, timeout_s=budget, device=self.args.device)
        hub.start()
        return hub

    def _served(self, iteration: int, batch: list[dict[str, np.ndarray]]) -> list[fd.Evaluation] | None:
        """The batch's evaluations forked from the iteration's hub; None when they must run from the start."""
        hub = self._hub_for(iteration, {role for pert in batch for role in pert})
        if hub is None:
            return None
        subs = [self._config(iteration, p)[0] for p in batch]
        entries = hub.run([ServeEvaluation(perturb=c.capture.perturb, outdir=c.outdir or "", result=c.result or "",
                                           stderr=c.stderr or "", timeout_s=c.timeout_s) for c in subs])
        if entries is not None:
            self.from_hub[iteration] = self.from_hub.get(iteration, 0) + len(entries)
            proc = ProcessResult(argv=["warpgrad FD hub"], returncode=None)
            return [self._forked(iteration, c, e, proc) for c, e in zip(subs, entries)]
        outcome = hub.close()
        self.hub_unusable = True
        if hub.ended_early and outcome is not None and outcome.process.timed_out:
            # The script's start outlived the time limit: each evaluation from the start would too.
            return [self._result(iteration, outcome)] * len(batch)
        return None  # run from the start: a failure of the start reproduces there with its own messages

    def close(self) -> None:
        """End every hub."""
        hubs, self.hubs = list(self.hubs.values()), {}
        for hub in hubs:
            hub.close()


@dataclass
class CaptureRider:
    """What diagnose adds to the check: harness listeners that observe the capture run too (the tape inspection;
    their settings go into the capture run's config, never into the FD evaluations'; `outcome` is the last
    capture run's), and `first_verdict`, told the later iteration's verdict before the first iteration is
    checked (work that verdict decides can start alongside)."""

    listeners: list[str]
    tape_inspect: TapeInspectOptions | None = None
    localize: LocalizeOptions | None = None
    outcome: HarnessOutcome[CaptureResult] | None = None
    first_verdict: Callable[[GradcheckResult], None] | None = None

    def apply(self, cfg: CaptureConfig) -> CaptureConfig:
        return cfg.model_copy(update={"listeners": [*cfg.listeners, *self.listeners],
                                      "tape_inspect": self.tape_inspect, "localize": self.localize})


def _capture(args: GradcheckArgs, workspace: Path, script: Path, base: CaptureConfig, res: GradcheckResult,
             rider: CaptureRider | None = None) -> tuple[RunScriptResult, CaptureResult | None, CaptureReport]:
    """The capture run (with the fallback to iteration 0 when a later iteration's forward is already
    non-finite). Returns (run, result, capture section; empty when the run wrote none)."""
    iteration = args.iteration
    for attempt in range(2):
        cap_cfg = base.model_copy(update={"capture": CaptureOptions(iteration=iteration, params=args.params,
                                                                    objective=args.objective)})
        if rider is not None:
            cap_cfg = rider.apply(cap_cfg)
        out = run_harness(cap_cfg, CaptureResult, cwd=workspace, timeout_s=args.timeout_s, device=args.device)
        if rider is not None:
            rider.outcome = out
        run = describe_run(out.process, out.result, workspace, script, args.args)
        data = out.result
        cap = (data.capture if data is not None else None) or CaptureReport()
        obj = cap.objective
        if (attempt == 0 and args.iteration is None and cap.iteration and run.error is None
                and obj is not None and not np.isfinite(obj)):
            # A NaN gradient at iteration 0 poisons the parameters, so iteration 1's forward is already
            # non-finite: check the first iteration, where the bad gradient was born.
            res.notes.append(f"the objective is {obj} at iteration {cap.iteration}; checked iteration 0 instead")
            iteration = 0
            continue
        return run, data, cap
    return run, data, cap


def _refusal(args: GradcheckArgs, cap: CaptureReport, res: GradcheckResult) -> str | None:
    """Why capture cannot say what was differentiated (None when it can). Each reason names the assumption
    that failed; a refusal is never a pass."""
    if not cap.iterations_seen:
        return ("the script never called tape.backward(): there is no gradient to check. If the gradient is "
                "computed elsewhere, write a probe file (params/loss/grad) and pass --probe")
    params = cap.params
    if cap.scheme == "backward" and not args.params and len(params) != 1:
        names = ", ".join(cap.leaf_candidates) or "none found"
        return ("no parameter update was seen after backward (no warp.optim step, no launch or host code reading a "
                f".grad), so the parameters are ambiguous. Candidate leaf arrays: {names}. Name them with --param "
                "NAME, or write a probe file")
    if not params:
        return (f"iteration {cap.iteration} consumed no gradient of a parameter that --param names"
                if args.params else "no parameter gradient was consumed at the captured iteration")
    graph = cap.graph_events
    if graph:
        # A replay the harness follows (graph_replay) leaves no event here; these are the ones it cannot.
        return (f"the script replays a captured graph that capture cannot follow ({'; '.join(graph)}): the objective "
                "and the consumed gradient are not observable in order. Run the script with graph capture off "
                "(many examples have an option), or write a probe file (params/loss/grad)")
    if args.objective:
        return None
    boundary = cap.boundary_seeds
    if boundary:
        # An adjoint handed from one backward pass to another (hand-written checkpointing) is not an
        # objective: the seeded dot product of one segment is not what the script optimizes.
        return (f"the script seeds backward by hand with adjoints that are not a scalar loss's ({', '.join(boundary)}): "
                "a hand-written multi-tape backward such as gradient checkpointing. Capture does not follow it and "
                "gives no verdict: check the forward's own loss against the gradient the update consumes with a "
                "probe file (params/loss/grad; see references/verification.md). Naming the loss with --objective does "
                "not make capture follow it: the forward of a checkpointed backward runs untaped, so the "
                "parameter's first taped use is in a segment re-taped after the loss's backward, where a "
                "perturbation no longer reaches the loss")
    if cap.unseeded_backward:
        return ("a tape.backward() ran with no loss, no grads= and no nonzero seed gradient on an array the tape "
                "writes, so capture cannot tell what it differentiates; write a probe file (params/loss/grad)")
    return None


def check_capture(args: GradcheckArgs, workspace: Path, script: Path,
                  rider: CaptureRider | None = None) -> GradcheckResult:
    import time

    t0 = time.monotonic()
    rel = rel_path(workspace, script)
    res = GradcheckResult(ok=False, mode="capture", script=rel)
    tmp = Path(tempfile.mkdtemp(prefix="warpgrad-fd-"))
    ev: _Evaluator | None = None
    early: _EarlyFirst | None = None
    try:
        base = CaptureConfig(workspace=str(workspace), script=str(script), args=list(args.args), device=args.device,
                             seed=args.seed, outdir=str(tmp))
        progress.say(f"capture run: {rel} with hooks on Warp, to the checked iteration")
        run, data, cap = _capture(args, workspace, script, base, res, rider)
        res.device, res.warp_version, res.files = _run_facts(data)
        if run.error is not None:
            return _fail(res, f"the script does not run: {run.error.message}", run.error)
        internal = data.listener_failure("capture", cap) if data is not None else cap.listener_error
        if internal:
            return _fail(res, "warpgrad's capture failed (an internal error in warpgrad, not in your script): "
                              f"{internal}")
        res.notes += cap.notes
        res.iteration, res.backward_calls = cap.iteration, cap.backward_calls
        refusal = _refusal(args, cap, res)
        if refusal:
            return _fail(res, refusal)
        ev = _Evaluator(args, workspace, script, base, tmp, cap.scheme)
        # The runs to both checked iterations' fork points start together: the first iteration's (checked second)
        # then waits at its fork point instead of starting after the later iteration's check.
        ev.prestart(cap)
        if args.iteration is None:
            for other in cap.other_iterations:
                if other.iteration == 0:
                    ev.prestart(other)
        factor, unreported = _printed_relation(args, run, cap, res)
        others = [o for o in cap.other_iterations if o.iteration == 0] if args.iteration is None else []

        def first_result() -> GradcheckResult:
            return GradcheckResult(ok=False, mode="capture", script=rel, device=res.device,
                                   warp_version=res.warp_version, files=res.files,
                                   printed_vs_seeded=res.printed_vs_seeded)

        early = _EarlyFirst(lambda after: _check_iteration(args, first_result(), others[0], ev, factor, t0,
                                                           baseline=False, after=after)[0]) if others else None
        primary, trunc_rel = _check_iteration(args, res, cap, ev, factor, t0, baseline=True,
                                              on_step=early.start if early is not None else None)
        if rider is not None and rider.first_verdict is not None:
            # As the caller will see it: a pass withheld for an unreported objective is no pass.
            rider.first_verdict(_withhold_unreported(primary.model_copy()) if unreported else primary)
        primary.per_iteration = [_iteration_summary(primary)]
        if not others or not primary.ok or primary.nondeterministic:
            if early is not None:
                early.discard()
            return _withhold_unreported(primary) if unreported else primary
        # The first iteration too (bugs hide at either end). Within the same budget when the later one gave a
        # verdict: two directions at the step its sweep chose. Otherwise a sweep of its own (a bad first step
        # can leave the later iteration unjudgeable while the first shows the bug plainly).
        after = (primary.eps, trunc_rel) if primary.passed is not None and primary.eps is not None \
            and trunc_rel is not None else None
        first = early.result(after) if early is not None else None
        if first is None:
            first, _ = _check_iteration(args, first_result(), others[0], ev, factor, t0, baseline=after is None,
                                        after=after)
        combined = _combine(primary, first)
        return _withhold_unreported(combined) if unreported else combined
    finally:
        if early is not None:
            early.discard()  # on an error of the later iteration's check: before its hubs and files go
        if ev is not None:
            ev.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _printed_relation(args: GradcheckArgs, run: RunScriptResult, cap: CaptureReport,
                      res: GradcheckResult) -> tuple[float | None, bool]:
    """How the loss the script prints relates to the seeded one, with the notes that say so on `res`: the factor
    the check applies to the reported objective (None: difference the seeded loss), and whether the reported loss
    is another quantity, which withholds `correct` (`_withhold_unreported`)."""
    factor, printed = _reported_factor(run.stdout_tail, cap.seeded_trajectory, args.objective)
    res.printed_vs_seeded = printed
    seeds = cap.objective_seeds
    if factor is not None and not all(_hand_seed(sd) for sd in seeds):
        # A loss passed to backward (`loss=`) is the objective the user built; printing a multiple of it is
        # cosmetic. A hand seed is different: it is the user's claim of d(objective)/d(seeded array), and the
        # objective is what the script reports, so a seed of 1 on a sum reported as its mean is checked as a
        # factor (the update applies N times the reported objective's gradient).
        res.notes.append(f"the script prints {factor:.6g}× the loss it passes to backward; the check "
                         "differences the loss passed to backward")
        factor = None
    if printed == "different" and cap.seeded_loss_read:
        # The script reads the seeded loss array itself: the numbers may be that loss printed at another
        # cadence (every k iterations, per frame), so "not the seeded loss" would not be a measured fact.
        res.notes.append("the printed numbers do not line up with the seeded losses iteration by iteration, and "
                         "the script reads the seeded loss array back after backward; the check differenced the "
                         "seeded loss")
    elif printed == "different":
        res.notes.append("the loss the script prints is not the loss seeded into backward; the check differenced "
                         "the seeded one. If the printed quantity is the real objective, rerun with --objective "
                         "VARIABLE")
    # A loss the script reports under a loss's name that is neither the seeded loss nor a multiple of it, and
    # the script never reads the seeded loss: the reported objective is another quantity (a converged solve
    # beside a truncated taped one, a validation loss), so agreement with FD of the seeded loss cannot say the
    # gradient of the reported objective is right.
    unreported = printed == "different" and not cap.seeded_loss_read and not args.objective and \
        bool(parse_losses(strip_warp_chatter(run.stdout_tail)))
    return factor, unreported


def _withhold_unreported(res: GradcheckResult) -> GradcheckResult:
    """No `correct` when the loss the script reports is another quantity than the loss seeded into backward:
    the check measured the seeded loss's gradient, not the reported objective's. A failure stands (the seeded
    loss's gradient is wrong whatever is reported)."""
    if res.passed is not True:
        return res
    res.passed, res.signature = None, Signature.INCONCLUSIVE
    res.reason = res.explanation = (
        "the gradient matches FD of the loss seeded into backward, but the loss the script prints is a different "
        "quantity (not the seeded loss, nor a multiple of it, at any aligned iteration), and the script never reads "
        "the seeded loss: the gradient the update applies may not be the reported objective's (a truncated or "
        "approximate taped computation beside the one reported). Rerun with --objective VARIABLE naming the "
        "reported loss, or make backward seed the loss the script reports")
    res.next_steps = [f"warpgrad gradcheck {res.script} --objective VARIABLE (the variable that holds the reported "
                      "loss where the update runs)"]
    return res


class _EarlyFirst:
    """The first iteration's check at the step the later iteration's sweep chose, started as soon as that sweep
    has chosen it (`start`, on the sweep's thread), alongside the rest of the later iteration's check. Each
    iteration has its own FD hub, so the two run side by side instead of one after the other; the result is
    the same as the check made afterwards (the same step, truncation, directions and seed). It is used only
    when the later iteration's verdict asks for exactly that check (`result(after)`); otherwise (no verdict
    there: the first iteration gets a sweep of its own) it is waited for and dropped."""

    def __init__(self, check: Callable[[tuple[float, float]], GradcheckResult]) -> None:
        self.check = check
        self.after: tuple[float, float] | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.future: Any = None

    def start(self, step: float, trunc_rel: float) -> None:
        if self.future is None:
            self.after = (step, trunc_rel)
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="warpgrad-fd-first")
            self.future = self.pool.submit(self.check, self.after)

    def result(self, after: tuple[float, float] | None) -> GradcheckResult | None:
        """The early check when it is the one `after` asks for; None (and the early one dropped) otherwise."""
        if self.future is None:
            return None
        if after is None or after != self.after:
            self.discard()
            return None
        try:
            return self.future.result()
        finally:
            self.discard()

    def discard(self) -> None:
        """Wait for the early check to end (its evaluations go through the hubs this check closes) and drop it."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        self.future = None


def _run_facts(data: HarnessResult | None) -> tuple[str, str, dict[str, str]]:
    """(device, Warp version, files) of a run, for the evidence; empty when the harness never said."""
    if data is None:
        return "", "", {}
    return data.device or "", data.warp_version or "", dict(data.files)


def _uncheckable(params: list[CapturedParam]) -> str | None:
    """Why FD of this iteration has nothing definite to compare with, or None."""
    if not params:
        return ("none of the parameters is read by a launch recorded on the tape: the loss does not depend on them "
                "through the tape (gradient chain cut before the first kernel?)")
    untied = [p.name for p in params if p.untied]
    if untied:
        return (f"the gradient the update of {', '.join(untied)} applies is not known: several host reads of its "
                ".grad feed the update and the parameter change follows none of them (nor their sum), so FD of the "
                "update's objective has nothing definite to compare with. Name the gradient with a probe file "
                "(params/loss/grad), or make the update a plain step")
    return None


def _describe_check(res: GradcheckResult, args: GradcheckArgs, scheme: str, params: list[CapturedParam],
                    fparams: list[fd.Param]) -> None:
    """The check's harness spec (what makes two checks the same check) and its parameters, on `res`."""
    spec = {"mode": "capture", "script": res.script, "args": list(args.args), "iteration": args.iteration,
            "scheme": scheme, "params": sorted(p.name for p in params), "objective": args.objective,
            "eps_policy": EPS_POLICY, "directions": args.directions, "seed": args.seed}
    res.harness, res.harness_id = spec, _harness_id(spec)
    res.params = [ParamCheck(name=p.name, role=p.role, how=p.how, shape=p.shape,
                             size=int(np.prod(p.numpy_shape)) if p.numpy_shape else 1,
                             ad_norm=float(np.linalg.norm(fp.grad)),
                             nonfinite=int(np.count_nonzero(~np.isfinite(fp.grad))))
                  for p, fp in zip(params, fparams)]


def _objective_unusable(args: GradcheckArgs, res: GradcheckResult, objective: float | None) -> GradcheckResult:
    """The result when the iteration's objective is missing or non-finite: nothing to difference."""
    if objective is not None and res.iteration == 0:
        # Non-finite before any update: the forward itself produces it, whatever the gradient does.
        res.ok, res.passed, res.signature, res.forward_nonfinite = True, None, Signature.NAN_INF, True
        res.explanation = res.reason = (
            f"the objective is already {objective} at the initial parameters (iteration 0, before any "
            "update): the NaN/inf comes from the forward pass (an overflow, a log/sqrt of a negative, a "
            "division by zero), not from the gradient; fix the forward, then check the gradient")
        return res
    if objective is None:
        # Not read at all (a named variable no frame held at the update): nothing says the forward is non-finite.
        what = f"--objective {args.objective!r} was not found in the script's frames at the update" \
            if args.objective else "no objective was recorded"
        return _fail(res, f"{what} (iteration {res.iteration}), so there is nothing to difference; name a "
                            "variable that holds the loss where the update runs, or write a probe file "
                            "(params/loss/grad)")
    return _fail(res, f"the objective at iteration {res.iteration} is {objective}: a non-finite forward is the "
                      "finding (fix the forward first); FD of it means nothing")


def _check_iteration(args: GradcheckArgs, res: GradcheckResult, cap: CapturedIteration, ev: _Evaluator,
                     factor: float | None, t0: float, *, baseline: bool,
                     after: tuple[float, float] | None = None,
                     on_step: Callable[[float, float], None] | None = None) -> tuple[GradcheckResult, float | None]:
    """FD check of one captured iteration: a full sweep (`after` None), or two directions at the (step,
    relative truncation error) a sweep chose at another iteration. Returns the result and its truncation.
    `on_step`: told the (step, truncation) the sweep chose, as soon as it has (`fd.FDEngine.on_step`)."""
    res.iteration, res.backward_calls = cap.iteration, cap.backward_calls
    res.iterations = [res.iteration] if res.iteration is not None else []
    roles = _perturbed_params(res, cap)
    params = [p for _, p in roles]
    why_not = _uncheckable(params)
    if why_not is not None:
        return _failed(res, why_not)
    _name_objective(args, res, cap, factor, params)
    objective = cap.objective
    if objective is None or not np.isfinite(objective):
        return _objective_unusable(args, res, objective), None
    fparams = [fd.Param(key=role, name=p.name, value=np.load(p.value_file), grad=np.load(p.grad_file))
               for role, p in roles]
    _describe_check(res, args, ev.scheme, params, fparams)
    iteration = res.iteration
    if iteration is None:  # capture names every iteration it records
        return _failed(res, "capture did not say which iteration it recorded (an internal error in warpgrad)")
    scale = factor if factor is not None else 1.0
    base: dict[str, fd.Evaluation] = {}
    # Progress on a terminal: the sweep (two per step) and the other directions (two each), or two per direction.
    planned, done = (2 * len(fd.STEPS) + 2 * (args.directions - 1) + baseline) if after is None else 6, [0]

    def evaluate(batch):
        n = len(batch) + (baseline and "eval" not in base)
        progress.fd_evaluations(iteration, done[0], planned, running=n)
        # The baseline rerun runs alongside the first sweep: it must reproduce the captured objective.
        if baseline and "eval" not in base:
            evs = ev.evaluate(iteration, [{}, *batch])
            base["eval"] = evs[0]
            evs = evs[1:]
        else:
            evs = ev.evaluate(iteration, batch)
        # Reported when a batch ends too: batched follow-ups can leave one batch per check, whose count would
        # otherwise never move past 0 on the terminal.
        done[0] += n
        progress.fd_evaluations(iteration, done[0], planned)
        # FD of the objective the script reports (scale × the seeded one): a factor then comes from AD/FD.
        return [fd.Evaluation(e.objective * scale if e.objective is not None else None, e.applied, e.error)
                for e in evs]

    cached = _Cached(evaluate)
    if after is None:
        engine = fd.FDEngine(fparams, cached, objective * scale, n_directions=args.directions, seed=args.seed,
                             on_step=on_step)
        report = engine.check(elements=args.elements)
    else:
        # At least three directions: the finish gate needs resolved agreement in three at the first iteration
        # too; more when asked (finish asks more to resolve a direction FD left open).
        engine = fd.FDEngine(fparams, cached, objective * scale, n_directions=max(3, args.directions),
                             seed=args.seed + 1)
        report = engine.check_at(*after)
    res.tape_gradient_passed = _tape_gradient(res, roles, fparams, cached, objective * scale, engine, after)
    # Evaluations really run (the tape's own judgement reuses the first's), + capture and baseline on a sweep.
    res.evaluations = cached.ran + (2 if after is None else 0)
    res.evaluations_from_hub = ev.from_hub.get(iteration, 0)
    b = base.get("eval")
    override = _judge_rerun(res, b, objective)
    if override is not None:
        return _finish(res, report, fparams, cap, override=override, t0=t0), None
    if b is not None and b.error is not None:
        return _failed(res, f"the unperturbed rerun failed: {b.error}")
    res.reported_factor = factor
    if factor is not None:
        res.notes.append(f"the loss the script prints is {factor:.6g}× the loss seeded into backward; FD is of the "
                         "printed one")
    return _truncation_measured(_finish(res, report, fparams, cap, t0=t0), params), report.trunc_rel


def _truncation_measured(res: GradcheckResult, params: list[CapturedParam]) -> GradcheckResult:
    """Several backward passes feed the update, and the gradient they left in .grad together matches FD: the
    tapes cover the objective (no truncation, measured), and what is wrong is what the update makes of them."""
    if res.signature != Signature.TRUNCATION or res.tape_gradient_passed is not True:
        return res
    how = "; ".join(f"{p.name}: {p.crosscheck}" for p in params if p.crosscheck and p.tape_grad_file)
    res.signature = Signature.SUBTLY_WRONG
    res.explanation = (f"the {res.backward_calls} backward passes' own gradient (the .grad after the last one) matches "
                       "FD, so the tapes cover the objective and truncation is ruled out by measurement; the update "
                       f"applies another gradient ({how or 'not the one the tapes left'})")
    return res


class _Cached:
    """`evaluate`, remembering each perturbation's result: a second judgement over the same directions (the
    tape's own gradient beside the one the update applies) costs only the evaluations the first did not run
    (`ran` counts the evaluations really run)."""

    def __init__(self, evaluate: Callable[[list[dict[str, np.ndarray]]], list[fd.Evaluation]]) -> None:
        self.evaluate = evaluate
        self.memo: dict[tuple, fd.Evaluation] = {}
        self.ran = 0

    @staticmethod
    def _key(pert: dict[str, np.ndarray]) -> tuple:
        return tuple(sorted((k, v.shape, v.tobytes()) for k, v in pert.items()))

    def __call__(self, batch: list[dict[str, np.ndarray]]) -> list[fd.Evaluation]:
        keys = [self._key(p) for p in batch]
        todo = {k: p for k, p in zip(keys, batch) if k not in self.memo}
        if todo:
            self.ran += len(todo)
            self.memo.update(zip(todo, self.evaluate(list(todo.values()))))
        return [self.memo[k] for k in keys]


def _tape_gradient(res: GradcheckResult, roles: list[tuple[str, CapturedParam]], fparams: list[fd.Param],
                   evaluate, objective: float, engine: fd.FDEngine,
                   after: tuple[float, float] | None) -> bool | None:
    """Where the update applies a stale gradient, judge the tape's own gradient against the same FD directions
    (already evaluated, so nearly free): "the tape is right, the update applies it late" is a different fix
    from "the tape is wrong". None where there is no other gradient to judge, or FD cannot say."""
    tape = {role: p.tape_grad_file for role, p in roles if p.tape_grad_file}
    if not tape:
        return None
    params = [fd.Param(key=fp.key, name=fp.name, value=fp.value,
                       grad=np.load(tape[fp.key]).reshape(fp.grad.shape) if fp.key in tape else fp.grad)
              for fp in fparams]
    judge = fd.FDEngine(params, evaluate, objective, n_directions=engine.n_directions, seed=engine.seed)
    report = judge.check(locate=False) if after is None else judge.check_at(*after)
    sig, _, _ = fd.classify(report, grads=[p.grad for p in params], backward_calls=1, stale={})
    verdict = True if sig == Signature.CORRECT else (None if sig == Signature.INCONCLUSIVE or
                                                      report.verdict in ("inconclusive", "sparse") else False)
    stale = any(p.stale_read for _, p in roles)
    applied = "applies it late (a stale gradient)" if stale else "applies another one (see the cross-check)"
    said = {True: f"matches FD: the gradient is right, and the update {applied}",
            False: f"does not match FD either ({sig}): the tape's gradient is wrong too",
            None: "could not be judged by FD"}[verdict]
    res.notes.append(f"the gradient this iteration's backward passes left in .grad {said}")
    return verdict


def _judge_rerun(res: GradcheckResult, b: fd.Evaluation | None, objective: float) -> tuple[Signature, str] | None:
    """Compare the unperturbed rerun with the captured objective: the verdict that overrides FD's when the
    forward is not deterministic (None otherwise; a difference within float noise becomes a note)."""
    res.rerun_mismatch = b is not None and (b.error is not None or (b.objective is not None
                                                               and b.objective != objective))
    if b is None or b.error is not None or b.objective is None or b.objective == objective:
        return None
    rel_diff = abs(b.objective - objective) / max(abs(objective), 1e-30)
    if rel_diff <= 1e-6:
        res.notes.append(f"an unperturbed rerun differs from the first run by {rel_diff:.1e} (relative)")
        return None
    res.nondeterministic = True
    return Signature.INCONCLUSIVE, (
        f"the forward is not deterministic: an unperturbed rerun gave {b.objective!r} where the first run gave "
        f"{objective!r} (relative difference {rel_diff:.2e}). FD of a noisy objective is meaningless until the "
        "noise is pinned (seed every RNG, including wp.rand_init seeds and np.random.default_rng(), or average a "
        "fixed set of samples)")


def _perturbed_params(res: GradcheckResult, cap: CapturedIteration) -> list[tuple[str, CapturedParam]]:
    """(role, parameter) for each parameter a taped launch reads; notes on the others, on cross-checks and on
    stale gradient reads."""
    missing_role = [p.name for p in cap.params if not p.role]
    if missing_role:
        res.notes.append("not used by any taped launch in the iteration, so not perturbed (AD sees no path from "
                         f"them either): {', '.join(missing_role)}")
    roles = [(p.role, p) for p in cap.params if p.role]
    for _, p in roles:
        if p.crosscheck:
            res.notes.append(f"{p.name}: {p.crosscheck}")
    stale_reads = [p.name for _, p in roles if p.stale_read]
    res.stale_read = bool(stale_reads)
    if stale_reads:
        res.notes.append(f"the update of {', '.join(stale_reads)} applies a stale gradient (read before this "
                         "iteration's backward, or kept from an earlier iteration; quick-check WG015): the check "
                         "compares that stale gradient with FD at the current parameters")
    return roles


def _name_objective(args: GradcheckArgs, res: GradcheckResult, cap: CapturedIteration, factor: float | None,
                    params: list[CapturedParam]) -> None:
    """Say in words which objective FD differentiates and which gradient it is compared with."""
    seeds = ", ".join(cap.objective_seeds)
    if args.objective:
        res.objective = f"variable {args.objective!r} at the update of iteration {res.iteration}"
        res.objective_kind = "partial"
    elif factor is not None:
        res.objective = (f"the loss the script reports in iteration {res.iteration}: {factor:.6g} × the seeded "
                         f"objective ({seeds})")
    else:
        res.objective = f"sum of the losses seeded into backward in iteration {res.iteration} ({seeds})"
    if not args.objective and res.printed_vs_seeded == "different" and any(
            "uniform seed" in sd for sd in cap.objective_seeds):
        res.objective_kind = "partial"  # an implied sum over per-element terms the script does not report
    res.gradient = "; ".join(f"{p.name}: {p.how}" for p in params)
    res.objective_value = cap.objective


def _failed(res: GradcheckResult, reason: str) -> tuple[GradcheckResult, None]:
    return _fail(res, reason), None


def _combine(later: GradcheckResult, first: GradcheckResult) -> GradcheckResult:
    """One verdict from the checks of a later and the first iteration: a definite failure at either is a
    failure (led by the failing one); `correct` only when both pass; otherwise no verdict, saying why."""
    # The first failing iteration leads: there the parameters are as the user set them, before a bad step
    # could wreck them (a later iteration may be far from anything FD can judge cleanly). When both fail and
    # only one shows a pattern (`subtly_wrong` is the no-pattern class), the pattern leads.
    if first.passed is False and later.passed is False and first.signature == Signature.SUBTLY_WRONG != later.signature:
        lead, other = later, first
    elif first.passed is False or (first.passed is None and later.passed is True):
        lead, other = first, later
    else:
        lead, other = later, first
    summaries = [_iteration_summary(first), _iteration_summary(later)]
    lead.iterations = sorted({*later.iterations, *first.iterations})
    lead.evaluations = later.evaluations + first.evaluations
    lead.evaluations_from_hub = later.evaluations_from_hub + first.evaluations_from_hub
    lead.harness, lead.harness_id = later.harness, later.harness_id
    verdict = {True: "passed", False: "failed", None: "no verdict"}
    # What the other iteration measured travels with its verdict: a reason for no verdict, the pattern of a
    # failure (which entries or lanes), since the lead may have checked too little to show it.
    said = other.reason if other.passed is None else (other.explanation if other.elements else "")
    lead.notes.append(f"iteration {other.iteration} {verdict[other.passed]} ({other.signature}"
                      f"{': ' + said if said else ''})")
    lead.rerun_mismatch = lead.rerun_mismatch or other.rerun_mismatch
    if lead.passed is None and not lead.next_steps:
        lead.next_steps = list(other.next_steps)
    for n in other.notes:
        if n not in lead.notes:
            lead.notes.append(n)
    if lead.passed is None and other.passed is True:
        lead.passed, lead.signature = None, Signature.INCONCLUSIVE
        lead.reason = (f"iteration {other.iteration} matches FD, but iteration {lead.iteration} gave no verdict "
                       f"({lead.reason or lead.signature}); a pass needs both")
        lead.explanation = lead.reason
    lead.wall_s = max(later.wall_s, first.wall_s)
    lead.per_iteration = summaries
    return lead


def _iteration_summary(res: GradcheckResult) -> IterationCheck:
    """What the finish gate needs of one checked iteration: its verdict, objective and agreeing directions."""
    return IterationCheck(iteration=res.iteration if res.iteration is not None else 0, passed=res.passed,
                          objective_value=res.objective_value,
                          agreeing_directions=sum(1 for d in res.directions if d.agree and d.scope == "all"))


def _nice(c: float) -> bool:
    """An integer or the reciprocal of one (2, 8, 1/64): the factor a sum/mean or duplicate mix-up leaves."""
    for x in (c, 1.0 / c):
        n = round(x)
        if n >= 2 and abs(x - n) <= 1e-3 * n:
            return True
    return False


def _hand_seed(seed: str) -> bool:
    """A seed the user wrote by hand, uniform over terms or on a scalar (not a loss passed as `loss=`, not an
    adjoint handed over from another backward pass)."""
    return ("uniform seed" in seed or "scalar seed" in seed) and "boundary seed" not in seed


def _reported_factor(stdout: str, seeded: list[float], objective_name: str | None) -> tuple[float | None, PrintedRelation]:
    """How the loss the script prints relates to the loss seeded into backward, at aligned iterations: the same
    value, c × it (c an integer or 1/integer: a sum/mean mix-up; returned as the factor), a different quantity,
    or nothing printed. Two aligned iterations at least: one coincidence is not a relation."""
    if objective_name or not seeded:
        return None, "not_printed"
    printed = [p.value for p in parse_progress(strip_warp_chatter(stdout))]
    if not printed:
        return None, "not_printed"
    # Scripts print either before their update (the loss of this iteration) or after it (the next one's).
    for offset in (0, 1):
        pairs = [(pv, sv) for pv, sv in zip(printed, seeded[offset:]) if sv != 0 and np.isfinite(pv) and np.isfinite(sv)]
        if len(pairs) < 2:
            continue
        ratios = [pv / sv for pv, sv in pairs]
        c = float(np.mean(ratios))
        # Printed values are rounded (often to 4-6 digits): only a clearly different constant counts.
        if all(abs(r - c) <= 1e-3 * abs(c) for r in ratios):
            if abs(c - 1.0) <= 1e-3:
                return None, "same"
            if c > 0 and _nice(c):
                return c, "factor"
    return None, "different"


def _finish(res: GradcheckResult, report: fd.FDReport, fparams: list[fd.Param], cap: CapturedIteration, *,
            override: tuple[Signature, str] | None = None, t0: float) -> GradcheckResult:
    import time

    grads = [p.grad for p in fparams]
    res.ok = True
    res.sweep, res.directions, res.elements = report.sweep, report.directions, report.elements
    res.fd_unresolvable, res.perturbation_unreached = report.unresolvable, report.unreached
    res.fd_unconverged = report.unconverged
    if report.unconverged and not override:
        res.next_steps = _unconverged_next_steps(res)
    res.eps, res.noise_band = report.step, report.noise_band
    res.ratio_mean, res.ratio_spread = report.ratio_mean, report.ratio_spread
    res.evaluations = max(res.evaluations, report.evaluations)
    if override:
        res.signature, res.explanation = override
        res.reason, res.passed = override[1], None
    else:
        sig, factor, why = fd.classify(report, grads=grads, backward_calls=cap.backward_calls or 1,
                                       stale=cap.stale_grads)
        res.signature, res.factor, res.explanation = sig, factor, why
        if sig == Signature.INCONCLUSIVE:
            res.passed, res.reason = None, report.reason
        elif sig == Signature.NAN_INF:
            res.passed = False
        elif report.flat:
            res.passed = True
        elif report.verdict == "sparse":
            res.passed, res.reason = None, report.reason  # valid one-sided slopes at kinks: no verdict either way
        else:
            res.passed = sig == Signature.CORRECT
    errs = [(abs(c.ad - c.fd), abs(c.ad - c.fd) / max(abs(c.fd), 1e-30)) for c in report.directions]
    if errs:
        res.max_abs_error = max(e[0] for e in errs)
        res.max_rel_error = max(e[1] for e in errs)
    by_name = {c.scope: c for c in report.per_param}
    for pc in res.params:
        c = by_name.get(pc.name)
        if c is None and len(res.params) == 1 and report.directions:
            c = report.directions[0]
        if c is not None:
            pc.ad, pc.fd, pc.ratio, pc.agree = c.ad, c.fd, c.ratio, c.agree
            pc.max_abs_err = abs(c.ad - c.fd)
            pc.max_rel_err = abs(c.ad - c.fd) / max(abs(c.fd), 1e-30)
    res.wall_s = round(time.monotonic() - t0, 3)
    return res


def _unconverged_next_steps(res: GradcheckResult) -> list[str]:
    """What can resolve a check whose FD sweep did not converge: FD converges over a horizon short enough for
    nearby trajectories to stay close, and in float64, where steps far below float32's rounding resolve."""
    shorter = (f"shorter horizon: `warpgrad tool bisect --script {res.script}` (the `bisect` tool) checks AD "
               "against FD at shorter horizons through the script's step-count knob; a horizon where FD converges "
               "gives a verdict FD can back") if res.script and not res.probe else (
        "shorter horizon: let the probe simulate fewer steps (its step-count knob) and check again; a horizon "
        "where FD converges gives a verdict FD can back")
    return [
        shorter,
        "float64 reference: run the forward in float64 (wp.float64 arrays and kernels) and check again; FD then "
        "resolves steps far below float32's rounding, and a float64 gradient that matches it is the reference "
        "for the float32 one",
        "kinks (contacts, min/max, wp.where): rerun with `--elements 32` to compare single entries, where a kink "
        "shows as a few mismatching entries and a wrong gradient as many",
    ]


# ------------------------------------------------------------------------------------------ probe
def check_probe(args: GradcheckArgs, workspace: Path, probe: Path, script: Path | None) -> GradcheckResult:
    import time

    t0 = time.monotonic()
    rel = rel_path(workspace, probe)
    res = GradcheckResult(ok=False, mode="probe", probe=rel, script=rel_path(workspace, script) if script else None,
                          objective_kind="probe_declared" if args.declared_objective else "probe")
    digest = hashlib.sha256(probe.read_bytes()).hexdigest()
    spec = {"mode": "probe", "probe": rel, "probe_sha256": digest, "params": sorted(args.params),
            "declared_objective": args.declared_objective,
            "eps_policy": EPS_POLICY, "directions": args.directions, "seed": args.seed}
    res.harness, res.harness_id = spec, _harness_id(spec)
    cfg = ProbeConfig(workspace=str(workspace), script=str(script) if script else None, device=args.device,
                      seed=args.seed, extra_files=[str(probe)],
                      probe=ProbeOptions(path=str(probe), params=args.params, directions=args.directions,
                                         seed=args.seed, elements=args.elements))
    out = run_harness(cfg, HarnessResult, cwd=workspace, timeout_s=args.timeout_s, device=args.device)
    data = out.result
    res.device, res.warp_version, files = _run_facts(data)
    res.files = {k: v for k, v in files.items() if k != rel}
    run = describe_run(out.process, data, workspace, probe, [])
    if run.error is not None:
        return _fail(res, f"the probe could not be run: {run.error.message}", run.error)
    pr = (data.probe if data is not None else None) or ProbeReport()
    if not res.files:
        return _fail(res, "the probe never imported a workspace file: a check that never ran the shipped code is not "
                          "evidence. Import the program's modules from the probe and call into them")
    res.files[rel] = digest
    res.objective = f"loss() of the probe {rel}"
    res.gradient = f"grad() of the probe {rel}"
    res.objective_value = pr.base_objective
    res.params = [ParamCheck(name=p.name, shape=p.shape, size=int(np.prod(p.shape)) if p.shape else 1,
                             ad_norm=p.ad_norm, nonfinite=p.nonfinite) for p in pr.params]
    if pr.nondeterministic:
        res.ok, res.signature, res.passed = True, Signature.INCONCLUSIVE, None
        res.reason = (f"loss() is not deterministic: {pr.base_objective!r}, then {pr.rerun_objective!r}, then "
                      f"{pr.after_grad_objective!r} after grad(). The probe must rebuild its state on every call and "
                      "pin every random seed; FD of a noisy objective is meaningless")
        res.wall_s = round(time.monotonic() - t0, 3)
        return res
    report = fd.FDReport.model_validate(pr.report)
    grads = [np.array(p.grad, dtype=float) if p.grad is not None else
             (np.full(1, np.nan) if p.nonfinite else np.ones(1) * (p.ad_norm > 0)) for p in pr.params]
    cap = CapturedIteration(backward_calls=1)
    res.evaluations = report.evaluations + 3
    return _finish(res, report, [fd.Param(p.name, p.name, np.zeros(1), g) for p, g in zip(res.params, grads)], cap, t0=t0)


def _gradcheck_exit(r: GradcheckResult) -> int:
    """0: match, 1: wrong, 2: no verdict (a CI job gates on 1)."""
    return 0 if r.passed else (1 if r.passed is False else 2)


@tool(args=GradcheckArgs, result=GradcheckResult, long_running=True, forks=True,
      cli=CliCommand(name="gradcheck", help="Check the gradient the optimizer consumes against finite differences. Exit "
                                           "0: match, 1: wrong, 2: no verdict. Arguments after `--` go to the script.",
                     rename={"params": "param", "timeout_s": "timeout"}, paths=("probe",), exit_code=_gradcheck_exit,
                     render="warpgrad.cli.core:render_gradcheck",
                     status="checking: capture run, then finite-difference runs of the script..."))
def gradcheck(args: GradcheckArgs, workspace: Path) -> GradcheckResult:
    """Compare the gradient the optimizer actually consumes with central finite differences of the
    objective over the full horizon, at the script's real inputs, and name the way it is wrong (signature:
    correct, zero, nan_inf, exact_factor, subtly_wrong, sparse_subset, grows_across_iterations, truncation,
    inconclusive). Zero-config on a training script (hooks find the loss, parameters and update); or give a
    probe file. Judged against the FD noise band, never a guessed tolerance. Rerun it with the same
    arguments after a fix: the finish gate needs before/after checks from the same harness."""
    result = check(args, workspace)
    if args.record:
        Ledger(workspace).append("gradcheck", result, tool="gradcheck")
    return result
