"""Probe: persistent vent emission rates (Problem.rate, updated in place by optim.Momentum); objective =
the detector misfit the script prints (0.5 * sum of squared detector residuals).

The probe runs the script's own iterations 0..ITERATION-1 and returns, at ITERATION, what
Momentum.read_grads hands to Momentum.apply (the heavy-ball velocity is optimizer state, not part of
the gradient). loss() recomputes the 48-step upwind advection in float64 numpy (an independent
re-implementation of sim/advect.py + losses.py).
"""

import numpy as np
import train
from optim import Momentum

ITERATION = 3

_args = train.parse_args([])
_prob = train.Problem(_args.seed)
_opt = Momentum({"rate": _prob.rate}, lr=_args.lr)
for _ in range(ITERATION):
    _tape, _loss = _prob.record()
    _tape.backward(_loss)
    _opt.apply(_opt.read_grads(_tape))


def params():
    return {"rate": _prob.rate}


def grad():
    tape, ln = _prob.record()
    tape.backward(ln)
    return _opt.read_grads(tape)


def script_loss():
    return float(_prob.record()[1].numpy()[0])


def loss():
    g = _prob.grid
    def f32(a):
        return np.float64(np.float32(a))
    n = g.n
    rate = _prob.rate.numpy().astype(np.float64)
    src = np.zeros((n, n))
    src[g.vent_cells[:, 0], g.vent_cells[:, 1]] = rate
    u, v = f32(1.2), f32(0.7)
    dt, dx, k = f32(g.dt), f32(g.dx), f32(g.decay)
    c = np.zeros((n, n))
    for _ in range(g.steps):
        cw = np.zeros_like(c)
        cw[1:, :] = c[:-1, :]
        cs = np.zeros_like(c)
        cs[:, 1:] = c[:, :-1]
        c = c + dt * (src - (u * (c - cw) / dx + v * (c - cs) / dx) - k * c)
    r = c[train.DETECTORS[:, 0], train.DETECTORS[:, 1]] - _prob.measured.numpy().astype(np.float64)
    return float(np.sum(0.5 * r * r))
