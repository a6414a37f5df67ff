"""Which gradient an update applied, read off the parameter's own change (runs in the harness subprocess).

A plain step is Δp = -lr·g: the residual of the best such step along a candidate gradient says whether
the update applied the consumed gradient, one consumed iterations earlier (a stale gradient), or the sum
of only some of the reads that feed it (an accumulator that skips one). Judged against the rounding of the
parameter's dtype, never guessed: anything else is said to be "not a plain step".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def step(p: dict[str, Any], index: int, history: list[tuple[int, np.ndarray]], raw: np.ndarray) -> None:
    """Where the update is a plain step, the parameter's own change says which gradient it applied:
    Δp = -lr·g. Confirms the consumed gradient, or finds the older gradient the step really followed.
    `p` is the parameter's capture record (updated in place), `history` its consumed gradients by
    iteration, `raw` its new value as stored."""
    new_value = raw.astype(np.float64)
    if new_value.shape != p["value"].shape:
        return
    dp = (new_value - p["value"]).reshape(-1)
    # The new value is rounded to the parameter's dtype: a float32 step small against the parameter leaves a
    # residual of order eps·|p|/|Δp| along no gradient at all. A plain step is judged against that floor.
    eps = float(np.finfo(raw.dtype).eps) if np.issubdtype(raw.dtype, np.floating) else 0.0
    tol = max(1e-3, 4.0 * eps * float(np.linalg.norm(new_value)) / max(float(np.linalg.norm(dp)), 1e-300))
    if not np.any(dp):
        p["crosscheck"] = "the update left the parameter unchanged"
        return
    consumed = (np.sum(p["grads"], axis=0) if p.get("zeroed_between") else p["grads"][-1]).reshape(-1)

    def residual(g: np.ndarray) -> float:
        """Relative residual of the best plain step Δp = -lr·g (lr > 0 by least squares); 1 when none."""
        gg = float(np.dot(g, g))
        lr = -float(np.dot(dp, g)) / gg if gg > 0 else 0.0
        return float(np.linalg.norm(dp + lr * g) / np.linalg.norm(dp)) if lr > 0 else 1.0

    # Successive gradients are often nearly parallel, so "which one" is read off the residual, not the
    # angle: the gradient the step really applied leaves only float rounding behind.
    r_consumed = residual(consumed)
    older = [(index - i, old) for i, old in history if i < index and old.size == consumed.size]
    best = min(((residual(old.reshape(-1)), k, old) for k, old in older), default=None, key=lambda t: t[0])
    # This update's own reads summed (a never-zeroed .grad) compete with the older gradients: successive
    # iterations' sums are nearly parallel, so the one that leaves only rounding behind wins.
    if _summed_reads(p, residual, r_consumed, tol, best[0] if best is not None else float("inf")):
        return
    if best is not None and best[0] < tol and best[0] * 10 < r_consumed:
        r, k, old = best
        p["tape_grad"] = consumed.reshape(p["grad"].shape).copy()  # this iteration's: what its tape gave
        p["grads"], p["zeroed_between"], p["stale_read"] = [old.reshape(p["grad"].shape)], False, True
        p["how"] += (f"; cross-check: the parameter change is a step along the gradient consumed {k} "
                     f"iteration(s) earlier (residual {r:.1e}), not this iteration's ({r_consumed:.1e}): a stale "
                     "gradient")
        p["crosscheck"] = f"the parameter change follows the gradient of {k} iteration(s) earlier: a stale gradient"
        return
    if r_consumed < tol:
        p["crosscheck"] = (f"the parameter change is a plain step along the consumed gradient (residual "
                           f"{r_consumed:.1e}{f', within the {raw.dtype} rounding of the new value' if tol > 1e-3 else ''})")
        return
    if p.get("zeroed_between") and _subset(p, residual, r_consumed):
        return
    if len(p["grads"]) >= 2 and not p.get("optimizer"):
        # Several reads feed this update and its step follows none of them: which one (or which combination)
        # it applies cannot be read off it, and FD of the whole update's objective against one guess is no
        # evidence either way.
        p["untied"] = True
        p["crosscheck"] = (f"the parameter change is not a plain step along the consumed gradient (residual "
                           f"{r_consumed:.1e}, rounding allows {tol:.1e}), and {len(p['grads'])} host reads of its "
                           ".grad feed this update: which of them (or which sum) the update applies cannot be tied "
                           "to it")
        return
    p["crosscheck"] = (f"the parameter change is not a plain step along the consumed gradient (residual "
                       f"{r_consumed:.1e}, rounding allows {tol:.1e}; momentum, Adam, clipping or a projection "
                       "would do this): the consumed gradient is not cross-checked against it")

def _summed_reads(p: dict[str, Any], residual: Callable[[np.ndarray], float], r_last: float, tol: float,
                  rival: float) -> bool:
    """Several reads of a .grad nobody zeroed between backward passes, summed on the host: each read after
    the first holds the earlier passes' gradients again, and the step follows their sum, not the last read
    (which alone is this update's gradient). That sum is the gradient the update applies."""
    if p.get("zeroed_between") or len(p["grads"]) < 2:
        return False
    total = np.sum(p["grads"], axis=0)
    r = residual(total.reshape(-1))
    if r >= tol or r * 10 >= r_last or r > rival:
        return False
    n = len(p["grads"])
    p["tape_grad"] = p["grads"][-1].copy()  # the .grad after the last pass: what the tapes computed together
    p["grads"] = [total]
    p["how"] += (f"; cross-check: the parameter change is a step along the sum of the {n} reads of its .grad "
                 f"(residual {r:.1e}; the last read alone: {r_last:.1e}), and the .grad was not zeroed between "
                 "the backward passes: each read after the first holds the earlier passes' gradients again, so "
                 "the update counts them more than once")
    p["crosscheck"] = (f"the update applies the sum of {n} reads of a .grad that is not zeroed between the backward "
                       "passes feeding it (earlier passes counted again)")
    return True


def _subset(p: dict[str, Any], residual: Callable[[np.ndarray], float], r_all: float) -> bool:
    """An update fed by several backward passes whose step follows the sum of only some of their gradient
    reads (an accumulator that skips one): that partial sum is the gradient it applies. Tried over every
    proper subset of at most 10 reads; True when one leaves only float rounding behind."""
    reads = [g.reshape(-1) for g in p["grads"]]
    if not 2 <= len(reads) <= 10:
        return False
    best: tuple[float, tuple[int, ...]] | None = None
    for mask in range(1, (1 << len(reads)) - 1):
        picked = tuple(i for i in range(len(reads)) if mask >> i & 1)
        r = residual(np.sum([reads[i] for i in picked], axis=0))
        if best is None or r < best[0]:
            best = (r, picked)
    if best is None or best[0] >= 1e-3 or best[0] * 10 >= r_all:
        return False
    r, picked = best
    left_out = [i for i in range(len(reads)) if i not in picked]
    p["grads"], p["zeroed_between"] = [np.sum([p["grads"][i] for i in picked], axis=0)], False
    p["how"] += (f"; cross-check: the parameter change is a step along the sum of reads {list(picked)} only "
                 f"(residual {r:.1e}; all {len(reads)} reads: {r_all:.1e}): the update applies that sum, without "
                 f"the gradient read after backward pass(es) {left_out}")
    p["crosscheck"] = (f"the update applies the gradients read after {len(picked)} of the {len(reads)} backward "
                       f"passes that feed it (left out: {left_out})")
    return True
