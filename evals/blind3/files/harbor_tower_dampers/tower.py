"""A ten-storey harbour control tower as a shear building: one lateral DOF per floor, springs
between floors, a viscous damper per floor (the design variable), ground shaking at the base."""

import numpy as np
import warp as wp

FLOORS = 10


@wp.kernel
def storey_step(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    damper: wp.array(dtype=float),
    stiff: wp.array(dtype=float),
    ground: float,
    dt: float,
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    below = ground
    below_v = float(0.0)
    if i > 0:
        below = x[i - 1]
        below_v = v[i - 1]
    f = -stiff[i] * (x[i] - below) - damper[i] * (v[i] - below_v)
    if i < FLOORS - 1:
        f += stiff[i + 1] * (x[i + 1] - x[i]) + damper[i + 1] * (v[i + 1] - v[i])
    vn = v[i] + dt * f
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def drift_energy(x: wp.array(dtype=float), v: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i] + 0.05 * v[i] * v[i])


class Tower:
    def __init__(self, steps=240, segment=60, dt=0.01):
        rng = np.random.default_rng(12)
        self.steps, self.segment, self.dt = steps, segment, dt
        self.stiff = wp.array(rng.uniform(300.0, 500.0, FLOORS).astype(np.float32), dtype=float)
        self.x0 = np.zeros(FLOORS, dtype=np.float32)
        self.v0 = np.zeros(FLOORS, dtype=np.float32)

    def ground(self, t):
        return 0.05 * np.sin(2.0 * np.pi * 1.3 * t * self.dt) * np.exp(-0.4 * t * self.dt)

    def run(self, x, v, damper, t0, steps):
        for t in range(t0, t0 + steps):
            xn = wp.zeros(FLOORS, dtype=float, requires_grad=True)
            vn = wp.zeros(FLOORS, dtype=float, requires_grad=True)
            wp.launch(
                storey_step,
                FLOORS,
                inputs=[x, v, damper, self.stiff, float(self.ground(t)), self.dt],
                outputs=[xn, vn],
            )
            x, v = xn, vn
        return x, v

    def loss(self, x, v):
        out = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(drift_energy, FLOORS, inputs=[x, v], outputs=[out])
        return out
