"""Probe: the ten throw velocities (fit.v0, updated in place by the descend kernel); objective = the
printed objective, half the summed squared miss after 160 steps.

The probe trains ITERATION iterations with the script's own Fit.step, then runs one more step
with lr 0 and returns v0.grad, what descend read at iteration ITERATION (the tape is reset at the
start of the next step, not after). loss() replays hail_step in numpy float64 (an independent
re-implementation) and halves the squared miss.
"""

import os

import hail.roof as roof
import hail.sim as hs
import numpy as np
import train

ITERATION = int(os.environ.get("PROBE_ITERATION", "3"))
fit = train.Fit()
for _ in range(ITERATION):
    fit.step()


def params():
    return {"v0": fit.v0}


def grad():
    lr = fit.lr
    fit.lr = 0.0
    fit.step()
    fit.lr = lr
    return {"v0": fit.v0.grad.numpy().astype(np.float64)}


def script_loss():
    return 0.5 * float(fit.sim.miss(fit.sim.rollout(fit.v0)).numpy()[0])


def loss():
    n = np.array([-0.5, 0.8660254], dtype=np.float32).astype(np.float64)
    x = fit.sim.x0.numpy().astype(np.float64)
    v = fit.v0.numpy().astype(np.float64)
    dt = np.float64(np.float32(hs.DT))
    r = np.float64(np.float32(roof.RADIUS))
    for _ in range(hs.STEPS):
        f = (
            np.array([0.0, -9.81])
            - np.float64(np.float32(0.05)) * np.linalg.norm(v, axis=1, keepdims=True) * v
        )
        gap = x @ n - r
        fc = np.where(gap < 0.0, -4000.0 * gap - 20.0 * (v @ n), 0.0)
        f = f + fc[:, None] * n
        v = v + dt * f
        x = x + dt * v
    return float(0.5 * np.sum((x - fit.sim.gutter.numpy().astype(np.float64)) ** 2))
