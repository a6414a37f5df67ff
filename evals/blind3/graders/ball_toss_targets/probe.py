"""Probe: the eight initial velocities (BallToss.v[0], updated in place by the sgd kernel);
objective = target error after 120 steps.

grad() replays the captured graph once, the way step() does, and returns v[0].grad (what the sgd
kernel applies), then zeroes the tape as step() does. loss() replays ball_step in numpy float64
(an independent re-implementation).
"""

import numpy as np
import train
import warp as wp

toss = train.BallToss()


def params():
    return {"v0": toss.v[0]}


def grad():
    wp.capture_launch(toss.graph)
    g = toss.v[0].grad.numpy().astype(np.float64)
    toss.tape.zero()
    return {"v0": g}


def loss():
    x = toss.x[0].numpy().astype(np.float64)
    v = toss.v[0].numpy().astype(np.float64)
    dt = np.float64(np.float32(train.DT))
    h = np.float64(np.float32(0.02))
    for _ in range(train.STEPS):
        depth = np.log1p(np.exp(-x[:, 1] / h)) * h
        f = -0.3 * v
        f[:, 1] += -9.81 + 2000.0 * depth
        v = v + dt * f
        x = x + dt * v
    return float(np.sum((x - toss.target.numpy().astype(np.float64)) ** 2))
