"""Probe: persistent theta0 and omega0 (updated in place by optim.GradientDescent); objective = the
phase loss the script prints (sum of (theta_T - goal)^2 + 0.01 omega_T^2).

The probe runs the script's own iterations 0..ITERATION-1 (forward + opt.step) and then reproduces the
gradient the optimizer consumes at ITERATION via opt.gradients(): whatever the parameters' .grad
buffers hold when that helper runs is part of the program state, so grad() restores them to what the
loop left there before calling it (idempotent). loss() recomputes the 150-step release in float64
numpy (an independent re-implementation of sim/pendulums.py + losses.py).
"""

import os

import numpy as np
import train

ITERATION = int(os.environ.get("BLIND_ITERATION", "3"))  # the meta names 3

_args = train.parse_args([])
_bank, _theta0, _omega0, _goal, _opt = train.setup(_args)
for _ in range(ITERATION):
    _tape, _loss = train.forward(_bank, _theta0, _omega0, _goal)
    _opt.step(_tape, _loss)
_left_grads = {k: p.grad.numpy().copy() for k, p in _opt.params.items()}


def params():
    return {"theta0": _theta0, "omega0": _omega0}


def grad():
    for k, p in _opt.params.items():
        p.grad.assign(_left_grads[k])
    tape, ln = train.forward(_bank, _theta0, _omega0, _goal)
    g = _opt.gradients(tape, ln)
    for k, p in _opt.params.items():
        p.grad.assign(_left_grads[k])
    return g


def script_loss():
    return float(train.forward(_bank, _theta0, _omega0, _goal)[1].numpy()[0])


def loss():
    b = _bank
    def f32(a):
        return np.float64(np.float32(a))
    th = _theta0.numpy().astype(np.float64)
    om = _omega0.numpy().astype(np.float64)
    gl = b.g_over_l.numpy().astype(np.float64)
    dt, c = f32(b.dt), f32(b.damping)
    for _ in range(b.steps):
        om = om + dt * (-gl * np.sin(th) - c * om)
        th = th + dt * om
    return float(np.sum((th - train.GOAL.astype(np.float64)) ** 2 + f32(0.01) * om * om))
