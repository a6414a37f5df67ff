"""Probe: the 12 panel tilts (one wp.array, assigned in place by apply_update); objective = the
demand gap printed at that iteration.

The script's train.iteration is run with the script's lr for ITERATION iterations (the tilts move
as in training); grad() runs iteration ITERATION with lr 0 and returns the vector apply_update
applies in it. loss() evaluates daily_energy
and the gap in numpy float64 (an independent re-implementation).
"""

import numpy as np
import train
from field import Field

ITERATION = 3
LR = 0.004
field = Field()
tilt = train.initial_tilt()
for _ in range(ITERATION):
    train.iteration(field, tilt, LR)


def params():
    return {"tilt": tilt}


def grad():
    # iteration ITERATION with lr 0: the tilts stay at params(), and the vector returned is the
    # one apply_update applies in that iteration
    _, g = train.iteration(field, tilt, 0.0)
    return {"tilt": g.astype(np.float64)}


def loss():
    th = tilt.numpy().astype(np.float64)[:, None]
    sl = field.slope.numpy().astype(np.float64)[:, None]
    sun = field.sun.numpy().astype(np.float64)[None, :]
    irr = field.irradiance.numpy().astype(np.float64)[None, :]
    c = np.cos(th + sl - sun)
    energy = np.sum(irr * 0.5 * (c + np.sqrt(c * c + 0.01)) * 0.5, axis=1)
    return float(np.sum((energy - field.demand.numpy().astype(np.float64)) ** 2))
