"""A rope bridge of 12 planks, Verlet-integrated in float64: springs between neighbours, gravity,
ends pinned. The optimizer designs the planks' initial (rest) placement."""

import numpy as np
import warp as wp

N = 12
STEPS = 90
DT = 0.01


@wp.kernel
def verlet(
    x: wp.array(dtype=wp.vec3d),
    x_prev: wp.array(dtype=wp.vec3d),
    rest: wp.float64,
    k: wp.float64,
    damping: wp.float64,
    dt: wp.float64,
    x_next: wp.array(dtype=wp.vec3d),
):
    i = wp.tid()
    if i == 0 or i == N - 1:
        x_next[i] = x[i]
        return
    f = wp.vec3d(wp.float64(0.0), wp.float64(-9.81), wp.float64(0.0))
    for j in range(2):
        nb = i - 1 + 2 * j
        d = x[nb] - x[i]
        ln = wp.length(d)
        f = f + k * (ln - rest) / ln * d
    vel = (x[i] - x_prev[i]) * (wp.float64(1.0) - damping)
    x_next[i] = x[i] + vel + f * dt * dt


@wp.kernel
def sag_error(
    x: wp.array(dtype=wp.vec3d), target: wp.array(dtype=wp.vec3d), loss: wp.array(dtype=wp.float64)
):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def straight_deck():
    xs = np.linspace(0.0, 5.5, N)
    return np.stack([xs, np.zeros(N), np.zeros(N)], axis=1)


def surveyed_shape():
    xs = np.linspace(0.0, 5.5, N)
    sag = -0.35 * np.sin(np.pi * xs / 5.5)
    return wp.array(np.stack([xs, sag, 0.02 * np.sin(2 * xs)], axis=1), dtype=wp.vec3d)


def simulate(x0, target, k=400.0, damping=0.02):
    x_prev = wp.clone(x0)
    frames = [x_prev, x0]
    for _ in range(STEPS):
        nxt = wp.zeros(N, dtype=wp.vec3d, requires_grad=True)
        wp.launch(verlet, N, inputs=[frames[-1], frames[-2], 0.5, k, damping, DT], outputs=[nxt])
        frames.append(nxt)
    loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    wp.launch(sag_error, N, inputs=[frames[-1], target], outputs=[loss])
    return loss
