"""Probe: the 12 pump rates (a numpy array, uploaded fresh every iteration); objective = level
misfit after 80 steps + the host-side energy penalty, what train.py prints.

The probe keeps the rates in a wp.array so the labellers can perturb them; grad() uploads them
the way the script does and returns what the numpy step applies at iteration ITERATION (the
parameters are first advanced by the script's own update). loss() replays tank_step in numpy
float64 (an independent re-implementation).
"""

import numpy as np
import train
import warp as wp
from hydro import TankChain

ITERATION = 3
chain = TankChain()
_p = np.full(chain.n, 0.1, dtype=np.float32)
for _ in range(ITERATION):
    _, _g = train.objective_and_grad(chain, _p)
    _p = (_p - 0.05 * _g).astype(np.float32)
pump = wp.array(_p, dtype=float)


def params():
    return {"pump": pump}


def grad():
    _, g = train.objective_and_grad(chain, pump.numpy())
    return {"pump": np.asarray(g, dtype=np.float64)}


def script_loss():
    total, _ = train.objective_and_grad(chain, pump.numpy())
    return total


def loss():
    p = pump.numpy().astype(np.float64)
    area = chain.area.numpy().astype(np.float64)
    h = chain.level0.astype(np.float64)
    dt = np.float64(np.float32(chain.dt))
    pipe = np.float64(np.float32(chain.pipe))
    drain = np.float64(np.float32(chain.drain))
    for _ in range(chain.steps):
        q = p - drain * h
        q[1:] += pipe * (h[:-1] - h[1:])
        q[:-1] += pipe * (h[1:] - h[:-1])
        h = h + dt * q / area
    misfit = np.sum((h - chain.target.numpy().astype(np.float64)) ** 2)
    return float(misfit + train.ENERGY_WEIGHT * np.sum(p**2))
