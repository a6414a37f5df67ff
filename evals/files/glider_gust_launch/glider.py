"""Monte-Carlo glider model: 64 gliders share one launch velocity and fly through random gusts."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_SAMPLES = 64
NUM_STEPS = 50
DT = 0.02
DRAG = 0.15
GUST = 1.5
TARGET = wp.vec3(6.0, 0.0, 1.0)


@wp.kernel
def launch(v0: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v[i] = v0[0]


@wp.kernel
def fly(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    seed: int,
    step: int,
    dt: float,
    x_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    rng = wp.rand_init(seed, i * 1000 + step)
    gust = GUST_C * wp.vec3(wp.randn(rng), 0.3 * wp.randn(rng), wp.randn(rng))
    vel = v[i]
    acc = wp.vec3(0.0, -9.81, 0.0) - DRAG_C * wp.length(vel) * vel + gust
    vel = vel + dt * acc
    v_new[i] = vel
    x_new[i] = x[i] + dt * vel


GUST_C = wp.constant(GUST)
DRAG_C = wp.constant(DRAG)


@wp.kernel
def miss_distance(x: wp.array(dtype=wp.vec3), target: wp.vec3, weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


class GliderBatch:
    def __init__(self):
        self.x = [wp.zeros(NUM_SAMPLES, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(NUM_SAMPLES, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def expected_miss(self, v0: wp.array, seed: int | None = None) -> wp.array:
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        wp.launch(launch, dim=NUM_SAMPLES, inputs=[v0], outputs=[self.v[0]])
        for s in range(NUM_STEPS):
            wp.launch(fly, dim=NUM_SAMPLES, inputs=[self.x[s], self.v[s], seed, s, DT], outputs=[self.x[s + 1], self.v[s + 1]])
        self.loss.zero_()
        wp.launch(miss_distance, dim=NUM_SAMPLES, inputs=[self.x[-1], TARGET, 1.0 / NUM_SAMPLES], outputs=[self.loss])
        return self.loss


BATCH = GliderBatch()
V0 = wp.array([wp.vec3(5.0, 4.0, 0.0)], dtype=wp.vec3, requires_grad=True)


def objective(v0=V0, seed: int | None = None) -> float:
    return float(BATCH.expected_miss(v0, seed).numpy()[0])


def objective_grad(v0=V0, seed: int | None = None) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = BATCH.expected_miss(v0, seed)
    tape.backward(loss)
    return tape
