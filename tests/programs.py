"""Small Warp training programs for the core tests, healthy and broken.

All variants share one kernel block, so Warp compiles it once per test session (the module hash is
the same in every script) and each variant differs only in its host code: the taping pattern.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

HEADER = """\
import sys
import numpy as np
import warp as wp
import warp.optim

N = 8
STEPS = 6
ITERS = 4


@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), x_out: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x_out[i] = x[i] + v[i] * dt + 0.1 * wp.sin(x[i])


@wp.kernel
def step_inplace(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt + 0.1 * wp.sin(x[i])


@wp.kernel
def loss_k(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def loss_abs(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.sqrt(d * d))


@wp.kernel
def shift(loss: wp.array(dtype=float), c: float, out: wp.array(dtype=float)):
    out[0] = loss[0] + c


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def init_v():
    return np.linspace(-1.0, 1.0, N).astype(np.float32)


target = wp.array(np.full(N, 0.5, dtype=np.float32), dtype=float)
"""

# Host code of each variant. `xs` are the per-step states (STEPS + 1 distinct buffers when healthy).
VARIANTS: dict[str, str] = {
    "healthy_optim": """
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
""",
    "missing_zero": """
v = wp.array(init_v(), dtype=float, requires_grad=True)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, N, inputs=[v, v.grad, 0.05])
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
""",
    "no_requires_grad": """
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=(s != STEPS)) for s in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
""",
    "host_update_new_array": """
def train():
    v = wp.array(init_v(), dtype=float, requires_grad=True)
    for it in range(ITERS):
        xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with wp.Tape() as tape:
            for s in range(STEPS):
                wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
            wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
        tape.backward(loss)
        g = v.grad.numpy()
        v = wp.array(v.numpy() - 0.05 * g, dtype=float, requires_grad=True)
        print(f"Iteration {it}: loss={loss.numpy()[0]:.6f}")


if __name__ == "__main__":
    train()
""",
    "pingpong": """
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    a = wp.zeros(N, dtype=float, requires_grad=True)
    b = wp.zeros(N, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[a, v, b, 0.1])
            a, b = b, a
        wp.launch(loss_k, N, inputs=[a, target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
""",
    "truncation": """
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    x = wp.zeros(N, dtype=float, requires_grad=True)
    total = 0.0
    for s in range(STEPS):
        x_next = wp.zeros(N, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, N, inputs=[x, v, x_next, 0.1])
            wp.launch(loss_k, N, inputs=[x_next, target], outputs=[loss])
        tape.backward(loss)
        total += float(loss.numpy()[0])
        x = wp.clone(x_next, requires_grad=True)
    opt.step([v.grad])
    v.grad.zero_()
    print(f"iter {it} loss {total:.6f}")
""",
    "truncation_host_sum": '''
def horizon_gradient(v, losses):
    x = wp.zeros(N, dtype=float, requires_grad=True)
    g = np.zeros(N, dtype=np.float32)
    for s in range(STEPS):
        x_next = wp.zeros(N, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, N, inputs=[x, v, x_next, 0.1])
            wp.launch(loss_k, N, inputs=[x_next, target], outputs=[losses[s]])
        tape.backward(grads={losses[s]: wp.ones(1, dtype=float)})
        g += v.grad.numpy()
        tape.zero()
        x = x_next
    return g


v = wp.array(init_v(), dtype=float, requires_grad=True)
for it in range(ITERS):
    losses = [wp.zeros(1, dtype=float, requires_grad=True) for _ in range(STEPS)]
    g = horizon_gradient(v, losses)
    v.assign(v.numpy() - 0.05 * g)
    print(f"iter {it} loss {sum(float(l.numpy()[0]) for l in losses):.6f}")
''',
    "mean_seeded_as_sum": """
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
    print(f"iter {it} mse {loss.numpy()[0] / N:.6f}")
""",
    "nan_sqrt": """
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_abs, N, inputs=[xs[STEPS], xs[STEPS]], outputs=[loss])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
""",
    "stochastic": """
rng = np.random.default_rng()
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    xs = [wp.array(rng.normal(size=N).astype(np.float32) * 0.1, dtype=float, requires_grad=True)]
    xs += [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
""",
    "cancellation": """
v = wp.array(init_v() * 1e-3, dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    big = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.001])
        wp.launch(loss_k, N, inputs=[xs[STEPS], xs[0]], outputs=[loss])
        wp.launch(shift, 1, inputs=[loss, 1.0e8], outputs=[big])
    tape.backward(big)
    opt.step([v.grad])
    tape.zero()
    print(f"iter {it} loss {big.numpy()[0]:.6f}")
""",
    "no_update": """
v = wp.array(init_v(), dtype=float, requires_grad=True)
w = wp.array(init_v(), dtype=float, requires_grad=True)
xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for s in range(STEPS):
        wp.launch(step, N, inputs=[xs[s], v if s % 2 else w, xs[s + 1], 0.1])
    wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
tape.backward(loss)
print("loss", loss.numpy()[0])
""",
}


def write_program(root: Path, variant: str, name: str = "train.py") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.write_text(HEADER + textwrap.dedent(VARIANTS[variant]), encoding="utf-8")
    return path
