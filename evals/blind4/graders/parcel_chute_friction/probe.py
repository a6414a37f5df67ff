"""Probe: the six liner friction coefficients (numpy in train.py, uploaded fresh each iteration);
objective = the printed stop error after 240 steps.

grad() is checkpointed_grad's gradient at iteration 0 (what the host step applies); loss() replays
chute_step in numpy float64 over the whole slide (an independent re-implementation).
"""

import math

import chute.physics as ph
import numpy as np
import train
import warp as wp
from chute import Chute, checkpointed_grad

chute = Chute()
mu = wp.array(train.initial_friction(), dtype=float)


def params():
    return {"mu": mu}


def grad():
    m = wp.array(mu.numpy(), dtype=float, requires_grad=True)
    _, g = checkpointed_grad(chute, m)
    return {"mu": np.asarray(g, dtype=np.float64)}


def script_loss():
    m = wp.array(mu.numpy(), dtype=float, requires_grad=True)
    value, _ = checkpointed_grad(chute, m)
    return value


def loss():
    m = mu.numpy().astype(np.float64)
    ang = np.float64(np.float32(ph.ANGLE))
    n = np.array([math.sin(ang), math.cos(ang)])
    t = np.array([math.cos(ang), -math.sin(ang)])
    x = chute.x0.numpy().astype(np.float64)
    v = chute.v0.numpy().astype(np.float64)
    dt = np.float64(np.float32(ph.DT))
    r = np.float64(np.float32(ph.RADIUS))
    for _ in range(ph.STEPS):
        gap = x @ n - r
        fn = np.where(gap < 0.0, np.maximum(-1.0e4 * gap - 150.0 * (v @ n), 0.0), 0.0)
        s = x @ t
        sec = np.clip((s / ph.LENGTH * ph.SECTIONS).astype(int), 0, ph.SECTIONS - 1)
        f = np.array([0.0, -9.81]) + fn[:, None] * n - (m[sec] * fn * np.tanh((v @ t) / 0.2))[:, None] * t
        v = v + dt * f
        x = x + dt * v
    return float(np.sum((x @ t - chute.target.numpy().astype(np.float64)) ** 2))
