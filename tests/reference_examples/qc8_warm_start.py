"""quick-checks §8: a fixed-point solve warm-started outside the tape, with a few taped iterations."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING

TAPED, CONVERGED = 4, 60
M = wp.constant(wp.mat22(0.7, 0.0, 0.0, 0.2))  # u <- M u + b(theta): converges, spectral radius 0.7


@wp.kernel
def iterate(u: wp.array(dtype=wp.vec2), theta: wp.array(dtype=float), u_out: wp.array(dtype=wp.vec2)):
    u_out[0] = M * u[0] + wp.vec2(theta[0], 1.0 - theta[0])


@wp.kernel
def misfit(u: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    d = u[0] - target[0]
    loss[0] = wp.dot(d, d)


def solve(theta, iterations, u0=None):
    u = u0 if u0 is not None else wp.zeros(1, dtype=wp.vec2, requires_grad=True)
    for _ in range(iterations):  # a new buffer per iteration: no overwrite on the tape
        u_next = wp.zeros(1, dtype=wp.vec2, requires_grad=True)
        wp.launch(iterate, dim=1, inputs=[u, theta], outputs=[u_next])
        u = u_next
    return u


def gradient(th, target, warm_start):
    theta = wp.array([th], dtype=float, requires_grad=True)
    u0 = None
    if warm_start:  # converged outside the tape: the forward value is the converged one
        u0 = wp.clone(solve(wp.array([th], dtype=float), CONVERGED), requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        u = solve(theta, TAPED if warm_start else CONVERGED, u0)
        wp.launch(misfit, dim=1, inputs=[u, target], outputs=[loss])
    tape.backward(loss)
    return float(theta.grad.numpy()[0])


def descend(target, warm_start, th=0.2, lr=0.05, steps=150):
    for _ in range(steps):
        th -= lr * gradient(th, target, warm_start)
    return th


reachable = wp.array([solve(wp.array([1.0], dtype=float), CONVERGED).numpy()[0]], dtype=wp.vec2)  # theta = 1
unreachable = wp.array([[1.0, 1.0]], dtype=wp.vec2)
print(
    json.dumps(
        {
            "warm_over_converged": gradient(0.6, unreachable, True) / gradient(0.6, unreachable, False),
            "reachable": {"warm": descend(reachable, True), "converged": descend(reachable, False)},
            "unreachable": {"warm": descend(unreachable, True), "converged": descend(unreachable, False)},
        }
    )
)
