"""Probe: per-crate shove forces; the loss is the placement error after the full slide.

loss() replays the crate update of physics.py in numpy float64 (regularized Coulomb friction,
semi-implicit Euler) so FD is not limited by float32 rounding; grad() is the program's own tape,
i.e. what the numpy update in main() consumes at iteration 0.
"""

import numpy as np
import train
import warp as wp

PUSH = wp.array(train.init_push, dtype=wp.vec2, requires_grad=True)


def params():
    return {"push": PUSH}


def loss():
    f = train.floor
    u = PUSH.numpy().astype(np.float64)
    x = train.start.astype(np.float64)
    v = np.zeros_like(x)
    for k in range(f.steps):
        on = 1.0 if k < f.push_steps else 0.0
        s = np.sqrt(np.sum(v * v, axis=1, keepdims=True) + f.eps * f.eps)
        v = v + (u * on - f.mu_g * v / s) * f.dt
        x = x + v * f.dt
    d = x - train.goal_np.astype(np.float64)
    return float(np.sum(d * d))


def grad():
    tape = wp.Tape()
    with tape:
        value = train.objective(PUSH)
    tape.backward(value)
    g = PUSH.grad.numpy().copy()
    tape.zero()
    return {"push": g}
