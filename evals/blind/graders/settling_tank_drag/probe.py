"""Probe: per-grain drag rates (rebuilt from numpy every iteration); objective = the depth MSE the
script computes (losses.mean) and prints.

ITERATION 0: after one update of the shipped program the drag rates have already diverged (negative
and ~25), so the first iteration is the informative one. loss() recomputes the 100-step settling in
float64 numpy (an independent re-implementation of sim/tank.py + losses.py).
"""

import numpy as np
import train
import warp as wp
from sim.tank import SettlingTank

ITERATION = 0

_args = train.parse_args([])
_tank = SettlingTank()
_obs = train.camera_depths(_tank, _args.seed)
_rng = np.random.default_rng(_args.seed)
_d = _rng.uniform(3.0, 5.0, _tank.n).astype(np.float32)
for _ in range(ITERATION):
    _d = _d - _args.lr * train.gradient(_tank, _d, _obs)[1]
_drag = wp.array(_d, dtype=float, requires_grad=True)


def params():
    return {"drag": _drag}


def grad():
    return {"drag": train.gradient(_tank, _drag.numpy(), _obs)[1]}


def script_loss():
    return float(train.gradient(_tank, _drag.numpy(), _obs)[0])


def loss():
    t = _tank
    def f32(a):
        return np.float64(np.float32(a))
    b = _drag.numpy().astype(np.float64)
    dt, g = f32(t.dt), f32(t.g_eff)
    depth = np.zeros(t.n)
    vel = np.zeros(t.n)
    for _ in range(t.steps):
        vel = vel + dt * (g - b * vel)
        depth = depth + dt * vel
    e = depth - _obs.numpy().astype(np.float64)
    return float(np.mean(e * e))
