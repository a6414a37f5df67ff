"""A guy rope between two tent poles: 16 point masses, 15 springs, both ends pinned."""

import numpy as np
import warp as wp

NODES = 16
SEGMENTS = NODES - 1
STEPS = 200
DT = 0.004
MASS = 0.05
DAMP = 2.0


@wp.kernel
def spring_forces(x: wp.array(dtype=wp.vec2), k: wp.array(dtype=float), rest: float,
                  f: wp.array(dtype=wp.vec2)):
    s = wp.tid()
    d = x[s + 1] - x[s]
    length = wp.length(d)
    fs = k[s] * (length - rest) * d / length
    wp.atomic_add(f, s, fs)
    wp.atomic_sub(f, s + 1, fs)


@wp.kernel
def integrate(x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2), f: wp.array(dtype=wp.vec2),
              dt: float, x_out: wp.array(dtype=wp.vec2), v_out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    if i == 0 or i == NODES - 1:
        x_out[i] = x[i]
        v_out[i] = v[i]
    else:
        a = f[i] / MASS + wp.vec2(0.0, -9.81) - DAMP * v[i]
        vn = v[i] + dt * a
        v_out[i] = vn
        x_out[i] = x[i] + dt * vn


@wp.kernel
def shape_error(x: wp.array(dtype=wp.vec2), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    e = x[i][1] - target[i]
    wp.atomic_add(loss, 0, e * e)


class Rope:
    def __init__(self):
        xs = np.linspace(0.0, 3.0, NODES)
        self.x0 = wp.array(np.stack([xs, np.zeros(NODES)], 1), dtype=wp.vec2)
        self.rest = 3.0 / SEGMENTS
        self.target = wp.array(-0.35 * np.sin(np.pi * xs / 3.0) * (1.0 + 0.3 * xs / 3.0), dtype=float)
        self.k = None

    def set_stiffness(self, k):
        self.k = wp.clone(k)

    def sag_error(self):
        """Squared distance of the rope's sag from the target profile after STEPS steps."""
        x = self.x0
        v = wp.zeros(NODES, dtype=wp.vec2, requires_grad=True)
        for _ in range(STEPS):
            f = wp.zeros(NODES, dtype=wp.vec2, requires_grad=True)
            wp.launch(spring_forces, dim=SEGMENTS, inputs=[x, self.k, self.rest], outputs=[f])
            x_next = wp.empty(NODES, dtype=wp.vec2, requires_grad=True)
            v_next = wp.empty(NODES, dtype=wp.vec2, requires_grad=True)
            wp.launch(integrate, dim=NODES, inputs=[x, v, f, DT], outputs=[x_next, v_next])
            x, v = x_next, v_next
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(shape_error, dim=NODES, inputs=[x, self.target], outputs=[loss])
        return loss
