"""Probe: the 18 motor commands; objective = summed squared placement error after 100 steps.

grad() is the script's loss_and_grad at iteration 0 (what the update applies); loss() replays
the gear, the rail limit and cart_step in numpy float64 (an independent re-implementation).
"""

import numpy as np
import train

gantry = train.Gantry()
command = train.initial_command()


def params():
    return {"command": command}


def grad():
    _, g = train.loss_and_grad(gantry, command)
    return {"command": g.astype(np.float64)}


def script_loss():
    value, _ = train.loss_and_grad(gantry, command)
    return value


def loss():
    gear = np.ones(train.N_CARTS)
    gear[train.GEARED] = train.RATIOS.astype(np.float64)
    f = np.clip(command.numpy().astype(np.float64) * gear, -train.F_MAX, train.F_MAX)
    m = gantry.mass.numpy().astype(np.float64)
    dt = np.float64(np.float32(gantry.dt))
    x = np.zeros(train.N_CARTS)
    v = np.zeros(train.N_CARTS)
    for _ in range(gantry.steps):
        v = v + dt * (f - 4.0 * x - 1.5 * v) / m
        x = x + dt * v
    return float(np.sum((x - gantry.goal.numpy().astype(np.float64)) ** 2))
