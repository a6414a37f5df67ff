"""Probe: coeffs, a (5,) vec3 array (entry speed ~ +-15 m/s, smoothing floor ~ 0.05 m/s, air drag
~ 4e-3), rebuilt from numpy every iteration; objective = summed squared stop-position error.

loss() recomputes the 700-step runout in float64 numpy (an independent re-implementation of the
intended physics: Coulomb friction mu*g*v/sqrt(v^2 + floor^2) with floor = max(coeffs.y, 0.01), plus
drag coeffs.z*v*|v|) from the current contents of params().
"""

import numpy as np
import train
import warp as wp
from sim.runout import Runout

ITERATION = 1

_args = train.parse_args([])
_runout = Runout()
_stops = wp.array(train.STOPS, dtype=float)
_scale = np.array([1.0, 2e-1, 1e-5], dtype=np.float32)


def _loss_grad(c_np):
    # the body of train.main()'s loop
    coeffs = wp.array(c_np, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        loss = train.evaluate(_runout, coeffs, _stops)
    tape.backward(loss)
    return float(loss.numpy()[0]), coeffs.grad.numpy()


_c = train.first_guess(_args.seed)
for _ in range(ITERATION):
    _c = _c - _args.lr * _scale * _loss_grad(_c)[1]
    _c[:, 1] = np.maximum(_c[:, 1], 0.01)
_coeffs = wp.array(_c, dtype=wp.vec3, requires_grad=True)


def params():
    return {"coeffs": _coeffs}


def grad():
    return {"coeffs": _loss_grad(_coeffs.numpy())[1]}


def script_loss():
    return _loss_grad(_coeffs.numpy())[0]


def loss():
    c = _coeffs.numpy().astype(np.float64)
    r = _runout
    dt = np.float64(np.float32(r.dt))
    mu_g = np.float64(np.float32(r.mu_g))
    floor = np.maximum(c[:, 1], np.float64(np.float32(0.01)))
    x = np.zeros(r.n)
    v = c[:, 0].copy()
    for _ in range(r.steps):
        v = v - dt * (mu_g * v / np.sqrt(v * v + floor * floor) + c[:, 2] * v * np.abs(v))
        x = x + dt * v
    return float(np.sum((x - train.STOPS.astype(np.float64)) ** 2))
