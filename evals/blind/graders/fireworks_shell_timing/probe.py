"""Probe: the muzzle velocities (Trainer.v0, updated in place by warp.optim.Adam); loss = burst miss.

grad() replays main()'s loop with the learning rate set to 0 for ITERATION iterations (so the
parameters stay where params() has them) and returns what opt.step() receives at iteration
ITERATION. loss() replays shell_step in numpy float64.
"""

import numpy as np
import train

ITERATION = 3
trainer = train.Trainer(lr=1.0)


def params():
    return {"v0": trainer.v0}


def loss():
    x = train.mortars.astype(np.float64)
    v = trainer.v0.numpy().astype(np.float64)
    g = np.array([0.0, 0.0, -9.81])
    for _ in range(trainer.steps):
        speed = np.linalg.norm(v, axis=1, keepdims=True)
        v = v + (g - train.K_DRAG * speed * v) * train.DT
        x = x + v * train.DT
    return float(np.sum((x - train.bursts) ** 2))


def grad():
    trainer.v0.grad.zero_()
    lr = trainer.opt.lr
    trainer.opt.lr = 0.0
    for _ in range(ITERATION):
        trainer.step()
    trainer.compute_gradient()
    trainer.opt.lr = lr
    g = trainer.v0.grad.numpy().copy()
    return {"v0": g}
