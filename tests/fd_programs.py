"""Warp programs for the FD engine's resolution and signature tests (tests/test_fd_resolution.py).

Each is a small training script of one shape the engine must read: a chaotic horizon, a long but stable
one, a gradient wrong on a subset of entries, a hand seed off by an exact factor, a smooth gate. Written
for these tests, not taken from an issue's example.
"""

from __future__ import annotations

from pathlib import Path

# Chaotic: the logistic map at r = 3.9 over 60 steps (Lyapunov exponent ~0.5: sensitivities ~1e13).
LOGISTIC_CHAOS = '''\
import numpy as np
import warp as wp

N = 8
T = 60


@wp.kernel
def logistic(x: wp.array(dtype=float), r: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = r * x[i] * (1.0 - x[i])


@wp.kernel
def loss_k(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - 0.5
    wp.atomic_add(loss, 0, d * d)


x0 = wp.array(np.linspace(0.2, 0.7, N), dtype=float, requires_grad=True)
for it in range(3):
    xs = [x0] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(T):
            wp.launch(logistic, dim=N, inputs=[xs[t], 3.9], outputs=[xs[t + 1]])
        wp.launch(loss_k, dim=N, inputs=[xs[T]], outputs=[loss])
    tape.backward(loss=loss)
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
    x0.assign(np.clip(x0.numpy() - 1e-3 * np.clip(x0.grad.numpy(), -1, 1), 0.01, 0.99))
    tape.zero()
'''

# Long but stable: a damped, driven Duffing oscillator over 400 steps; the drive amplitude is the parameter.
DAMPED_LONG = '''\
import numpy as np
import warp as wp

N = 8
T = 400
DT = 0.02


@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), drive: wp.array(dtype=float), t: float,
         x_out: wp.array(dtype=float), v_out: wp.array(dtype=float)):
    i = wp.tid()
    a = -4.0 * x[i] - 0.3 * v[i] + drive[i] * wp.sin(1.3 * t) - 0.5 * x[i] * x[i] * x[i]
    vn = v[i] + DT * a
    v_out[i] = vn
    x_out[i] = x[i] + DT * vn


@wp.kernel
def loss_k(x: wp.array(dtype=float), v: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i] + 0.1 * v[i] * v[i])


drive = wp.array(np.linspace(0.5, 1.5, N), dtype=float, requires_grad=True)
for it in range(3):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T + 1)]
    vs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(T):
            wp.launch(step, dim=N, inputs=[xs[t], vs[t], drive, t * DT], outputs=[xs[t + 1], vs[t + 1]])
        wp.launch(loss_k, dim=N, inputs=[xs[T], vs[T]], outputs=[loss])
    tape.backward(loss=loss)
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
    drive.assign(drive.numpy() - 0.05 * drive.grad.numpy())
    tape.zero()
'''

PROGRAMS = {"logistic_chaos": LOGISTIC_CHAOS, "damped_long": DAMPED_LONG}


def write_fd_program(root: Path, name: str) -> Path:
    path = root / "sim.py"
    path.write_text(PROGRAMS[name], encoding="utf-8")
    return path
