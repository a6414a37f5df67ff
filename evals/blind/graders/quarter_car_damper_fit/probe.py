"""Probe: per-corner damping coefficients c; loss = heave misfit over the whole bump run.

loss() replays quarter_car_step (progressive damper) and heave_loss in numpy float64; grad() is the
program's tape, what the numpy update in main() consumes at iteration 0.
"""

import numpy as np
import train
import warp as wp
from vehicle.suspension import BETA

C = wp.array(train.c_init, dtype=float, requires_grad=True)


def params():
    return {"c": C}


def loss():
    rig = train.rig
    c = C.numpy().astype(np.float64)
    zs = np.zeros(rig.n)
    vs = np.zeros(rig.n)
    zu = np.zeros(rig.n)
    vu = np.zeros(rig.n)
    frames = list(range(9, rig.steps, 10))
    w = 1.0e4 / (len(frames) * rig.n)
    total = 0.0
    for k in range(rig.steps):
        vrel = vs - vu
        fd = -c * vrel * (1.0 + BETA * vrel * vrel)
        fs = -rig.ks * (zs - zu)
        ft = -rig.kt * (zu - float(rig.road[k]))
        vs = vs + (fs + fd) / rig.ms * rig.dt
        vu = vu + (ft - fs - fd) / rig.mu * rig.dt
        zs = zs + vs * rig.dt
        zu = zu + vu * rig.dt
        if k in frames:
            d = zs - train.logs[frames.index(k)].numpy().astype(np.float64)
            total += w * np.sum(d * d)
    return float(total)


def grad():
    tape = wp.Tape()
    with tape:
        value = train.heave_misfit(C)
    tape.backward(value)
    g = C.grad.numpy().copy()
    tape.zero()
    return {"c": g}
