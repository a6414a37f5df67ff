"""Probe: per-bead wind forces are optimized; the loss is the pose error after all four segments.

The chain runs in float64, so the program's own forward is the float64 objective.
"""

import numpy as np
import train
import warp as wp

WIND = wp.array(np.zeros((train.model.n, 3)), dtype=wp.vec3d, requires_grad=True)


def params():
    return {"wind": WIND}


def loss():
    return train.objective(WIND)


def grad():
    # iteration 0 of main(): the gradient the numpy update consumes
    _, g = train.loss_and_grad(WIND)
    return {"wind": g}
