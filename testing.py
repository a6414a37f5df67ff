"""Gradient checks for a user's own test suite: gate CI on gradients with pytest.

Two levels, both with warpgrad's directional finite differences (a fixed number of evaluations whatever the
size, a step chosen by a sweep, a float32-aware noise band instead of a guessed tolerance):

* the whole training script, as the user runs it (capture in a sandboxed subprocess, like
  `warpgrad gradcheck`)::

      from warpgrad.testing import assert_gradients_correct
      def test_training_gradients():
          assert_gradients_correct("train.py", args=["--steps", "40"])

* one differentiable kernel launch (or a Python function that launches kernels), in the test's own process::

      from warpgrad.testing import check_function
      def test_my_kernel():
          check_function(my_kernel, inputs=[x, k], outputs=[y], dim=n).assert_correct()

`check_function` compares, along seeded random directions `v` over the float inputs that require a gradient,
AD·v from one `Tape.backward` against central differences of the scalar `w·outputs` (`w` a fixed random
weighting of every output entry). Unlike `wp.autograd.gradcheck` it does not build a Jacobian (2 + 2·N launches)
and unlike `torch.autograd.gradcheck` it needs no float64: the band is measured, per direction.

The pytest plugin (`warpgrad.pytest_plugin`, registered through the `pytest11` entry point) adds the
`gradcheck` marker and makes the assertion messages of this module readable in pytest's report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from .tools import fd
from .tools.gradcheck import GradcheckArgs, GradcheckResult, gradcheck
from .tools.signatures import Signature

__all__ = [
    "FunctionCheck", "GradientCheckFailed", "assert_gradients_correct", "check_function", "check_script",
]


class GradientCheckFailed(AssertionError):
    """The gradients are not shown correct; the message is the headline, the evidence and the top hypothesis."""


# ------------------------------------------------------------------------------------------------ scripts

def check_script(script: str | Path, args: Sequence[str] = (), *, workspace: str | Path | None = None,
                 iteration: int | None = None, params: Sequence[str] = (), directions: int = 3,
                 timeout_s: float = 300.0, record: bool = False) -> GradcheckResult:
    """Check the gradient a training script's update consumes against FD of the objective it reports.

    Runs the script under capture in a sandboxed subprocess (never in the test's process), exactly as
    `warpgrad gradcheck SCRIPT -- ARGS` does, and returns the typed result. `workspace` is the folder the
    script's imports resolve from (default: the script's folder). Nothing is written to the evidence ledger
    unless `record` is True.
    """
    path = Path(script).resolve()
    ws = Path(workspace).resolve() if workspace is not None else path.parent
    if not path.is_file():
        raise FileNotFoundError(f"no script {path}")
    try:
        rel = path.relative_to(ws)
    except ValueError:
        raise ValueError(f"{path} is not inside the workspace {ws}") from None
    return gradcheck(GradcheckArgs(script=rel.as_posix(), args=list(args), iteration=iteration, params=list(params),
                                   directions=directions, timeout_s=timeout_s, record=record), ws)


def direction_rows(directions: Sequence[fd.DirectionCheck]) -> list[str]:
    """The evidence table of a script check and of a function check, formatted in this one place: one row per
    direction (its scope: all parameters, or one of them), AD·v, FD·v, the band they must agree within, and its
    status (an unresolved direction does not vote: it is neither "agree" nor "DISAGREE")."""
    if not directions:
        return []
    rows = ["  direction     AD·v            FD·v            band        agree"]
    rows += [f"  {d.direction:>2} {d.scope[:10]:<10} {d.ad:<+15.6e} {d.fd:<+15.6e} {d.band:<11.2e} "
             f"{'DISAGREE' if d.status == 'disagree' else d.status}" for d in directions]
    return rows


def _top_hypothesis(script: Path, args: Sequence[str], workspace: Path) -> str | None:
    """The first hypothesis of `warpgrad diagnose` (run only when a check fails: it costs a few more runs)."""
    from .tools.diagnose import DiagnoseArgs, run_diagnose

    r = run_diagnose(DiagnoseArgs(script=script.relative_to(workspace).as_posix(), args=list(args)), workspace)
    if not r.hypotheses:
        return None
    h = r.hypotheses[0]
    where = f" ({h.file}:{h.line})" if h.file and h.line else ""
    return f"{h.title}{where}" + (f"; next: {h.next_check}" if h.next_check else "")


def failure_message(r: GradcheckResult, top: str | None = None) -> str:
    """What a failing `assert_gradients_correct` says: the headline, the evidence table, the top hypothesis."""
    if not r.ok:
        head = f"warpgrad could not check the gradients of {r.script}: {r.reason}"
    elif r.passed is None:
        head = f"no verdict on {r.script} ({r.signature}): {r.reason or r.explanation}"
    else:
        factor = f" (AD/FD = {r.factor:g})" if r.factor else ""
        head = f"gradients of {r.script} are WRONG: {r.signature}{factor}. {r.explanation}"
    lines = [head]
    if r.objective:
        lines.append(f"objective: {r.objective}; gradient: {r.gradient}; iterations checked: {r.iterations}")
    lines += direction_rows(r.directions)
    if top:
        lines.append(f"top hypothesis: {top}")
    return "\n".join(lines)


def assert_gradients_correct(script: str | Path, args: Sequence[str] = (), *, workspace: str | Path | None = None,
                             allow_inconclusive: bool = False, explain: bool = True, **options: Any) -> GradcheckResult:
    """Fail the test unless the script's gradients are shown correct by FD.

    "No verdict" fails too (FD could not judge: a check that cannot tell is not a pass) unless
    `allow_inconclusive`. On a failure with `explain`, `warpgrad diagnose` runs once more to name the top
    hypothesis in the message. Other keyword options go to `check_script`.
    """
    r = check_script(script, args, workspace=workspace, **options)
    if r.ok and r.passed:
        return r
    if r.ok and r.passed is None and allow_inconclusive:
        return r
    path = Path(script).resolve()
    ws = Path(workspace).resolve() if workspace is not None else path.parent
    top = _top_hypothesis(path, args, ws) if explain and r.ok and r.passed is False else None
    raise GradientCheckFailed(failure_message(r, top))


# ------------------------------------------------------------------------------------------------ functions

class FunctionCheck(BaseModel):
    """The result of `check_function`."""

    passed: bool | None = Field(description="True: AD matches FD in every direction; None: FD could not judge.")
    signature: Signature
    factor: float | None = None
    explanation: str
    inputs: list[str] = Field(description="The inputs differentiated (float arrays that require a gradient).")
    directions: list[fd.DirectionCheck] = []
    per_input: list[fd.DirectionCheck] = Field(default_factory=list, description="On a disagreement: one direction "
                                               "restricted to each input.")
    step: float | None = None
    evaluations: int = Field(description="Launches of the function FD needed (independent of the array sizes).")

    def message(self) -> str:
        head = {True: "gradients agree with FD", False: f"gradients are WRONG: {self.signature}",
                None: f"no verdict ({self.signature})"}[self.passed]
        return "\n".join([f"{head}: {self.explanation}", *direction_rows(self.directions + self.per_input)])

    def assert_correct(self) -> FunctionCheck:
        """Raise `GradientCheckFailed` unless AD matched FD."""
        if self.passed is not True:
            raise GradientCheckFailed(self.message())
        return self


def _float_kind(arr: Any) -> bool:
    # The numpy view names the scalar type of vector and matrix dtypes too (vec3 -> float32).
    return bool(np.issubdtype(arr.numpy().dtype, np.floating))


def check_function(fn: Callable[..., Any], inputs: Sequence[Any], outputs: Sequence[Any], *, dim: Any = None,
                   wrt: Sequence[int] | None = None, directions: int = 3, seed: int = 0,
                   device: Any = None) -> FunctionCheck:
    """Check the adjoint of one kernel launch (or a function that launches kernels) against FD.

    Args:
        fn: a `@wp.kernel` (launched as `wp.launch(fn, dim, inputs, outputs)`), or a Python callable called as
            `fn(*inputs, *outputs)` that writes its outputs with Warp launches.
        inputs, outputs: Warp arrays (and scalars for kernel inputs). Outputs are zeroed before every call (so a
            kernel that accumulates into them with `atomic_add` sees the same start each time); the inputs are
            restored after every perturbation.
        dim: the launch dimension for a kernel (default: the first output's shape).
        wrt: indices into `inputs` to differentiate (default: every float array with `requires_grad`).
        directions: random directions (2 launches each at the chosen step, after a 3-step sweep).
        seed: seed of the directions and of the output weighting.

    The scalar differentiated is `w·outputs` for a fixed random `w` per output entry, in float64; the tape's
    gradient of it is `backward(grads={out: w})`.
    """
    import warp as wp

    if isinstance(fn, wp.Kernel):
        launch_dim = dim if dim is not None else outputs[0].shape

        def call() -> None:
            wp.launch(fn, dim=launch_dim, inputs=list(inputs), outputs=list(outputs), device=device)
    else:
        def call() -> None:
            fn(*inputs, *outputs)

    def run() -> None:
        for o in outputs:
            o.zero_()
        call()

    chosen = list(wrt) if wrt is not None else [
        i for i, a in enumerate(inputs) if isinstance(a, wp.array) and a.requires_grad and _float_kind(a)]
    if not chosen:
        raise ValueError("no input to differentiate: pass float Warp arrays with requires_grad=True (or `wrt`)")
    names = [f"inputs[{i}]" for i in chosen]
    rng = np.random.default_rng(seed + 7919)
    weights = [rng.standard_normal(o.numpy().shape) for o in outputs]
    base = {n: inputs[i].numpy().copy() for n, i in zip(names, chosen)}

    def objective() -> float:
        return float(sum(np.sum(w * o.numpy().astype(np.float64)) for w, o in zip(weights, outputs)))

    tape = wp.Tape()
    with tape:
        run()
    base_objective = objective()
    tape.zero()  # the inputs' gradients start from zero, whatever the test left in them
    tape.backward(grads={o: wp.array(w.astype(o.numpy().dtype), dtype=o.dtype, device=o.device)
                         for o, w in zip(outputs, weights)})
    grads = {n: inputs[i].grad.numpy().copy() for n, i in zip(names, chosen)}
    tape.zero()

    def evaluate(batch: list[dict[str, np.ndarray]]) -> list[fd.Evaluation]:
        out = []
        for pert in batch:
            applied = {}
            for n, i in zip(names, chosen):
                moved = (base[n] + pert.get(n, 0.0)).astype(base[n].dtype)
                applied[n] = moved.astype(np.float64) - base[n].astype(np.float64)
                inputs[i].assign(moved)
            run()
            out.append(fd.Evaluation(objective=objective(), applied=applied))
        for n, i in zip(names, chosen):
            inputs[i].assign(base[n])
        run()
        return out

    params = [fd.Param(key=n, name=n, value=base[n].astype(np.float64), grad=grads[n].astype(np.float64))
              for n in names]
    double = all(np.dtype(base[n].dtype).itemsize >= 8 for n in names) and all(
        o.numpy().dtype.itemsize >= 8 for o in outputs)
    engine = fd.FDEngine(params=params, evaluate=evaluate, base_objective=base_objective,
                         unit_roundoff=2.0**-53 if double else 2.0**-24, n_directions=directions, seed=seed)
    report = engine.check(per_param=len(params) > 1)
    sig, factor, why = fd.classify(report, grads=[p.grad for p in params], backward_calls=1, stale={})
    # "sparse": the mismatch sits only at kinks of a non-smooth function, where FD cannot judge either way.
    passed = None if report.verdict in ("inconclusive", "sparse") else report.verdict == "agree"
    return FunctionCheck(passed=passed, signature=sig, factor=factor, explanation=report.reason or why, inputs=names,
                         directions=report.directions, per_input=report.per_param, step=report.step,
                         evaluations=report.evaluations)
