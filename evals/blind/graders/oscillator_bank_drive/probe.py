"""Probe: damping and amp (rebuilt from numpy every iteration); objective = the taped loss
(sum of (x_T - 1)^2 over the bank + 0.1 * sum (c - 0.5)^2). The script prints the mean x_T, not the loss.

loss() recomputes the 150-step rollout in float64 numpy (an independent re-implementation of
sim/oscillators.py + losses.py) from the current contents of params().
"""

import numpy as np
import train
import warp as wp
from sim.oscillators import OscillatorBank

ITERATION = 2

_args = train.parse_args([])
_rng = np.random.default_rng(_args.seed)
_bank = OscillatorBank()


def _loss_grad(c_np, a_np):
    # the body of train.main()'s loop
    damping = wp.array(c_np, dtype=float, requires_grad=True)
    amp = wp.array(a_np, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        _, loss = train.objective(_bank, damping, amp)
    tape.backward(loss)
    return float(loss.numpy()[0]), damping.grad.numpy(), amp.grad.numpy()


_c = _rng.uniform(0.3, 0.8, _bank.n).astype(np.float32)
_a = _rng.uniform(5.0, 10.0, _bank.n).astype(np.float32)
for _ in range(ITERATION):
    _, gc, ga = _loss_grad(_c, _a)
    _c = _c - _args.lr * gc
    _a = _a - _args.lr * ga
_damping = wp.array(_c, dtype=float, requires_grad=True)
_amp = wp.array(_a, dtype=float, requires_grad=True)


def params():
    return {"damping": _damping, "amp": _amp}


def grad():
    _, gc, ga = _loss_grad(_damping.numpy(), _amp.numpy())
    return {"damping": gc, "amp": ga}


def script_loss():
    return _loss_grad(_damping.numpy(), _amp.numpy())[0]


def loss():
    b = _bank
    c = _damping.numpy().astype(np.float64)
    a = _amp.numpy().astype(np.float64)
    w = b.omega.numpy().astype(np.float64)
    dt = np.float64(np.float32(b.dt))
    x = np.zeros(b.n)
    v = np.zeros(b.n)
    for s in range(b.steps):
        t = np.float64(np.float32(s * b.dt))
        acc = a * np.sin(np.float64(np.float32(1.3)) * w * t) - w * w * x - c * v
        v = v + dt * acc
        x = x + dt * v
    return float(np.sum((x - train.TARGET) ** 2) + np.float64(np.float32(0.1)) * np.sum((c - 0.5) ** 2))
