"""Probe: the eight coil powers (power, updated in place by warp.optim.Adam); objective = the
printed schedule error after the ramp (PREHEAT_STEPS) and the soak (SOAK_STEPS).

grad() is power.grad after train_step at iteration 0 (what opt.step receives); loss() replays
heat_step in numpy float64 over the whole heating, ramp included (an independent
re-implementation). PROBE_PREHEAT shortens the ramp for both (a horizon sweep).
"""

import os

import numpy as np
import train
import warp as wp

train.PREHEAT_STEPS = int(os.environ.get("PROBE_PREHEAT", str(train.PREHEAT_STEPS)))
target = train.forging_target()
power = wp.full(train.COILS, 5.0, dtype=float, requires_grad=True)


def params():
    return {"power": power}


def grad():
    power.grad.zero_()
    train.train_step(power, target)
    return {"power": power.grad.numpy().astype(np.float64)}


def script_loss():
    return train.train_step(power, target)


def loss():
    n = train.CELLS
    q = np.repeat(power.numpy().astype(np.float64), n // train.COILS)
    dt = np.float64(np.float32(train.DT))
    t = np.zeros(n)
    for _ in range(train.PREHEAT_STEPS + train.SOAK_STEPS):
        left = np.concatenate([t[:1], t[:-1]])
        right = np.concatenate([t[1:], t[-1:]])
        t = t + dt * (30.0 * (left - 2.0 * t + right) + q - 0.8 * t * np.abs(t))
    return float(np.sum((t - target.numpy().astype(np.float64)) ** 2) / n)
