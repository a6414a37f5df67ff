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

# A subset zeroed: a custom adjoint treats a smooth cap like a hard clamp, so capped entries get no gradient.
SOFT_CAP_ZEROED = '''\
import numpy as np
import warp as wp

N = 32


@wp.func
def soft_cap(x: float):
    # identity below 1, logarithmic above: smooth (C1) at 1
    if x < 1.0:
        return x
    return 1.0 + wp.log(x)


@wp.func_grad(soft_cap)
def adj_soft_cap(x: float, adj_ret: float):
    # bug: treats the cap like a hard clamp, so capped entries get no gradient
    if x < 1.0:
        wp.adjoint[x] += adj_ret


@wp.kernel
def forward(p: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    y = soft_cap(p[i] * 1.5)
    d = y - target[i]
    wp.atomic_add(loss, 0, d * d)


rng = np.random.default_rng(1)
p_init = rng.uniform(0.1, 0.6, N)
p_init[::5] = 1.2  # a few entries start above the cap
p = wp.array(p_init, dtype=float, requires_grad=True)
target = wp.array(rng.uniform(0.0, 1.0, N), dtype=float)
for it in range(3):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(forward, dim=N, inputs=[p, target], outputs=[loss])
    tape.backward(loss=loss)
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
    p.assign(p.numpy() - 0.01 * p.grad.numpy())
    tape.zero()
'''

# A subset with the wrong sign: a custom adjoint of a smooth |x| drops the sign, so negative residuals are wrong.
SMOOTH_ABS_SIGN = '''\
import numpy as np
import warp as wp

N = 40


@wp.func
def smooth_abs(x: float):
    return wp.sqrt(x * x + 0.01)


@wp.func_grad(smooth_abs)
def adj_smooth_abs(x: float, adj_ret: float):
    # bug: the derivative's sign is dropped, so negative inputs push the wrong way
    wp.adjoint[x] += adj_ret * wp.abs(x) / wp.sqrt(x * x + 0.01)


@wp.kernel
def residual(w: wp.array(dtype=float), a: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    r = smooth_abs(w[i] - a[i])
    wp.atomic_add(loss, 0, r * (1.0 + 0.1 * float(i % 3)))


rng = np.random.default_rng(11)
a = wp.array(rng.uniform(-1.0, 1.0, N), dtype=float)
w_init = rng.uniform(-1.0, 1.0, N)
w_init = np.where(rng.uniform(size=N) < 0.8, a.numpy() + 0.3, w_init)  # most residuals start positive
w = wp.array(w_init, dtype=float, requires_grad=True)
for it in range(3):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(residual, dim=N, inputs=[w, a], outputs=[loss])
    tape.backward(loss=loss)
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
    w.assign(w.numpy() - 0.01 * w.grad.numpy())
    tape.zero()
'''

# A hand seed of 1 on every per-sample loss while the script reports (and means) their mean: a factor N = 64,
# on a model of three parameters, so fewer entries than some checks draw directions.
MEAN_SEEDED_ONES = '''\
import numpy as np
import warp as wp

N = 64


@wp.kernel
def predict(w: wp.array(dtype=float), x: wp.array(dtype=float), y: wp.array(dtype=float), l: wp.array(dtype=float)):
    i = wp.tid()
    p = w[0] * wp.sin(w[1] * x[i]) + w[2]
    d = p - y[i]
    l[i] = d * d


xs = np.linspace(-2.0, 2.0, N)
x = wp.array(xs, dtype=float)
y = wp.array(0.8 * np.sin(1.3 * xs) + 0.1, dtype=float)
w = wp.array([0.5, 1.0, 0.0], dtype=float, requires_grad=True)
opt_lr = 0.02
for it in range(5):
    l = wp.zeros(N, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=N, inputs=[w, x, y], outputs=[l])
    l.grad = wp.ones(N, dtype=float)  # seed every residual term with 1
    tape.backward()
    mse = l.numpy().mean()
    w.assign(w.numpy() - opt_lr * w.grad.numpy())
    print(f"step {it}: mse = {mse:.5f}")
    tape.zero()
'''

# Correct, with a steep smooth contact gate: a sigmoid computed overflow-safe by wp.where (both branches finite).
SIGMOID_GATE = '''\
import numpy as np
import warp as wp

N = 12
T = 80
DT = 0.01
K = 2000.0
W = 0.001


@wp.kernel
def step(y: wp.array(dtype=float), v: wp.array(dtype=float), y_out: wp.array(dtype=float),
         v_out: wp.array(dtype=float)):
    i = wp.tid()
    # contact force gated by a sigmoid of the penetration; wp.where keeps exp() finite far from the ground
    s = y[i] / W
    z = wp.exp(-wp.abs(s))
    gate = wp.where(s > 0.0, z / (1.0 + z), 1.0 / (1.0 + z))
    f = K * gate * (0.05 - y[i])
    vn = v[i] + DT * (f - 9.8)
    v_out[i] = vn
    y_out[i] = y[i] + DT * vn


@wp.kernel
def loss_k(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


rng = np.random.default_rng(0)
v0 = wp.array(rng.uniform(-1.0, 1.0, N), dtype=float, requires_grad=True)
y0 = wp.array(rng.uniform(0.2, 0.6, N), dtype=float)
target = wp.array(rng.uniform(0.1, 0.5, N), dtype=float)
for it in range(3):
    ys = [y0] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T)]
    vs = [v0] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(T):
            wp.launch(step, dim=N, inputs=[ys[t], vs[t]], outputs=[ys[t + 1], vs[t + 1]])
        wp.launch(loss_k, dim=N, inputs=[ys[T], target], outputs=[loss])
    tape.backward(loss=loss)
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
    v0.assign(v0.numpy() - 0.05 * v0.grad.numpy())
    tape.zero()
'''

# Correct, with a contact force that wp.where switches off outside the ground (a kink) and gates by a sigmoid inside.
WHERE_GATED_CONTACT = '''\
import numpy as np
import warp as wp

N = 32
T = 80
DT = 0.01
K = 3000.0
W = 0.0015


@wp.kernel
def step(y: wp.array(dtype=float), v: wp.array(dtype=float), y_out: wp.array(dtype=float),
         v_out: wp.array(dtype=float)):
    i = wp.tid()
    # contact force gated by a sigmoid of the penetration, only while penetrating (wp.where: zero otherwise)
    pen = 0.05 - y[i]
    z = wp.exp(-wp.abs(pen / W))
    gate = wp.where(pen > 0.0, 1.0 / (1.0 + z), z / (1.0 + z))
    f = wp.where(pen > 0.0, K * gate * pen, 0.0)
    vn = v[i] + DT * (f - 9.8)
    v_out[i] = vn
    y_out[i] = y[i] + DT * vn


@wp.kernel
def loss_k(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


rng = np.random.default_rng(0)
v0 = wp.array(rng.uniform(-1.0, 1.0, N), dtype=float, requires_grad=True)
y0 = wp.array(rng.uniform(0.2, 0.6, N), dtype=float)
target = wp.array(rng.uniform(0.1, 0.5, N), dtype=float)
for it in range(3):
    ys = [y0] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T)]
    vs = [v0] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(T):
            wp.launch(step, dim=N, inputs=[ys[t], vs[t]], outputs=[ys[t + 1], vs[t + 1]])
        wp.launch(loss_k, dim=N, inputs=[ys[T], target], outputs=[loss])
    tape.backward(loss=loss)
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
    v0.assign(v0.numpy() - 0.05 * v0.grad.numpy())
    tape.zero()
'''

PROGRAMS = {"logistic_chaos": LOGISTIC_CHAOS, "damped_long": DAMPED_LONG, "soft_cap_zeroed": SOFT_CAP_ZEROED,
            "smooth_abs_sign": SMOOTH_ABS_SIGN, "mean_seeded_ones": MEAN_SEEDED_ONES,
            "sigmoid_gate": SIGMOID_GATE, "where_gated_contact": WHERE_GATED_CONTACT}


def write_fd_program(root: Path, name: str) -> Path:
    path = root / "sim.py"
    path.write_text(PROGRAMS[name], encoding="utf-8")
    return path
