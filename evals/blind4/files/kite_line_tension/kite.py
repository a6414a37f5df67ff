"""A kite on a 12-node elastic line in a steady wind, flown by a lift-coefficient schedule."""

import numpy as np
import warp as wp

NODES = 12
STEPS = 180
DT = 0.004
WINDOWS = 6
SEG = 1.0
WIND = 6.0


@wp.kernel
def line_forces(x: wp.array(dtype=wp.vec2), k: float, force: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    f = wp.vec2(0.0, 0.0)
    if i > 0:
        d = x[i - 1] - x[i]
        f = f + k * (wp.length(d) - SEG) * wp.normalize(d)
    if i < NODES - 1:
        d = x[i + 1] - x[i]
        f = f + k * (wp.length(d) - SEG) * wp.normalize(d)
    force[i] = f


@wp.kernel
def advance(x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2), force: wp.array(dtype=wp.vec2),
            cl: wp.array(dtype=float), window: int, dt: float,
            x_out: wp.array(dtype=wp.vec2), v_out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    if i == 0:
        x_out[i] = x[i]
        v_out[i] = v[i]
        return
    m = 0.02
    f = force[i] + wp.vec2(0.0, -9.81 * m) - 0.05 * v[i]
    if i == NODES - 1:
        m = 0.3
        rel = wp.vec2(WIND, 0.0) - v[i]
        q = 0.5 * 1.2 * 0.6 * wp.dot(rel, rel)
        f = force[i] + wp.vec2(0.0, -9.81 * m) + q * cl[window] * wp.vec2(-rel[1], rel[0]) / wp.length(rel)
        f = f + 0.1 * q * wp.normalize(rel)
    vn = v[i] + dt * f / m
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def height_error(x: wp.array(dtype=wp.vec2), z_ref: float, dt: float, loss: wp.array(dtype=float)):
    e = x[NODES - 1][1] - z_ref
    wp.atomic_add(loss, 0, dt * e * e)


class Kite:
    def __init__(self):
        ang = np.radians(50.0)
        s = np.arange(NODES) * SEG
        self.x0 = wp.array(np.stack([s * np.cos(ang), s * np.sin(ang)], 1), dtype=wp.vec2)
        self.force = wp.zeros(NODES, dtype=wp.vec2, requires_grad=True)

    def flight_error(self, cl):
        """Integrated squared height error of the kite against a climbing reference."""
        x = self.x0
        v = wp.zeros(NODES, dtype=wp.vec2, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        for step in range(STEPS):
            wp.launch(line_forces, dim=NODES, inputs=[x, 400.0], outputs=[self.force])
            x_next = wp.empty(NODES, dtype=wp.vec2, requires_grad=True)
            v_next = wp.empty(NODES, dtype=wp.vec2, requires_grad=True)
            wp.launch(advance, dim=NODES, inputs=[x, v, self.force, cl, step * WINDOWS // STEPS, DT],
                      outputs=[x_next, v_next])
            z_ref = 8.5 + 1.5 * step / STEPS
            wp.launch(height_error, dim=1, inputs=[x_next, z_ref, DT], outputs=[loss])
            x, v = x_next, v_next
        return loss
