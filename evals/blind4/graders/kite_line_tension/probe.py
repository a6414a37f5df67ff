"""Probe: the six lift coefficients (pilot.cl, updated in place by warp.optim.Adam); objective = the
printed height error (integrated over the 180 steps).

The probe trains ITERATION iterations with the script's own Pilot.step, then runs one more step
with the optimizer's learning rate set to 0 and returns the gradient list entry opt.step received
(recorded by wrapping opt.step, since the step zeroes the tape right after). loss() replays
line_forces/advance in numpy float64 (an independent re-implementation).
"""

import os

import kite as km
import numpy as np
import train

ITERATION = int(os.environ.get("PROBE_ITERATION", "3"))
pilot = train.Pilot()
for _ in range(ITERATION):
    pilot.step()
_received = []
_opt_step = pilot.opt.step


def _recording_step(grads):
    _received.append(grads[0].numpy().astype(np.float64).copy())
    _opt_step(grads)


pilot.opt.step = _recording_step


def params():
    return {"cl": pilot.cl}


def grad():
    lr = pilot.opt.lr
    pilot.opt.lr = 0.0
    pilot.step()
    pilot.opt.lr = lr
    return {"cl": _received[-1]}


def script_loss():
    return float(pilot.kite.flight_error(pilot.cl).numpy()[0])


def _unit(d):
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def loss():
    cl = pilot.cl.numpy().astype(np.float64)
    x = pilot.kite.x0.numpy().astype(np.float64)
    v = np.zeros_like(x)
    n = km.NODES
    dt = np.float64(np.float32(km.DT))
    m = np.full(n, np.float64(np.float32(0.02)))
    m[-1] = np.float64(np.float32(0.3))
    total = 0.0
    for step in range(km.STEPS):
        d = x[:-1] - x[1:]
        ln = np.linalg.norm(d, axis=1, keepdims=True)
        fs = 400.0 * (ln - km.SEG) * d / ln
        force = np.zeros_like(x)
        force[1:] += fs
        force[:-1] -= fs
        f = force + np.stack([np.zeros(n), -9.81 * m], 1) - np.float64(np.float32(0.05)) * v
        rel = np.array([km.WIND, 0.0]) - v[-1]
        q = 0.5 * np.float64(np.float32(1.2)) * np.float64(np.float32(0.6)) * rel @ rel
        w = step * km.WINDOWS // km.STEPS
        top = (
            force[-1]
            + np.array([0.0, -9.81 * m[-1]])
            + q * cl[w] * np.array([-rel[1], rel[0]]) / np.linalg.norm(rel)
        )
        f[-1] = top + np.float64(np.float32(0.1)) * q * rel / np.linalg.norm(rel)
        vn = v + dt * f / m[:, None]
        vn[0] = v[0]
        xn = x + dt * vn
        xn[0] = x[0]
        x, v = xn, vn
        z_ref = np.float64(np.float32(8.5 + 1.5 * step / km.STEPS))
        total += dt * (x[-1, 1] - z_ref) ** 2
    return float(total)
