"""Probe: per-spring stiffness k (72 springs, rebuilt from numpy every iteration); objective = summed
squared drape error of the final state.

loss() recomputes the 120-step rollout in float64 numpy (an independent re-implementation of
sim/cloth.py + losses.py) from the current contents of params().
"""

import numpy as np
import train
import warp as wp
from losses import drape_loss
from sim.cloth import ClothPatch

ITERATION = 0

_args = train.parse_args([])
_rng = np.random.default_rng(_args.seed)
_cloth = ClothPatch()
_target = train.captured_drape(_cloth)


def _loss_grad(k_np):
    # the body of train.main()'s loop
    k = wp.array(k_np, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        x = _cloth.simulate(k)
        loss = drape_loss(x, _target)
    tape.backward(loss)
    return float(loss.numpy()[0]), k.grad.numpy()


_k_np = _rng.uniform(25.0, 55.0, _cloth.num_springs).astype(np.float32)
for _ in range(ITERATION):
    _k_np = np.clip(_k_np - _args.lr * _loss_grad(_k_np)[1], 1.0, None)
_k = wp.array(_k_np, dtype=float, requires_grad=True)


def params():
    return {"k": _k}


def grad():
    return {"k": _loss_grad(_k.numpy())[1]}


def script_loss():
    return _loss_grad(_k.numpy())[0]


def loss():
    c = _cloth
    k = _k.numpy().astype(np.float64)
    idx = c.idx.numpy()
    rest = c.rest.numpy().astype(np.float64)
    free = 1.0 - c.pinned.numpy().astype(np.float64)
    def f32(a):
        return np.float64(np.float32(a))
    wind = np.array([1.5, 0.0, 0.5])
    g = np.array([0.0, f32(-9.81), 0.0])
    mass, drag, dt = f32(c.mass), f32(c.drag), f32(c.dt)
    x = c.pos0.astype(np.float64)
    v = np.zeros_like(x)
    for _ in range(c.steps):
        d = x[idx[:, 1]] - x[idx[:, 0]]
        ln = np.linalg.norm(d, axis=1)
        fs = (k * (ln - rest) / ln)[:, None] * d
        f = np.zeros_like(x)
        np.add.at(f, idx[:, 0], fs)
        np.add.at(f, idx[:, 1], -fs)
        a = f / mass + g + drag * (wind - v)
        v = (v + dt * a) * free[:, None]
        x = x + dt * v
    t = _target.numpy().astype(np.float64)
    return float(np.sum((x - t) ** 2))
