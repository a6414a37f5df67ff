"""Probe: the 2 x 2 heating-mat zone powers (numpy in train.py, uploaded fresh each iteration);
objective = the printed comfort error (mean squared deviation at dawn + at dusk).

The probe advances the powers ITERATION iterations with the script's own objective_and_grad and
step, then keeps them in a wp.array; grad() is what the numpy step applies there. loss() replays
conduct/update in numpy float64 over the night and the day (an independent re-implementation).
"""

import os

import numpy as np
import slab
import train
import warp as wp

ITERATION = int(os.environ.get("PROBE_ITERATION", "2"))
t_evening = slab.evening_temperature()
_h = np.full((slab.ZONES, slab.ZONES), 4.0, dtype=np.float32)
for _ in range(ITERATION):
    _, _g = train.objective_and_grad(_h, t_evening)
    _h = np.clip(_h - 0.5 * _g, 0.0, None).astype(np.float32)
heater = wp.array(_h, dtype=float)


def params():
    return {"heater": heater}


def grad():
    _, g = train.objective_and_grad(heater.numpy(), t_evening)
    return {"heater": g.astype(np.float64)}


def script_loss():
    value, _ = train.objective_and_grad(heater.numpy(), t_evening)
    return value


def _phase(t, h, ambient, sun, steps):
    dt = np.float64(np.float32(slab.DT))
    for _ in range(steps):
        flux = np.zeros_like(t)
        qx = 2.0 * (t[1:, :] - t[:-1, :])
        flux[:-1, :] += qx
        flux[1:, :] -= qx
        qy = 2.0 * (t[:, 1:] - t[:, :-1])
        flux[:, :-1] += qy
        flux[:, 1:] -= qy
        d = t - ambient
        t = t + dt * (
            flux + h + sun - np.float64(np.float32(0.4)) * d - np.float64(np.float32(0.05)) * d * np.abs(d)
        )
    return t


def loss():
    n = slab.N
    h = np.kron(heater.numpy().astype(np.float64), np.ones((n // slab.ZONES, n // slab.ZONES)))
    night = _phase(t_evening.astype(np.float64), h, 2.0, 0.0, slab.NIGHT_STEPS)
    day = _phase(night, h, 14.0, 3.0, slab.DAY_STEPS)
    return float(np.mean((night - 18.0) ** 2) + np.mean((day - 22.0) ** 2))
