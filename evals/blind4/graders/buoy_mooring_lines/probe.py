"""Probe: the six mooring line lengths (trainer.length, updated in place by warp.optim.SGD);
objective = the printed station error after 150 steps.

The probe trains ITERATION iterations with the script's own Trainer.step, then runs one more step
with the optimizer's learning rate set to 0 and returns trainer.grads[0], the list entry
opt.step(self.grads) receives at iteration ITERATION. loss() replays buoy_step in numpy float64
(an independent re-implementation).
"""

import os

import mooring as mm
import numpy as np
import train

ITERATION = int(os.environ.get("PROBE_ITERATION", "3"))
trainer = train.Trainer()
for _ in range(ITERATION):
    trainer.step()


def params():
    return {"length": trainer.length}


def grad():
    lr = trainer.opt.lr
    trainer.opt.lr = 0.0
    trainer.step()
    trainer.opt.lr = lr
    return {"length": trainer.grads[0].numpy().astype(np.float64)}


def script_loss():
    return float(trainer.mooring.drift(trainer.length).numpy()[0])


def loss():
    m = trainer.mooring
    L = trainer.length.numpy().astype(np.float64)
    anchor = m.anchor.numpy().astype(np.float64)
    x = m.x0.numpy().astype(np.float64)
    v = np.zeros_like(x)
    cur = np.array([0.5, 0.0, 0.0])
    dt = np.float64(np.float32(mm.DT))
    for _ in range(mm.STEPS):
        d = x - anchor
        r = np.linalg.norm(d, axis=1, keepdims=True)
        tension = mm.K_LINE * (r - L[:, None]) * d / r
        rel = cur - v
        drag = np.float64(np.float32(0.8)) * np.linalg.norm(rel, axis=1, keepdims=True) * rel
        a = np.array([0.0, 0.0, mm.LIFT]) - tension + drag - 0.5 * v
        v = v + dt * a
        x = x + dt * v
    return float(np.sum((x - m.station.numpy().astype(np.float64)) ** 2))
