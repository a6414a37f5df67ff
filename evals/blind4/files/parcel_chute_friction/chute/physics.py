"""Parcels sliding down a 25-degree chute lined with six friction sections (penalty contact)."""

import math

import numpy as np
import warp as wp

PARCELS = 6
SECTIONS = 6
LENGTH = 3.0
DT = 0.005
STEPS = 240
ANGLE = math.radians(25.0)
RADIUS = 0.05


@wp.kernel
def chute_step(x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2), mu: wp.array(dtype=float),
               dt: float, x_out: wp.array(dtype=wp.vec2), v_out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    n = wp.vec2(wp.sin(ANGLE), wp.cos(ANGLE))
    t = wp.vec2(wp.cos(ANGLE), -wp.sin(ANGLE))
    p = x[i]
    vi = v[i]
    f = wp.vec2(0.0, -9.81)
    gap = wp.dot(p, n) - RADIUS
    fn = float(0.0)
    if gap < 0.0:
        fn = wp.max(-1.0e4 * gap - 150.0 * wp.dot(vi, n), 0.0)
    s = wp.dot(p, t)
    sec = wp.clamp(int(s / LENGTH * float(SECTIONS)), 0, SECTIONS - 1)
    f = f + fn * n - mu[sec] * fn * wp.tanh(wp.dot(vi, t) / 0.2) * t
    vn = vi + dt * f
    v_out[i] = vn
    x_out[i] = p + dt * vn


@wp.kernel
def stop_error(x: wp.array(dtype=wp.vec2), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.vec2(wp.cos(ANGLE), -wp.sin(ANGLE))
    e = wp.dot(x[i], t) - target[i]
    wp.atomic_add(loss, 0, e * e)


class Chute:
    def __init__(self):
        s0 = np.linspace(0.0, 0.5, PARCELS)
        t = np.array([math.cos(ANGLE), -math.sin(ANGLE)])
        n = np.array([math.sin(ANGLE), math.cos(ANGLE)])
        self.x0 = wp.array(s0[:, None] * t + RADIUS * n, dtype=wp.vec2)
        self.v0 = wp.array(np.tile(2.2 * t, (PARCELS, 1)), dtype=wp.vec2)
        self.target = wp.array(np.linspace(1.2, 2.4, PARCELS), dtype=float)

    def advance(self, x, v, mu, steps):
        for _ in range(steps):
            x_next = wp.empty(PARCELS, dtype=wp.vec2, requires_grad=True)
            v_next = wp.empty(PARCELS, dtype=wp.vec2, requires_grad=True)
            wp.launch(chute_step, dim=PARCELS, inputs=[x, v, mu, DT], outputs=[x_next, v_next])
            x, v = x_next, v_next
        return x, v

    def error(self, x):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(stop_error, dim=PARCELS, inputs=[x, self.target], outputs=[loss])
        return loss
