"""Probe: the 15 section stiffnesses (numpy in train.py, uploaded fresh each iteration);
objective = the printed objective (sag error after 200 steps + smoothness penalty).

grad() is loss_and_grad's gradient at iteration 0 (what the host step applies); loss() replays
spring_forces/integrate in numpy float64 (an independent re-implementation).
"""

import numpy as np
import rope.model as rm
import train
import warp as wp
from rope import Rope

rope = Rope()
k = wp.array(train.initial_stiffness(), dtype=float)


def params():
    return {"k": k}


def grad():
    _, g = train.loss_and_grad(rope, k.numpy())
    return {"k": g.astype(np.float64)}


def script_loss():
    value, _ = train.loss_and_grad(rope, k.numpy())
    return value


def loss():
    kk = k.numpy().astype(np.float64)
    x = rope.x0.numpy().astype(np.float64)
    v = np.zeros_like(x)
    rest = np.float64(np.float32(rope.rest))
    dt = np.float64(np.float32(rm.DT))
    m = np.float64(np.float32(rm.MASS))
    for _ in range(rm.STEPS):
        d = x[1:] - x[:-1]
        ln = np.linalg.norm(d, axis=1, keepdims=True)
        fs = kk[:, None] * (ln - rest) * d / ln
        f = np.zeros_like(x)
        f[:-1] += fs
        f[1:] -= fs
        a = f / m + np.array([0.0, -9.81]) - rm.DAMP * v
        vn = v + dt * a
        vn[0] = v[0]
        vn[-1] = v[-1]
        xn = x + dt * vn
        xn[0] = x[0]
        xn[-1] = x[-1]
        x, v = xn, vn
    sag = np.sum((x[:, 1] - rope.target.numpy().astype(np.float64)) ** 2)
    return float(sag + np.float64(np.float32(train.SMOOTH)) * np.sum(np.diff(kk) ** 2))
