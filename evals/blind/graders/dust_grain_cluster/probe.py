"""Probe: nozzle exit velocities v0, a (8,) vec3 array rebuilt from numpy every iteration; objective =
the cluster loss the script prints (squared landing error + 0.02 * sum over pairs i != j of exp(-r_ij/0.05)).

ITERATION 0 (the gradient of the very first iteration is already non-finite). loss() recomputes the
80-step flight and the loss in float64 numpy (an independent re-implementation of sim/flight.py +
losses.py; self pairs contribute exactly 0 to the forward value, as in the script).
"""

import numpy as np
import train
import warp as wp
from sim.flight import GrainLauncher

ITERATION = 0

_args = train.parse_args([])
_launcher = GrainLauncher()
_target = wp.array(train.cups(_launcher.n), dtype=wp.vec3)
_v = train.initial_velocity(_launcher.n, _args.seed)
for _ in range(ITERATION):
    _v = _v - _args.lr * train.loss_and_grad(_launcher, _v, _target)[1]
_v0 = wp.array(_v, dtype=wp.vec3, requires_grad=True)


def params():
    return {"v0": _v0}


def grad():
    return {"v0": train.loss_and_grad(_launcher, _v0.numpy(), _target)[1]}


def script_loss():
    return train.loss_and_grad(_launcher, _v0.numpy(), _target)[0]


def loss():
    ln = _launcher
    def f32(a):
        return np.float64(np.float32(a))
    v = _v0.numpy().astype(np.float64)
    x = np.zeros_like(v)
    g = np.array([0.0, 0.0, f32(-9.81)])
    dt, drag = f32(ln.dt), f32(ln.drag)
    for _ in range(ln.steps):
        v = v + dt * (g - drag * np.linalg.norm(v, axis=1)[:, None] * v)
        x = x + dt * v
    t = _target.numpy().astype(np.float64)
    land = np.sum((x - t) ** 2)
    r = np.linalg.norm(x[:, None, :] - x[None, :, :], axis=2)
    off = ~np.eye(ln.n, dtype=bool)
    spacing = f32(0.02) * np.sum(np.exp(-r[off] / f32(0.05)))
    return float(land + spacing)
