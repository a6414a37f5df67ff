"""Probe: the release positions x0 (float64) are optimized; the loss is the landing error after all steps."""

import train
import warp as wp

X0 = wp.array(train.start_np, dtype=wp.vec2d, requires_grad=True)


def params():
    return {"x0": X0}


def loss():
    _, value = train.run(X0, with_grad=False)
    return float(value.numpy()[0])


def grad():
    tape, _ = train.run(X0)
    g = X0.grad.numpy().copy()
    tape.zero()
    return {"x0": g}
