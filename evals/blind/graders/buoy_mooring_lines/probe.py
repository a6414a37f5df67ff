"""Probe: the 12 mooring-line rest lengths; loss = station error averaged over the last 25 steps.

loss() replays buoy_step (softplus line tension, quadratic + linear current drag) in numpy float64;
grad() is the program's tape with its hand-written softplus adjoint, what main() consumes at iteration 0.
"""

import numpy as np
import train
import warp as wp

REST = wp.array(train.rest_init, dtype=float, requires_grad=True)


def _softplus(x, beta):
    z = beta * x
    return (np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))) / beta


def params():
    return {"rest": REST}


def loss():
    f = train.field
    rest = REST.numpy().astype(np.float64).reshape(f.n, 4)
    anchors = f.anchors.numpy().astype(np.float64).reshape(f.n, 4, 3)
    cur = np.array([f.current[0], f.current[1], f.current[2]], dtype=np.float64)
    st = train.station.numpy().astype(np.float64)
    x = f.x0.astype(np.float64)
    v = np.zeros_like(x)
    total = 0.0
    for k in range(f.steps):
        force = np.zeros_like(x)
        force[:, 2] += f.lift
        for j in range(4):
            d = x - anchors[:, j]
            ln = np.linalg.norm(d, axis=1)
            t = f.k_line * _softplus(ln - rest[:, j], f.beta)
            force -= (t / ln)[:, None] * d
        u = cur - v
        force += f.c_quad * np.linalg.norm(u, axis=1)[:, None] * u + f.c_lin * u
        v = v + force * f.dt
        x = x + v * f.dt
        if k >= f.steps - f.window:
            total += np.sum((x - st) ** 2) / (f.window * f.n)
    return float(total)


def grad():
    tape = wp.Tape()
    with tape:
        value = train.station_loss(REST)
    tape.backward(value)
    g = REST.grad.numpy().copy()
    tape.zero()
    return {"rest": g}
