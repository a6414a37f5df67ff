"""Droplets from a row of spray nozzles: ballistic flight with linear drag, landings recorded."""

import numpy as np
import warp as wp

N_DROPS = 24
CAPACITY = 64


@wp.kernel
def fly(
    speed: wp.array(dtype=float),
    angle: wp.array(dtype=float),
    t_end: float,
    drag: float,
    pos: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    s = speed[i]
    a = angle[i]
    vx = s * wp.cos(a)
    vy = s * wp.sin(a)
    # closed-form flight with linear drag k: x = v/k (1 - e^{-kt}), y adds the gravity term
    e = wp.exp(-drag * t_end)
    x = vx / drag * (1.0 - e)
    y = 1.5 + (vy + 9.81 / drag) / drag * (1.0 - e) - 9.81 / drag * t_end
    pos[i] = wp.vec2(x, y)


@wp.kernel
def record_landings(
    pos: wp.array(dtype=wp.vec2),
    count: wp.array(dtype=int),
    hit_x: wp.array(dtype=float),
    hit_id: wp.array(dtype=int),
):
    i = wp.tid()
    p = pos[i]
    if p[1] <= 0.0:
        k = wp.atomic_add(count, 0, 1)
        if k < CAPACITY:
            hit_x[k] = p[0]
            hit_id[k] = i


@wp.kernel
def landing_loss(
    count: wp.array(dtype=int),
    hit_x: wp.array(dtype=float),
    hit_id: wp.array(dtype=int),
    bed_x: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    k = wp.tid()
    if k < count[0]:
        d = hit_x[k] - bed_x[hit_id[k]]
        wp.atomic_add(loss, 0, d * d)


@wp.kernel
def airborne_loss(pos: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    # droplets still in the air at t_end: pull them down onto the bed
    i = wp.tid()
    y = pos[i][1]
    if y > 0.0:
        wp.atomic_add(loss, 0, 0.2 * y * y)


class SprayBar:
    def __init__(self, t_end=0.85, drag=0.6):
        rng = np.random.default_rng(21)
        self.t_end, self.drag = t_end, drag
        self.angle = wp.array(rng.uniform(0.2, 1.1, N_DROPS).astype(np.float32), dtype=float)
        self.bed_x = wp.array(rng.uniform(2.0, 4.0, N_DROPS).astype(np.float32), dtype=float)
        self.count = wp.zeros(1, dtype=int)
        self.hit_x = wp.zeros(CAPACITY, dtype=float, requires_grad=True)
        self.hit_id = wp.zeros(CAPACITY, dtype=int)
        self.pos = wp.zeros(N_DROPS, dtype=wp.vec2, requires_grad=True)

    def forward(self, speed):
        self.count.zero_()
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(fly, N_DROPS, inputs=[speed, self.angle, self.t_end, self.drag], outputs=[self.pos])
        wp.launch(record_landings, N_DROPS, inputs=[self.pos, self.count], outputs=[self.hit_x, self.hit_id])
        wp.launch(landing_loss, CAPACITY, inputs=[self.count, self.hit_x, self.hit_id, self.bed_x], outputs=[loss])
        wp.launch(airborne_loss, N_DROPS, inputs=[self.pos], outputs=[loss])
        return loss
