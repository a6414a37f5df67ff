"""Probe: per-satellite constant thrusts; loss is the slot error after the whole 4-segment rollout.

loss() re-implements the orbit step in numpy float64 (same update as constellation/dynamics.py)
so finite differences are not swamped by float32 rounding; grad() is the program's checkpointed
backward, i.e. what the numpy update in main() consumes at iteration 0.
"""

import numpy as np
import train
import warp as wp

THRUST = wp.array(np.zeros((train.N_SAT, 2), dtype=np.float32), dtype=wp.vec2, requires_grad=True)


def params():
    return {"thrust": THRUST}


def loss():
    sys_ = train.system
    u = THRUST.numpy().astype(np.float64)
    q = train.q0.astype(np.float64)
    qd = train.qd0.astype(np.float64)
    for _ in range(train.rollout.segments * train.rollout.steps):
        r2 = np.sum(q * q, axis=1, keepdims=True)
        a = -sys_.gm / (r2 * np.sqrt(r2)) * q + u - sys_.drag * qd
        qd = qd + a * sys_.dt
        q = q + qd * sys_.dt
    d = q - train.slots.numpy().astype(np.float64)
    return float(100.0 * np.sum(d * d))


def grad():
    _, g = train.gradient(THRUST)
    return {"thrust": g}
