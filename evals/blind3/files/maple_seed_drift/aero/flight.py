"""Maple seeds released from a tower in a light wind: 2-D point flight with per-seed drag."""

import numpy as np
import warp as wp

from aero.drag import drag_force

GRAVITY = wp.constant(wp.vec2(0.0, -9.81))


@wp.kernel
def flight_step(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    drag: wp.array(dtype=float),
    wind: wp.vec2,
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    rel = v[i] - wind
    a = GRAVITY + drag_force(rel, drag[i])
    vn = v[i] + dt * a
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def landing_error(x: wp.array(dtype=wp.vec2), spot: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - spot[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Drop:
    def __init__(self, n=10, steps=120, dt=0.01):
        self.n, self.steps, self.dt = n, steps, dt
        rng = np.random.default_rng(5)
        self.x0 = np.stack([np.zeros(n), np.full(n, 12.0)], axis=1).astype(np.float32)
        self.v0 = np.stack([rng.uniform(0.5, 1.5, n), rng.uniform(-1.0, 0.5, n)], axis=1).astype(np.float32)
        self.wind = wp.vec2(2.5, 0.3)
        self.spots = wp.array(
            np.stack([rng.uniform(1.0, 3.0, n), rng.uniform(5.0, 8.0, n)], axis=1).astype(np.float32),
            dtype=wp.vec2,
        )

    def run(self, drag):
        x = wp.array(self.x0, dtype=wp.vec2, requires_grad=True)
        v = wp.array(self.v0, dtype=wp.vec2, requires_grad=True)
        for _ in range(self.steps):
            xn = wp.empty_like(x)
            vn = wp.empty_like(v)
            wp.launch(flight_step, self.n, inputs=[x, v, drag, self.wind, self.dt], outputs=[xn, vn])
            x, v = xn, vn
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(landing_error, self.n, inputs=[x, self.spots], outputs=[loss])
        return loss
