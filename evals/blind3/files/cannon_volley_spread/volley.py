"""A battery of six saluting cannons: shells with quadratic drag in a cross wind. The forward and
backward passes are captured once as a graph and replayed every iteration."""

import numpy as np
import warp as wp

SHELLS = 6
STEPS = 100
DT = 0.02


@wp.kernel
def shell_step(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    wind: wp.vec3,
    drag: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    rel = v[i] - wind
    a = wp.vec3(0.0, -9.81, 0.0) - drag * wp.length(rel) * rel
    vn = v[i] + dt * a
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def burst_miss(x: wp.array(dtype=wp.vec3), burst: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - burst[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Volley:
    def __init__(self):
        rng = np.random.default_rng(9)
        self.wind = wp.vec3(1.5, 0.0, -0.8)
        self.drag = 0.004
        muzzles = np.stack([np.arange(SHELLS) * 3.0, np.zeros(SHELLS), np.zeros(SHELLS)], axis=1)
        bursts = muzzles + np.stack(
            [rng.uniform(30, 40, SHELLS), rng.uniform(25, 35, SHELLS), rng.uniform(-3, 3, SHELLS)], 1
        )
        self.burst = wp.array(bursts.astype(np.float32), dtype=wp.vec3)
        self.x = [wp.array(muzzles.astype(np.float32), dtype=wp.vec3, requires_grad=True)]
        self.v = [
            wp.array(
                np.tile([15.0, 25.0, 0.0], (SHELLS, 1)).astype(np.float32), dtype=wp.vec3, requires_grad=True
            )
        ]
        for _ in range(STEPS):
            self.x.append(wp.zeros(SHELLS, dtype=wp.vec3, requires_grad=True))
            self.v.append(wp.zeros(SHELLS, dtype=wp.vec3, requires_grad=True))
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    @property
    def muzzle_velocity(self):
        return self.v[0]

    def simulate(self):
        self.loss.zero_()
        for t in range(STEPS):
            wp.launch(
                shell_step,
                SHELLS,
                inputs=[self.x[t], self.v[t], self.wind, self.drag, DT],
                outputs=[self.x[t + 1], self.v[t + 1]],
            )
        wp.launch(burst_miss, SHELLS, inputs=[self.x[STEPS], self.burst], outputs=[self.loss])
