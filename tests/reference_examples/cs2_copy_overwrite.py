"""case study 2: a differentiable wp.copy "commits" each step's state onto arrays the step already read."""

import contextlib
import io
import itertools
import json
import sys

import numpy as np
import warp as wp
import warp.autograd

wp.config.log_level = wp.LOG_WARNING
wp.config.verify_autograd_array_access = "--tracker" in sys.argv

N, STEPS, DT, K = 8, 30, 0.05, 2.0


@wp.kernel
def step(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    v_new = v[i] - DT * K * (x[i] + x[i] * x[i] * x[i])  # a stiffening spring: the adjoint needs x
    v_out[i] = v_new
    x_out[i] = x[i] + DT * v_new


@wp.kernel
def mse(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d / float(N))


class Sim:
    def __init__(self, commit_with_copy):
        self.commit_with_copy = commit_with_copy

    def rollout(self, v0):
        x = wp.array(np.linspace(0.2, 1.0, N), dtype=float, requires_grad=True)
        v = wp.clone(v0)
        for _ in range(STEPS):
            x_new = wp.zeros(N, dtype=float, requires_grad=True)
            v_new = wp.zeros(N, dtype=float, requires_grad=True)
            wp.launch(step, dim=N, inputs=[x, v], outputs=[x_new, v_new])
            if self.commit_with_copy:
                wp.copy(x, x_new)  # BUG: keeps one array "the state" for a renderer; x was read above
                wp.copy(v, v_new)
            else:
                x, v = x_new, v_new
        return x

    def loss(self, v0, target):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(mse, dim=N, inputs=[self.rollout(v0), target], outputs=[loss])
        return loss


def gradients(sim, v0_values, target, eps=1e-2):
    v0 = wp.array(v0_values, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        loss = sim.loss(v0, target)
    tape.backward(loss)
    ad = v0.grad.numpy().astype(np.float64)
    fd = np.zeros(N)
    for i in range(N):
        f = []
        for s in (eps, -eps):
            shifted = v0_values.copy()
            shifted[i] += s
            f.append(float(sim.loss(wp.array(shifted, dtype=float), target).numpy()[0]))
        fd[i] = (f[0] - f[1]) / (2 * eps)
    return ad, fd, tape


def train(sim, target, iterations=60, lr=1.0):
    v0 = wp.zeros(N, dtype=float, requires_grad=True)
    history = []
    for _ in range(iterations):
        tape = wp.Tape()
        with tape:
            loss = sim.loss(v0, target)
        tape.backward(loss)
        history.append(float(loss.numpy()[0]))
        v0.assign(v0.numpy() - lr * v0.grad.numpy())
        tape.zero()  # the next iteration must not add onto this gradient
    return history


target = wp.array(np.full(N, 0.5), dtype=float)
start = np.zeros(N, dtype=np.float32)
if "--tracker" in sys.argv:
    gradients(Sim(commit_with_copy=True), start, target)
    sys.exit(0)
report = {}
for name, copy in (("buggy", True), ("fixed", False)):
    ad, fd, tape = gradients(Sim(copy), start, target)
    with contextlib.redirect_stdout(io.StringIO()):
        per_launch = warp.autograd.gradcheck_tape(tape, raise_exception=False, blacklist_kernels=[mse.key])
    history = train(Sim(copy), target)
    report[name] = {
        "max_rel_err": float(np.max(np.abs(ad - fd)) / np.max(np.abs(fd))),
        "ad_dot_fd_cos": float(ad @ fd / np.linalg.norm(ad) / np.linalg.norm(fd)),
        "gradcheck_tape_passed": per_launch,
        "loss_first": history[0],
        "loss_last": history[-1],
        "loss_min": min(history),
        "loss_never_rises": all(b <= a for a, b in itertools.pairwise(history)),
    }
print(json.dumps(report))
