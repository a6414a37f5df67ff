"""Probe: the eight launch velocities (v0, updated in place by the sgd kernel); objective = the
printed burst miss after 60 steps.

grad() runs train_step ITERATION times with lr 0 (the velocities stay put), then once more and
returns v0.grad as sgd reads it at iteration ITERATION. loss() replays flight_step in numpy float64
(an independent re-implementation).
"""

import os

import numpy as np
import shells as sh
import train

ITERATION = int(os.environ.get("PROBE_ITERATION", "3"))
shells = sh.Shells()
v0 = train.initial_velocities()


def params():
    return {"v0": v0}


def grad():
    for _ in range(ITERATION + 1):
        train.train_step(shells, v0, 0.0)
    return {"v0": v0.grad.numpy().astype(np.float64)}


def script_loss():
    return float(shells.miss(v0).numpy()[0])


def loss():
    x = shells.x0.numpy().astype(np.float64)
    v = v0.numpy().astype(np.float64)
    dt = np.float64(np.float32(sh.DT))
    drag = np.float64(np.float32(sh.DRAG))
    g = np.array([0.0, -9.81, 0.0])
    for _ in range(sh.STEPS):
        v = v + dt * (g - drag * np.linalg.norm(v, axis=1, keepdims=True) * v)
        x = x + dt * v
    return float(np.sum((x - shells.target.numpy().astype(np.float64)) ** 2))
