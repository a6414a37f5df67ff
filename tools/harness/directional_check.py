"""A per-launch adjoint check in O(size of the arrays) memory: the dot-product test.

`warp.autograd.gradcheck_tape` allocates a dense Jacobian of (output scalars x input elements) for every
input/output pair, twice (AD and FD), before `max_inputs_per_var` limits how many columns it fills: a
launch over 32k float32 values in and out asks for 4 GiB each. Above a memory budget the launch is checked
with directional products instead, which need only copies of its arrays:

    fd = w · (f(x + eps v) - f(x - eps v)) / (2 eps)        (two forward launches per input)
    ad = (Jᵀ w) · v                                         (one backward launch per output, seeded with w)

with w random weights of size ~1 on the outputs and v a random direction over `support` scalars of the input
(a fixed seed: the same launch gets the same directions every run).
A wrong adjoint makes ad and fd differ for almost every direction; a right one makes them agree to FD
precision. The perturbation is rounded to the array's dtype, so the direction actually applied, not the
one asked for, is the one the AD side uses.

Outputs are reset to their post-forward values before each forward launch, so a kernel that accumulates
(`atomic_add`) into its output differences the same constant away, as Warp's own FD Jacobian does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from . import hooks, warp_compat
from .protocol import GradcheckTableRow

N_DIRECTIONS = 2


def _np(a) -> np.ndarray:
    return hooks.original("numpy")(a)


def dense_jacobian_bytes(ins: list, outs: list) -> int:
    """What `gradcheck_tape` would allocate for one launch: an AD and an FD Jacobian per differentiable pair."""
    total = 0
    for a in ins:
        if not (isinstance(a, wp.array) and a.requires_grad):
            continue
        for o in outs:
            if isinstance(o, wp.array) and o.requires_grad:
                out_scalars = o.size * wp.types.type_size(o.dtype)
                total += 2 * out_scalars * a.size * wp.types.type_size_in_bytes(a.dtype)
    return total


@dataclass
class _Arg:
    pos: int
    label: str
    array: wp.array


def _args(launch: warp_compat.KernelRecord) -> tuple[list[_Arg], list[_Arg]]:
    labels = warp_compat.kernel_arg_labels(launch.kernel)
    n_in = len(launch.inputs)
    ins = [_Arg(p, labels[p] if p < len(labels) else str(p), a) for p, a in enumerate(launch.inputs)
           if isinstance(a, wp.array) and a.requires_grad and a.grad is not None
           and wp.types.type_is_float(getattr(a.dtype, "_wp_scalar_type_", a.dtype))]
    outs = [_Arg(p, labels[n_in + p] if n_in + p < len(labels) else str(n_in + p), a)
            for p, a in enumerate(launch.outputs) if isinstance(a, wp.array) and a.requires_grad and a.grad is not None]
    out_ids = {id(o.array) for o in outs}
    return [i for i in ins if id(i.array) not in out_ids], outs  # an array read and written: no clean FD


def _weights(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Output weights of size ~1 each (as the dense check's one-hot seeds), random signs so that errors in
    different outputs do not cancel by construction."""
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 1.0, size=shape)


def directional_rows(launch: warp_compat.KernelRecord, eps: float, atol: float, rtol: float, seed: int,
                     support: int = 16) -> list[GradcheckTableRow]:
    """ad and fd of w·J·v for each differentiable input/output pair and N_DIRECTIONS directions; a row per pair
    (its worst direction). Leaves the arrays' values and gradients changed: the caller restores them."""
    ins, outs = _args(launch)
    if not ins or not outs:
        return []
    rng = np.random.default_rng(seed)
    out_vals = [_np(o.array).copy() for o in outs]
    worst: dict[tuple[int, int], GradcheckTableRow] = {}
    for _ in range(N_DIRECTIONS):
        ws = [_weights(rng, v.shape) for v in out_vals]
        fd, v_used = _fd_products(launch, ins, outs, out_vals, ws, rng, eps, support)
        ad = _ad_products(launch, ins, outs, ws, v_used)
        for (i, o), f in fd.items():
            a = ad[i, o]
            row = _row(ins[i].label, outs[o].label, a, f, atol, rtol)
            prev = worst.get((i, o))
            if prev is None or _worse(row, prev):
                worst[i, o] = row
    return list(worst.values())


def _launch(launch: warp_compat.KernelRecord) -> None:
    # The record is [kernel, dim, max_blocks, inputs, outputs, device, block_dim, metadata] (warp_compat).
    e = launch.entry
    wp.launch(launch.kernel, dim=launch.dim, inputs=launch.inputs, outputs=launch.outputs, max_blocks=e[2],
              device=e[5], block_dim=e[6])


def _sparse(rng: np.random.Generator, shape: tuple[int, ...], support: int) -> np.ndarray:
    """A direction over `support` random scalars, each of size ~1 (eps is a per-scalar step, as in the dense
    check). Sparse because a perturbation of every scalar at once changes every rounding of a reduction in
    float32: the FD would measure that noise, not the derivative (measured: a 50k-term atomic_add sum)."""
    v = np.zeros(shape)
    flat = v.reshape(-1)
    picked = rng.choice(flat.size, size=min(support, flat.size), replace=False)
    flat[picked] = rng.choice([-1.0, 1.0], size=picked.size) * rng.uniform(0.5, 1.0, size=picked.size)
    return v


def _fd_products(launch, ins: list[_Arg], outs: list[_Arg], out_vals: list[np.ndarray], ws: list[np.ndarray],
                 rng: np.random.Generator, eps: float, support: int) -> tuple[dict[tuple[int, int], float], list[np.ndarray]]:
    fd: dict[tuple[int, int], float] = {}
    used: list[np.ndarray] = []
    for i, arg in enumerate(ins):
        x = _np(arg.array).copy()
        v = _sparse(rng, x.shape, support)
        plus, minus = (x + eps * v).astype(x.dtype), (x - eps * v).astype(x.dtype)
        # The step as rounded to the dtype: the direction the AD side must use.
        used.append((plus.astype(np.float64) - minus.astype(np.float64)) / (2.0 * eps))
        sides = []
        for xs in (plus, minus):
            for out, val in zip(outs, out_vals):
                out.array.assign(val)
            arg.array.assign(xs)
            _launch(launch)
            sides.append([_np(out.array).astype(np.float64) for out in outs])
        arg.array.assign(x)
        for k in range(len(outs)):
            fd[i, k] = float(np.sum(ws[k] * (sides[0][k] - sides[1][k]))) / (2.0 * eps)
    for out, val in zip(outs, out_vals):
        out.array.assign(val)
    return fd, used


def _ad_products(launch, ins: list[_Arg], outs: list[_Arg], ws: list[np.ndarray],
                 v_used: list[np.ndarray]) -> dict[tuple[int, int], float]:
    ad: dict[tuple[int, int], float] = {}
    tape = wp.Tape()
    warp_compat.set_tape_records(tape, [launch.entry])
    try:
        for o, out in enumerate(outs):
            for a in [*ins, *outs]:
                a.array.grad.zero_()
            out.array.grad.assign(ws[o].astype(_np(out.array.grad).dtype))
            hooks.original("backward")(tape)
            for i, arg in enumerate(ins):
                ad[i, o] = float(np.sum(_np(arg.array.grad).astype(np.float64) * v_used[i]))
    finally:
        warp_compat.set_tape_records(tape, [])
    return ad


def _row(inp: str, out: str, ad: float, fd: float, atol: float, rtol: float) -> GradcheckTableRow:
    err = abs(ad - fd)
    finite = np.isfinite(ad) and np.isfinite(fd)
    passed = "NaN" if not finite else "PASS" if err <= atol + rtol * abs(fd) else "FAIL"
    return GradcheckTableRow(input=inp, output=out, max_abs_error=err if finite else float("nan"), ad=ad, fd=fd,
                             max_rel_error=err / abs(fd) if finite and fd != 0 else (0.0 if err == 0 else float("inf")),
                             passed=passed)


def _worse(a: GradcheckTableRow, b: GradcheckTableRow) -> bool:
    rank = {"NaN": 2, "FAIL": 1, "PASS": 0}
    return (rank[a.passed], a.max_abs_error) > (rank[b.passed], b.max_abs_error)
