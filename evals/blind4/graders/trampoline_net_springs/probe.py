"""Probe: the 40 spring stiffnesses (k, a fresh wp.array each iteration in train.py); objective =
the printed sag error after 150 steps.

grad() records Net.sag on a tape the way main() does and returns k.grad at iteration 0 (what the
host step applies); loss() replays spring_forces/integrate in numpy float64 (an independent
re-implementation).
"""

import net as nm
import numpy as np
import warp as wp

net = nm.Net()
k = wp.array(np.full(net.n_springs, 60.0, dtype=np.float32), dtype=float, requires_grad=True)


def params():
    return {"k": k}


def grad():
    k.grad.zero_()
    tape = wp.Tape()
    with tape:
        value = net.sag(k)
    tape.backward(value)
    return {"k": k.grad.numpy().astype(np.float64)}


def script_loss():
    return float(net.sag(k).numpy()[0])


def loss():
    kk = k.numpy().astype(np.float64)
    sp = net.springs.numpy()
    im = net.inv_mass.numpy().astype(np.float64)
    x = net.x0.astype(np.float64)
    v = np.zeros_like(x)
    rest = np.float64(np.float32(net.rest))
    dt = np.float64(np.float32(nm.DT))
    free = im > 0
    for _ in range(nm.STEPS):
        d = x[sp[:, 1]] - x[sp[:, 0]]
        ln = np.linalg.norm(d, axis=1, keepdims=True)
        fs = kk[:, None] * (ln - rest) * d / ln
        f = np.zeros_like(x)
        np.add.at(f, sp[:, 0], fs)
        np.add.at(f, sp[:, 1], -fs)
        a = f * im[:, None] + np.array([0.0, 0.0, -9.81]) - 3.0 * v
        vn = np.where(free[:, None], v + dt * a, v)
        x = np.where(free[:, None], x + dt * vn, x)
        v = vn
    return float(np.sum((x[:, 2] - net.target.numpy().astype(np.float64)) ** 2))
