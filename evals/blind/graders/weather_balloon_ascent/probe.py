"""Probe: per-balloon drag coefficients; the loss is the time-averaged altitude misfit over the flight.

loss() replays ascent_step in numpy float64; grad() is the gradient main() consumes (iteration 0).
HORIZON (None = the program's STEPS) shortens the flight for the truncation sweep in label_b.py.
"""

import numpy as np
import train
import warp as wp

HORIZON = None
DRAG = wp.array(np.full(train.N, 0.1, np.float32), dtype=float, requires_grad=True)


def _steps():
    return train.STEPS if HORIZON is None else HORIZON


def params():
    return {"drag": DRAG}


def loss():
    steps = _steps()
    c = DRAG.numpy().astype(np.float64)
    lift = train.lift.numpy().astype(np.float64)
    h = train.h0.astype(np.float64)
    v = train.v0.astype(np.float64)
    total = 0.0
    for t in range(steps):
        v = v + (lift - c * v * np.abs(v)) * train.DT
        h = h + v * train.DT
        total += np.sum((h - train.logs[t].numpy().astype(np.float64)) ** 2) / (train.N * steps)
    return float(total)


def grad():
    _, g = train.misfit_and_grad(DRAG, _steps())
    return {"drag": g}
