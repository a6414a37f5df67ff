"""Probe: the per-pendulum damping array (updated in place by the sgd_update kernel); loss = encoder misfit.

loss() replays the swing kernel in numpy float64; grad() is the program's tape, what sgd_update
consumes at iteration 0.
"""

import fit_damping as fd
import numpy as np


def params():
    return {"damping": fd.damping}


def loss():
    bank = fd.bank
    c = fd.damping.numpy().astype(np.float64)
    gl = bank.g_over_l.numpy().astype(np.float64)
    th = bank.theta0.astype(np.float64)
    om = np.zeros_like(th)
    frames = list(range(fd.EVERY, bank.steps + 1, fd.EVERY))
    total = 0.0
    for k in range(1, bank.steps + 1):
        om = om + bank.dt * (-gl * np.sin(th) - c * om)
        th = th + bank.dt * om
        if k in frames:
            meas = fd.measurements[frames.index(k)].numpy().astype(np.float64)
            total += np.sum((th - meas) ** 2)
    return float(total / (len(frames) * bank.n))


def grad():
    tape, _ = fd.backward(fd.damping)
    g = fd.damping.grad.numpy().copy()
    tape.zero()
    return {"damping": g}
