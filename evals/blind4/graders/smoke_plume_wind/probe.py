"""Probe: the 20 per-row wind speeds (numpy in train.py, uploaded fresh each iteration);
objective = the printed plume misfit after 30 advection steps.

grad() is loss_and_grad's gradient at iteration 0 (what the host step applies); loss() replays
advect in numpy float64 (an independent re-implementation, bilinear back-tracing with the same
clamping) against the script's own target.
"""

import numpy as np
import plume as pl
import train
import warp as wp

plume = pl.Plume()
wind = wp.array(np.ones(pl.NY, dtype=np.float32), dtype=float)


def params():
    return {"wind": wind}


def grad():
    _, g = train.loss_and_grad(plume, wind.numpy())
    return {"wind": g.astype(np.float64)}


def script_loss():
    value, _ = train.loss_and_grad(plume, wind.numpy())
    return value


def loss():
    w = wind.numpy().astype(np.float64)
    dt = np.float64(np.float32(pl.DT))
    rise = np.float64(np.float32(pl.RISE))
    ii, jj = np.meshgrid(np.arange(pl.NX), np.arange(pl.NY), indexing="ij")
    x = np.clip(ii - dt * w[jj], 0.0, np.float64(np.float32(pl.NX - 1.001)))
    y = np.clip(jj - dt * rise, 0.0, np.float64(np.float32(pl.NY - 1.001)))
    i0 = np.floor(x).astype(int)
    j0 = np.floor(y).astype(int)
    fx, fy = x - i0, y - j0
    src = (jj == 1) & (ii >= 4) & (ii <= 6)
    d = np.zeros((pl.NX, pl.NY))
    for _ in range(pl.STEPS):
        a = (1 - fx) * d[i0, j0] + fx * d[i0 + 1, j0]
        b = (1 - fx) * d[i0, j0 + 1] + fx * d[i0 + 1, j0 + 1]
        s = (1 - fy) * a + fy * b + np.where(src, dt * 2.0, 0.0)
        d = np.float64(np.float32(0.995)) * s
    return float(np.sum((d - plume.target.numpy().astype(np.float64)) ** 2))
