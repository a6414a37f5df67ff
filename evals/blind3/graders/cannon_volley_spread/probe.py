"""Probe: the six muzzle velocities (volley.v[0], updated in place by the descend kernel);
objective = burst miss at t = 2 s.

grad() runs Trainer.step() ITERATION times with the learning rate set to 0 (the velocities stay
where params() has them), then replays the graph once more and returns v[0].grad, what descend
receives at iteration ITERATION. loss() replays shell_step in numpy float64 (an independent
re-implementation).
"""

import numpy as np
import train
import volley
import warp as wp

ITERATION = 3
trainer = train.Trainer()


def params():
    return {"v0": trainer.volley.muzzle_velocity}


def grad():
    lr = trainer.lr
    trainer.lr = 0.0
    for _ in range(ITERATION):
        trainer.step()
    trainer.lr = lr
    wp.capture_launch(trainer.graph)
    return {"v0": trainer.volley.muzzle_velocity.grad.numpy().astype(np.float64)}


def loss():
    vol = trainer.volley
    x = vol.x[0].numpy().astype(np.float64)
    v = vol.v[0].numpy().astype(np.float64)
    wind = np.array([vol.wind[0], vol.wind[1], vol.wind[2]], dtype=np.float64)
    drag = np.float64(np.float32(vol.drag))
    dt = np.float64(np.float32(volley.DT))
    g = np.array([0.0, -9.81, 0.0])
    for _ in range(volley.STEPS):
        rel = v - wind
        v = v + dt * (g - drag * np.linalg.norm(rel, axis=1, keepdims=True) * rel)
        x = x + dt * v
    return float(np.sum((x - vol.burst.numpy().astype(np.float64)) ** 2))
