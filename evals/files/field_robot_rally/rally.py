"""Steer 64 field robots (site coordinates in metres) so that they gather as tightly as possible in 20 s."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_ROBOTS = 64
NUM_STEPS = 40
DT = 0.5
SITE_ORIGIN = np.array([2400.0, 3100.0], np.float32)
EFFORT = 0.05


@wp.kernel
def drive(x: wp.array(dtype=wp.vec2), cmd: wp.array(dtype=wp.vec2), dt: float, x_new: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    # speed saturates smoothly at 1.5 m/s
    u = cmd[i]
    s = wp.length(u) + 1.0e-6
    x_new[i] = x[i] + dt * u * (1.5 * wp.tanh(s / 1.5) / s)


@wp.kernel
def moments(x: wp.array(dtype=wp.vec2), sums: wp.array(dtype=float)):
    i = wp.tid()
    p = x[i]
    wp.atomic_add(sums, 0, p[0])
    wp.atomic_add(sums, 1, p[1])
    wp.atomic_add(sums, 2, p[0] * p[0] + p[1] * p[1])


@wp.kernel
def spread_and_effort(
    sums: wp.array(dtype=float), cmd: wp.array(dtype=wp.vec2), n: float, effort: float, loss: wp.array(dtype=float)
):
    i = wp.tid()
    if i == 0:
        mx = sums[0] / n
        my = sums[1] / n
        wp.atomic_add(loss, 0, sums[2] / n - (mx * mx + my * my))
    wp.atomic_add(loss, 0, effort * wp.dot(cmd[i], cmd[i]) / n)


class Fleet:
    def __init__(self, seed: int = 8):
        rng = np.random.default_rng(seed)
        self.start = (SITE_ORIGIN + rng.uniform(-40.0, 40.0, (NUM_ROBOTS, 2))).astype(np.float32)
        self.x = [wp.zeros(NUM_ROBOTS, dtype=wp.vec2, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.sums = wp.zeros(3, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def spread(self, cmd: wp.array) -> wp.array:
        self.x[0].assign(self.start)
        for t in range(NUM_STEPS):
            wp.launch(drive, dim=NUM_ROBOTS, inputs=[self.x[t], cmd, DT], outputs=[self.x[t + 1]])
        self.sums.zero_()
        self.loss.zero_()
        wp.launch(moments, dim=NUM_ROBOTS, inputs=[self.x[-1]], outputs=[self.sums])
        wp.launch(spread_and_effort, dim=NUM_ROBOTS, inputs=[self.sums, cmd, float(NUM_ROBOTS), EFFORT], outputs=[self.loss])
        return self.loss


FLEET = Fleet()
COMMAND = wp.zeros(NUM_ROBOTS, dtype=wp.vec2, requires_grad=True)


def spread_loss(cmd=COMMAND) -> float:
    return float(FLEET.spread(cmd).numpy()[0])


def spread_grad(cmd=COMMAND) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = FLEET.spread(cmd)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 1.0
    for it in range(40):
        tape = spread_grad()
        loss = float(FLEET.loss.numpy()[0])
        COMMAND.assign(COMMAND.numpy() - lr * COMMAND.grad.numpy())
        tape.zero()
        if it % 4 == 0:
            print(f"iter {it:3d}  spread {loss:9.3f} m^2")
