"""Probe: shots, a (6,) vec3 array (speed ~ +-15 m/s, friction smoothing speed ~ 0.05 m/s, mu ~ 0.3),
rebuilt from numpy every iteration; objective = summed squared stopping-mark error.

loss() recomputes the 700-step slide in float64 numpy (an independent re-implementation of
sim/pucks.py + losses.py) from the current contents of params().
"""

import numpy as np
import train
import warp as wp
from sim import PuckRink

ITERATION = 2

_args = train.parse_args([])
_rink = PuckRink()
_marks = wp.array(train.MARKS, dtype=float)
_lr = np.array(_args.lr, dtype=np.float32)
_s = train.initial_shots(_rink.n, _args.seed)
for _ in range(ITERATION):
    _s = _s - _lr * train.loss_and_grad(_rink, _s, _marks)[1]
_shots = wp.array(_s, dtype=wp.vec3, requires_grad=True)


def params():
    return {"shots": _shots}


def grad():
    return {"shots": train.loss_and_grad(_rink, _shots.numpy(), _marks)[1]}


def script_loss():
    return float(train.loss_and_grad(_rink, _shots.numpy(), _marks)[0])


def loss():
    s = _shots.numpy().astype(np.float64)
    dt = np.float64(np.float32(_rink.dt))
    g = np.float64(np.float32(9.81))
    x = np.zeros(_rink.n)
    v = s[:, 0].copy()
    for _ in range(_rink.steps):
        v = v - dt * (s[:, 2] * g * v / np.sqrt(v * v + s[:, 1] ** 2))
        x = x + dt * v
    return float(np.sum((x - train.MARKS.astype(np.float64)) ** 2))
