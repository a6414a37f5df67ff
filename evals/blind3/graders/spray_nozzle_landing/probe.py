"""Probe: the 24 nozzle exit speeds; objective = landing misfit of landed droplets + airborne penalty.

grad() is the script's loss_and_grad at iteration 0 (what the update applies); loss() evaluates
the closed-form flight and both loss terms in numpy float64 (an independent re-implementation).
"""

import numpy as np
import spray
import train

bar = spray.SprayBar()
speed = train.initial_speed()


def params():
    return {"speed": speed}


def grad():
    _, g, _ = train.loss_and_grad(bar, speed)
    return {"speed": g.astype(np.float64)}


def script_loss():
    value, _, _ = train.loss_and_grad(bar, speed)
    return value


def loss():
    s = speed.numpy().astype(np.float64)
    a = bar.angle.numpy().astype(np.float64)
    k = np.float64(np.float32(bar.drag))
    t = np.float64(np.float32(bar.t_end))
    e = np.exp(-k * t)
    x = s * np.cos(a) / k * (1.0 - e)
    y = 1.5 + (s * np.sin(a) + 9.81 / k) / k * (1.0 - e) - 9.81 / k * t
    bed = bar.bed_x.numpy().astype(np.float64)
    landed = y <= 0.0
    return float(np.sum((x[landed] - bed[landed]) ** 2) + np.sum(0.2 * y[~landed] ** 2))
