"""Probe: initial star positions x0 (float64) are optimized; the loss is the misfit over the three snapshots."""

import train
import warp as wp

X0 = wp.array(train.guess_x0, dtype=wp.vec3d, requires_grad=True)


def params():
    return {"x0": X0}


def loss():
    return train.evaluate(X0)


def grad():
    _, g = train.loss_and_grad(X0)
    return {"x0": g}
