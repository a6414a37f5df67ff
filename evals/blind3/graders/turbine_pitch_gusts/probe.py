"""Probe: blade pitch (one wp.array, re-assigned from numpy by the update); objective = the speed
error summed over the four gust frames, which is what train.py prints and what one update descends.

grad() is gradient_step()'s grad_accum at iteration 0 (the vector the update applies); loss()
replays spin_step for every gust in numpy float64 (an independent re-implementation).
"""

import numpy as np
import train
from rotor import RotorModel

model = RotorModel()
pitch = train.initial_pitch(model.n)


def params():
    return {"pitch": pitch}


def grad():
    _, g = train.gradient_step(model, pitch)
    return {"pitch": g.astype(np.float64)}


def script_loss():
    total, _ = train.gradient_step(model, pitch)
    pitch.grad.zero_()
    return total


def loss():
    p = pitch.numpy().astype(np.float64)
    target = model.target.numpy().astype(np.float64)
    dt = np.float64(np.float32(model.dt))
    total = 0.0
    for wind in train.GUSTS:
        w = np.zeros_like(p)
        for _ in range(model.steps):
            torque = 0.8 * wind * wind * np.sin(2.0 * p) - 0.05 * w * np.abs(w) - 0.3 * w
            w = w + dt * torque
        total += float(np.sum((w - target) ** 2))
    return total
