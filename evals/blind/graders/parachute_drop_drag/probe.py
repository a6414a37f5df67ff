"""Probe: canopy drag coefficients cd (rebuilt from numpy every iteration); objective = summed squared
altitude misfit after 5 s + 5 * sum (cd - 1.2)^2 (the loss the script prints).

loss() recomputes the 250-step descent in float64 numpy (an independent re-implementation of
sim/descent.py + losses.py) from the current contents of params().
"""

import numpy as np
import train
import warp as wp
from sim.descent import RHO_AIR, Jumpers

ITERATION = 2

_args = train.parse_args([])
_rng = np.random.default_rng(_args.seed)
_jumpers = Jumpers()
_z_obs = train.altimeter_log(_jumpers)
_cd_np = _rng.uniform(0.9, 1.5, _jumpers.n).astype(np.float32)
for _ in range(ITERATION):
    _cd_np = _cd_np - _args.lr * train.run_iteration(_jumpers, _cd_np, _z_obs)[1]
_cd = wp.array(_cd_np, dtype=float, requires_grad=True)


def params():
    return {"cd": _cd}


def grad():
    return {"cd": train.run_iteration(_jumpers, _cd.numpy(), _z_obs)[1]}


def script_loss():
    return float(train.run_iteration(_jumpers, _cd.numpy(), _z_obs)[0])


def loss():
    j = _jumpers
    def f32(a):
        return np.float64(np.float32(a))
    cd = _cd.numpy().astype(np.float64)
    k = 0.5 * f32(RHO_AIR) * cd * j.area.numpy().astype(np.float64) / j.mass.numpy().astype(np.float64)
    dt = f32(j.dt)
    g = f32(9.81)
    z = np.full(j.n, f32(j.z0))
    v = np.full(j.n, -30.0)
    for _ in range(j.steps):
        v = v + dt * (-g - k * v * np.abs(v))
        z = z + dt * v
    return float(np.sum((z - _z_obs.numpy().astype(np.float64)) ** 2) + 5.0 * np.sum((cd - f32(1.2)) ** 2))
