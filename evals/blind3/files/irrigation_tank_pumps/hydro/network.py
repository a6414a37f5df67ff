"""A chain of twelve irrigation tanks joined by pipes; each tank has its own inflow pump."""

import numpy as np
import warp as wp


@wp.kernel
def tank_step(
    level: wp.array(dtype=float),
    pump: wp.array(dtype=float),
    area: wp.array(dtype=float),
    pipe: float,
    drain: float,
    dt: float,
    out: wp.array(dtype=float),
):
    i = wp.tid()
    n = level.shape[0]
    h = level[i]
    q = pump[i] - drain * h
    if i > 0:
        q += pipe * (level[i - 1] - h)
    if i < n - 1:
        q += pipe * (level[i + 1] - h)
    out[i] = h + dt * q / area[i]


@wp.kernel
def level_misfit(level: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = level[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


class TankChain:
    def __init__(self, n=12, steps=80, dt=0.1):
        rng = np.random.default_rng(17)
        self.n, self.steps, self.dt = n, steps, dt
        self.pipe, self.drain = 0.4, 0.15
        self.area = wp.array(rng.uniform(0.8, 1.6, n).astype(np.float32), dtype=float)
        self.level0 = rng.uniform(0.5, 1.0, n).astype(np.float32)
        self.target = wp.array(rng.uniform(1.0, 2.0, n).astype(np.float32), dtype=float)

    def misfit(self, pump):
        level = wp.array(self.level0, dtype=float, requires_grad=True)
        for _ in range(self.steps):
            nxt = wp.zeros(self.n, dtype=float, requires_grad=True)
            wp.launch(
                tank_step,
                self.n,
                inputs=[level, pump, self.area, self.pipe, self.drain, self.dt],
                outputs=[nxt],
            )
            level = nxt
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(level_misfit, self.n, inputs=[level, self.target], outputs=[loss])
        return loss
