"""Probe: the 16 heater band powers; objective = the printed profile MSE (mean over 48 cells).

grad() is mse_and_grad's gradient at iteration 0 (what the update applies); loss() replays
conduct in numpy float64 and returns the mean squared error (an independent re-implementation).
"""

import numpy as np
import rod as rodmod
import train

rod = rodmod.Rod()
power = train.initial_power()


def params():
    return {"power": power}


def grad():
    _, g = train.mse_and_grad(rod, power)
    return {"power": g.astype(np.float64)}


def script_loss():
    mse, _ = train.mse_and_grad(rod, power)
    return mse


def loss():
    p = np.repeat(power.numpy().astype(np.float64), 3)
    t = np.zeros(rodmod.CELLS)
    dt = np.float64(np.float32(rod.dt))
    a, k = rod.alpha, rod.loss_coeff
    for _ in range(rod.steps):
        left = np.concatenate([t[:1], t[:-1]])
        right = np.concatenate([t[1:], t[-1:]])
        t = t + dt * (a * (left - 2.0 * t + right) + p - k * t)
    return float(np.mean((t - rod.target.numpy().astype(np.float64)) ** 2))
