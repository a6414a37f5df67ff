"""Probe: the eight damping gains; objective = residual swing after all 160 steps (4 segments).

grad() is crane.checkpoint.loss_and_grad at iteration 0: the summed gain gradients of the four
segment tapes, what the update applies. loss() replays swing_step over the full horizon in numpy
float64 (an independent re-implementation).
"""

import numpy as np
import train
from crane.checkpoint import loss_and_grad
from crane.swing import CraneYard

yard = CraneYard()
gain = train.initial_gain(yard.n)


def params():
    return {"gain": gain}


def grad():
    _, g = loss_and_grad(yard, gain)
    return {"gain": g.astype(np.float64)}


def script_loss():
    value, _ = loss_and_grad(yard, gain)
    gain.grad.zero_()
    return value


def loss():
    k = gain.numpy().astype(np.float64)
    gl = yard.g_over_l.numpy().astype(np.float64)
    th = yard.theta0.astype(np.float64)
    om = yard.omega0.astype(np.float64)
    dt = np.float64(np.float32(yard.dt))
    for _ in range(yard.steps):
        alpha = -gl * np.sin(th) - k * om * (1.0 + 0.5 * th * th)
        om = om + dt * alpha
        th = th + dt * om
    return float(np.sum(th * th + 0.1 * om * om))
