"""Probe: the four kick coefficients; objective = (mean energy after KICKS kicks - target)^2.

HORIZON (default: the script's 60 kicks) can be lowered to check the same code on a horizon where
finite differences resolve. loss() replays the kicked rotors in numpy float64; grad() is the
script's own tape (loss_and_grad), what the update normalizes and applies.
"""

import numpy as np
import train
import warp as wp

HORIZON = train.KICKS
coeff = wp.array(np.array([1.4, 0.3, -0.2, 0.1], dtype=np.float32), dtype=float, requires_grad=True)


def params():
    return {"coeff": coeff}


def grad():
    _, _, g = train.loss_and_grad(coeff, HORIZON)
    return {"coeff": g.astype(np.float64)}


def script_loss():
    loss, _, _ = train.loss_and_grad(coeff, HORIZON)
    return loss


def loss():
    c = coeff.numpy().astype(np.float64)
    th, p = train.initial_state()
    th = th.astype(np.float64)
    p = p.astype(np.float64)
    for _ in range(HORIZON):
        force = sum(c[k] * np.sin((k + 1) * th) for k in range(train.N_HARMONICS))
        p = p + force
        th = th + p
    e = np.mean(0.5 * p * p)
    return float((e - train.TARGET_ENERGY) ** 2)
