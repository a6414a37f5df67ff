"""Plan the command sequence of a stepper-driven cart so that it parks at x = 1 m after 0.8 s."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_KNOTS = 20
HOLD = 2
NUM_STEPS = NUM_KNOTS * HOLD
DT = 0.02
LEVELS = 16.0  # the driver accepts 1/16 command increments
GAIN = 8.0
FRICTION = 1.5


@wp.kernel
def drive(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    command: wp.array(dtype=float),
    knot: int,
    dt: float,
    x_new: wp.array(dtype=float),
    v_new: wp.array(dtype=float),
):
    level = wp.round(command[knot] * LEVELS_C) / LEVELS_C
    force = GAIN_C * level - FRICTION_C * v[0]
    vel = v[0] + dt * force
    v_new[0] = vel
    x_new[0] = x[0] + dt * vel


LEVELS_C = wp.constant(LEVELS)
GAIN_C = wp.constant(GAIN)
FRICTION_C = wp.constant(FRICTION)


@wp.kernel
def park_error(x: wp.array(dtype=float), v: wp.array(dtype=float), goal: float, loss: wp.array(dtype=float)):
    d = x[0] - goal
    loss[0] = d * d + 0.1 * v[0] * v[0]


class Cart:
    def __init__(self):
        self.x = [wp.zeros(1, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(1, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def run(self, command: wp.array) -> wp.array:
        for s in range(NUM_STEPS):
            wp.launch(drive, dim=1, inputs=[self.x[s], self.v[s], command, s // HOLD, DT], outputs=[self.x[s + 1], self.v[s + 1]])
        wp.launch(park_error, dim=1, inputs=[self.x[-1], self.v[-1], 1.0], outputs=[self.loss])
        return self.loss


CART = Cart()
COMMAND = wp.array(np.full(NUM_KNOTS, 0.5, np.float32), dtype=float, requires_grad=True)


def park_loss(command=COMMAND) -> float:
    return float(CART.run(command).numpy()[0])


def park_grad(command=COMMAND) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = CART.run(command)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 0.5
    for it in range(30):
        tape = park_grad()
        loss = float(CART.loss.numpy()[0])
        COMMAND.assign(np.clip(COMMAND.numpy() - lr * COMMAND.grad.numpy(), -1.0, 1.0))
        tape.zero()
        if it % 3 == 0:
            print(f"iter {it:3d}  park error {loss:.5f}  final x {CART.x[-1].numpy()[0]:.4f}")
    print("commands:", np.round(COMMAND.numpy(), 3))
