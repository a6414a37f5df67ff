"""Probe: per-seed drag coefficients; objective = summed squared landing error after 120 steps.

grad() is the script's tape at iteration 0 (what SGD applies); loss() replays flight_step with the
quadratic drag -c |v - wind| (v - wind) in numpy float64 (an independent re-implementation).
"""

import numpy as np
import train
import warp as wp
from aero.flight import Drop

drop = Drop()
drag = train.make_drag(drop.n)


def params():
    return {"drag": drag}


def grad():
    tape = wp.Tape()
    with tape:
        out = drop.run(drag)
    tape.backward(out)
    g = drag.grad.numpy().astype(np.float64)
    tape.zero()
    return {"drag": g}


def loss():
    c = drag.numpy().astype(np.float64)[:, None]
    x = drop.x0.astype(np.float64)
    v = drop.v0.astype(np.float64)
    wind = np.array([drop.wind[0], drop.wind[1]], dtype=np.float64)
    g = np.array([0.0, -9.81])
    dt = np.float64(np.float32(drop.dt))
    for _ in range(drop.steps):
        rel = v - wind
        a = g - c * np.linalg.norm(rel, axis=1, keepdims=True) * rel
        v = v + dt * a
        x = x + dt * v
    return float(np.sum((x - drop.spots.numpy().astype(np.float64)) ** 2))
