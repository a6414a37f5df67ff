"""Probe: per-link stiffness k (rebuilt from numpy every iteration); objective = final shape misfit.

loss() recomputes the full 80-step rollout in float64 numpy from the current contents of params()
(an independent re-implementation of sim/chain.py, used only so FD is not swamped by float32).
"""

import numpy as np
import train
import warp as wp
from sim import Chain

ITERATION = 2

_args = train.parse_args([])
_chain = Chain()
_target = train.recorded_shape(_chain)
_k_np = train.initial_stiffness(_chain, _args.seed)
for _ in range(ITERATION):
    _, _g = train.loss_and_grad(_chain, _k_np, _target)
    _k_np = _k_np - _args.lr * _g
_k = wp.array(_k_np, dtype=float, requires_grad=True)


def params():
    return {"k": _k}


def grad():
    _, g = train.loss_and_grad(_chain, _k.numpy(), _target)
    return {"k": g}


def script_loss():
    ln, _ = train.loss_and_grad(_chain, _k.numpy(), _target)
    return float(ln)


def loss():
    c = _chain
    k = _k.numpy().astype(np.float64)
    x = c.x0.numpy().astype(np.float64)
    v = np.zeros_like(x)
    inv_m = c.inv_m.numpy().astype(np.float64)
    ends = c.ends.numpy()
    rest = c.rest.numpy().astype(np.float64)
    g = np.array([0.0, -9.81, 0.0])
    dt = np.float64(np.float32(c.dt))
    kd = np.float64(np.float32(c.kd))
    for _ in range(c.steps):
        f = np.zeros_like(x)
        for s, (a, b) in enumerate(ends):
            d = x[b] - x[a]
            ln = np.sqrt(d @ d)
            n = d / ln
            fs = (k[s] * (ln - rest[s]) + kd * ((v[b] - v[a]) @ n)) * n
            f[a] += fs
            f[b] -= fs
        grav = np.where(inv_m > 0, 1.0, 0.0)[:, None] * g
        v = v + dt * (f * inv_m[:, None] + grav)
        x = x + dt * v
    t = _target.numpy().astype(np.float64)
    return float(np.sum((x - t) ** 2))
