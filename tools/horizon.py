"""`bisect`: the horizon at which autodiff and finite differences first disagree.

Truncating a simulation to K steps and checking AD against FD at each K localizes a bug in time: a
buffer reused from step 2 on fails from K = 2, a missing `requires_grad` fails at every K, an overflow
that appears late fails only past the step where it appears. The step count is changed through the
script's own knob (a module constant, an argparse default or a function default found by `shrink`'s
finder), in a temporary copy written next to the script so its imports resolve; nothing else changes.
The copies are removed on every exit path, a SIGKILL of this process included (`scratch_copies`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .gradcheck import GradcheckArgs, check
from .ledger import Ledger
from .registry import ToolError, tool
from .scratch_copies import ScriptCopies
from .shrink import find_knobs, rewrite_values
from .signatures import Signature
from .workspace import rel_path, resolve_path

HORIZON_CATEGORIES = ("steps", "frames", "substeps")


class BisectArgs(BaseModel):
    script: str = Field(description="Workspace-relative training script whose gradient is wrong at full horizon.")
    knob: str | None = Field(None, description="Name (or id) of the step-count knob; default: the first knob "
                             "that counts steps/frames/substeps in the script.")
    low: int = Field(1, ge=1, description="Smallest horizon to try.")
    high: int | None = Field(None, ge=1, description="Largest horizon (default: the knob's current value).")
    args: list[str] = Field(default_factory=list, description="Arguments passed to the script.")
    iteration: int | None = Field(None, ge=0, description="Training iteration to check (as in gradcheck).")
    params: list[str] = Field(default_factory=list, description="Parameters to check (as in gradcheck).")
    device: Literal["cpu"] | None = Field(None, description="'cpu' forces Warp onto the CPU.")
    timeout_s: float = Field(300.0, gt=0, description="Wall-clock limit of each run.")
    record: bool = Field(True, description="Append the result to the evidence ledger.")


class HorizonCheck(BaseModel):
    horizon: int
    passed: bool | None
    signature: Signature
    max_rel_error: float | None = None


class BisectResult(BaseModel):
    ok: bool
    script: str
    knob: str | None = None
    knob_line: int | None = None
    first_failing: int | None = Field(None, description="Smallest horizon whose gradient disagrees with FD.")
    last_passing: int | None = Field(None, description="Largest horizon below it whose gradient agrees.")
    checks: list[HorizonCheck] = []
    conclusion: str = ""
    reason: str = ""


def _checker(workspace: Path, script: Path, knob, args: BisectArgs, copies: ScriptCopies):
    source = script.read_text(encoding="utf-8")
    cache: dict[int, HorizonCheck] = {}

    def at(k: int) -> HorizonCheck:
        if k in cache:
            return cache[k]
        copy = copies.write(str(k), rewrite_values(source, [(knob, k)]))
        try:
            r = check(GradcheckArgs(script=rel_path(workspace, copy), args=args.args, iteration=args.iteration,
                                    params=args.params, device=args.device, timeout_s=args.timeout_s,
                                    record=False), workspace)
        finally:
            copy.unlink(missing_ok=True)  # ours: created above (and guarded by `copies` if we are killed here)
        hc = HorizonCheck(horizon=k, passed=r.passed if r.ok else None, signature=r.signature,
                          max_rel_error=r.max_rel_error)
        cache[k] = hc
        return hc

    return at, cache


def bisect_horizon(args: BisectArgs, workspace: Path) -> BisectResult:
    workspace = Path(workspace).resolve()
    script = resolve_path(workspace, args.script)
    res = BisectResult(ok=False, script=rel_path(workspace, script))
    knobs = [k for k in find_knobs(script.read_text(encoding="utf-8")) if isinstance(k.value, int)]
    if args.knob:
        chosen = [k for k in knobs if args.knob in (k.name, k.id)]
    else:
        chosen = [k for k in knobs if k.category in HORIZON_CATEGORIES]
    if not chosen:
        res.reason = ("no step-count knob found in the script (a module constant, argparse default or function "
                      "default named like steps/frames/substeps, or a module constant bounding a time loop); name "
                      "one with knob=, or write a probe that takes a horizon")
        return res
    knob = chosen[0]
    res.knob, res.knob_line = knob.name, knob.line
    high = args.high or int(knob.value)
    if high < args.low:
        raise ToolError(f"high ({high}) is below low ({args.low})")
    with ScriptCopies(script) as copies:
        return _search(res, _checker(workspace, script, knob, args, copies), knob, args, high)


def _search(res: BisectResult, checker, knob, args: BisectArgs, high: int) -> BisectResult:
    at, cache = checker
    top = at(high)
    if top.passed is None:
        res.checks = list(cache.values())
        res.reason = f"the check at the full horizon {high} gave no verdict ({top.signature}); bisection needs one"
        return res
    if top.passed:
        res.ok, res.checks = True, list(cache.values())
        res.conclusion = f"AD matches FD at horizon {high}: nothing to localize in time"
        return res
    bottom = at(args.low)
    if bottom.passed is False:
        res.ok, res.first_failing, res.checks = True, args.low, sorted(cache.values(), key=lambda c: c.horizon)
        res.conclusion = (f"AD and FD disagree already at horizon {args.low}: the bug is in a single step or in the "
                          "setup/loss, not in how steps are chained (a missing requires_grad, a disabled backward, a "
                          "wrong kernel adjoint, a mis-seeded loss)")
        return res
    lo, hi = args.low, high  # invariant: at(lo) passes (or no verdict), at(hi) fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        r = at(mid)
        if r.passed is False:
            hi = mid
        else:
            lo = mid
    res.ok = True
    res.first_failing, res.last_passing = hi, lo
    res.checks = sorted(cache.values(), key=lambda c: c.horizon)
    res.conclusion = (f"AD matches FD up to {knob.name} = {lo} and disagrees beyond the noise band from "
                      f"{knob.name} = {hi}. Either the bug starts at step {hi} (a buffer reused from then on, a state "
                      "aliased across steps, an overflow reached that late) or an error present earlier grows with the "
                      "horizon until FD can see it: compare max_rel_error across the horizons checked")
    return res


@tool(args=BisectArgs, result=BisectResult, long_running=True, forks=True)
def bisect(args: BisectArgs, workspace: Path) -> BisectResult:
    """Localize a wrong gradient in time: rerun the FD check on copies of the script with its step-count
    knob set to smaller horizons (binary search) and report the first horizon where AD and FD disagree.
    A failure already at horizon 1 points at a single step or the loss; a failure that starts at step K
    points at what first happens at step K (buffer reuse, aliasing, a late overflow)."""
    result = bisect_horizon(args, workspace)
    if args.record:
        Ledger(workspace).append("bisect", result, tool="bisect")
    return result
