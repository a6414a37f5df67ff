"""Eight firework shells: ballistic flight with quadratic air drag."""

import numpy as np
import warp as wp

N = 8
STEPS = 60
DT = 0.02
DRAG = 0.015


@wp.kernel
def flight_step(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), drag: float, dt: float,
                x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    vi = v[i]
    a = wp.vec3(0.0, -9.81, 0.0) - drag * wp.length(vi) * vi
    v_new = vi + dt * a
    v_out[i] = v_new
    x_out[i] = x[i] + dt * v_new


@wp.kernel
def burst_miss(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Shells:
    def __init__(self, seed=3):
        rng = np.random.default_rng(seed)
        self.x0 = wp.array(np.stack([np.linspace(-7.0, 7.0, N), np.zeros(N), np.zeros(N)], 1), dtype=wp.vec3)
        tgt = np.stack([np.linspace(-9.0, 9.0, N), 18.0 + rng.uniform(-2, 2, N), rng.uniform(-3, 3, N)], 1)
        self.target = wp.array(tgt, dtype=wp.vec3)

    def miss(self, v0):
        """Distance of the shells from their burst points after STEPS steps (on the active tape)."""
        x, v = self.x0, v0
        for _ in range(STEPS):
            x_next = wp.empty(N, dtype=wp.vec3, requires_grad=True)
            v_next = wp.empty(N, dtype=wp.vec3, requires_grad=True)
            wp.launch(flight_step, dim=N, inputs=[x, v, DRAG, DT], outputs=[x_next, v_next])
            x, v = x_next, v_next
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(burst_miss, dim=N, inputs=[x, self.target], outputs=[loss])
        return loss
