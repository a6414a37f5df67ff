"""Recover the initial temperature of a particle cloud from a later reading of a few probe particles."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_PARTICLES = 32
NUM_STEPS = 20
DT = 0.05
KAPPA = 2.0
SMOOTHING = 0.35
PROBES = [1, 5, 9, 14, 18, 22, 27, 30]


@wp.func
def neighbour_sums(x: wp.array(dtype=wp.vec2), temp: wp.array(dtype=float), i: int, h: float):
    # a function call is replayed in the backward pass, so its loop accumulators are recomputed there
    w_sum = float(0.0)
    exchange = float(0.0)
    for j in range(x.shape[0]):
        r = wp.length(x[i] - x[j])
        w = wp.exp(-(r * r) / (h * h))
        w_sum += w
        exchange += w * (temp[j] - temp[i])
    return wp.vec2(exchange, w_sum)


@wp.kernel
def diffuse(
    x: wp.array(dtype=wp.vec2),
    temp: wp.array(dtype=float),
    h: float,
    kappa: float,
    dt: float,
    temp_new: wp.array(dtype=float),
):
    i = wp.tid()
    sums = neighbour_sums(x, temp, i, h)
    temp_new[i] = temp[i] + dt * kappa * sums[0] / sums[1]


@wp.kernel
def probe_error(
    temp: wp.array(dtype=float), probes: wp.array(dtype=int), reading: wp.array(dtype=float), loss: wp.array(dtype=float)
):
    k = wp.tid()
    d = temp[probes[k]] - reading[k]
    wp.atomic_add(loss, 0, d * d / float(probes.shape[0]))


@wp.kernel
def smoothness(temp: wp.array(dtype=float), weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    if i > 0:
        d = temp[i] - temp[i - 1]
        wp.atomic_add(loss, 0, weight * d * d)


rng = np.random.default_rng(5)
ANGLES = np.sort(rng.uniform(0.0, 2.0 * np.pi, NUM_PARTICLES))
POSITIONS = wp.array(np.stack([np.cos(ANGLES), np.sin(ANGLES)], axis=1).astype(np.float32), dtype=wp.vec2)
PROBE_IDX = wp.array(np.array(PROBES, np.int32), dtype=int)


class Cloud:
    def __init__(self):
        self.temps = [wp.zeros(NUM_PARTICLES, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def run(self, temp0: wp.array) -> wp.array:
        wp.copy(self.temps[0], temp0)
        for t in range(NUM_STEPS):
            wp.launch(
                diffuse,
                dim=NUM_PARTICLES,
                inputs=[POSITIONS, self.temps[t], SMOOTHING, KAPPA, DT],
                outputs=[self.temps[t + 1]],
            )
        return self.temps[-1]

    def objective(self, temp0: wp.array, reading: wp.array) -> wp.array:
        final = self.run(temp0)
        self.loss.zero_()
        wp.launch(probe_error, dim=len(PROBES), inputs=[final, PROBE_IDX, reading], outputs=[self.loss])
        wp.launch(smoothness, dim=NUM_PARTICLES, inputs=[temp0, 1.0e-3], outputs=[self.loss])
        return self.loss


CLOUD = Cloud()
_true = (20.0 + 15.0 * np.exp(-((ANGLES - 2.0) ** 2) / 0.3)).astype(np.float32)
READING = wp.array(CLOUD.run(wp.array(_true, dtype=float)).numpy()[PROBES], dtype=float)
TEMP0 = wp.array(np.full(NUM_PARTICLES, 20.0, np.float32), dtype=float, requires_grad=True)


def objective(temp0=TEMP0) -> float:
    return float(CLOUD.objective(temp0, READING).numpy()[0])


def objective_grad(temp0=TEMP0) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = CLOUD.objective(temp0, READING)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 1.0
    for it in range(40):
        tape = objective_grad(TEMP0)
        loss = float(CLOUD.loss.numpy()[0])
        TEMP0.assign(TEMP0.numpy() - lr * TEMP0.grad.numpy())
        tape.zero()
        if it % 4 == 0:
            print(f"iter {it:3d}  probe mse {loss:.5f}")
    print("recovered peak temperature:", float(TEMP0.numpy().max()))
