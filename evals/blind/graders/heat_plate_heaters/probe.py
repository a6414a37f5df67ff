"""Probe: heater powers q (rebuilt from numpy every iteration); objective = summed squared sensor error.

The script backpropagates the summed error (tape.backward(loss)) and prints loss/8 as the "mean sq
sensor error"; loss() is the summed objective the update descends, recomputed in float64 numpy (an
independent re-implementation of sim/plate.py + losses.py) from the current contents of params().
"""

import numpy as np
import train
import warp as wp
from losses import sensor_loss
from sim.plate import Plate

ITERATION = 1

_args = train.parse_args([])
_rng = np.random.default_rng(_args.seed)
_plate = Plate()
_sensors = wp.array(train.SENSORS, dtype=wp.int32)
_readings = train.make_readings(_plate)


def _loss_grad(q_np):
    # the body of train.main()'s loop
    q = wp.array(q_np, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        T = _plate.run(q)
        loss = sensor_loss(T, _sensors, _readings)
    tape.backward(loss)
    return float(loss.numpy()[0]), q.grad.numpy()


_q_np = _rng.uniform(0.2, 1.2, size=len(_plate.heater_cells)).astype(np.float32)
for _ in range(ITERATION):
    _q_np = _q_np - _args.lr * _loss_grad(_q_np)[1]
_q = wp.array(_q_np, dtype=float, requires_grad=True)


def params():
    return {"q": _q}


def grad():
    return {"q": _loss_grad(_q.numpy())[1]}


def script_loss():
    return _loss_grad(_q.numpy())[0]


def loss():
    p = _plate
    q = _q.numpy().astype(np.float64)
    n = p.n
    a = np.float64(np.float32(p.alpha))
    dt = np.float64(np.float32(p.dt))
    src = np.zeros((n, n))
    src[p.heater_cells[:, 0], p.heater_cells[:, 1]] = q
    T = np.zeros((n, n))
    for _ in range(p.steps):
        Tn = np.zeros((n, n))
        lap = T[:-2, 1:-1] + T[2:, 1:-1] + T[1:-1, :-2] + T[1:-1, 2:] - 4.0 * T[1:-1, 1:-1]
        Tn[1:-1, 1:-1] = T[1:-1, 1:-1] + dt * (a * lap + src[1:-1, 1:-1])
        T = Tn
    r = T[train.SENSORS[:, 0], train.SENSORS[:, 1]] - _readings.numpy().astype(np.float64)
    return float(np.sum(r * r))
