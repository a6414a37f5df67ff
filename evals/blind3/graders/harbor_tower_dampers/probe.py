"""Probe: the ten floor dampers; objective = residual sway (drift + 0.05 velocity^2) after all
240 steps. grad() is checkpointed_grad at iteration 0 (the summed gradients of the four segment
tapes, what the update applies); loss() replays storey_step over the full horizon in numpy float64
(an independent re-implementation).
"""

import numpy as np
import train
from tower import FLOORS, Tower

tower = Tower()
damper = train.initial_damper()


def params():
    return {"damper": damper}


def grad():
    _, g = train.checkpointed_grad(tower, damper)
    return {"damper": g.astype(np.float64)}


def script_loss():
    value, _ = train.checkpointed_grad(tower, damper)
    damper.grad.zero_()
    return value


def loss():
    c = damper.numpy().astype(np.float64)
    k = tower.stiff.numpy().astype(np.float64)
    x = tower.x0.astype(np.float64)
    v = tower.v0.astype(np.float64)
    dt = np.float64(np.float32(tower.dt))
    for t in range(tower.steps):
        g = np.float64(np.float32(tower.ground(t)))
        below = np.concatenate([[g], x[:-1]])
        below_v = np.concatenate([[0.0], v[:-1]])
        f = -k * (x - below) - c * (v - below_v)
        f[:-1] += k[1:] * (x[1:] - x[:-1]) + c[1:] * (v[1:] - v[:-1])
        v = v + dt * f
        x = x + dt * v
    assert x.shape == (FLOORS,)
    return float(np.sum(x * x + 0.05 * v * v))
